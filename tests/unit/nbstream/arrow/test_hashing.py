"""Text hashing window by window: the same matrix as in one window, in bounded memory."""

from __future__ import annotations

import hashlib
import tracemalloc
from collections import Counter
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbstream.arrow import hashing
from nbstream.arrow.hashing import hash_tokens, hashed_counts, hashed_names, token_hashes, tokenize

_MASK = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    for shift, multiplier in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        x = ((x ^ (x >> shift)) * multiplier) & _MASK
    return x ^ (x >> 31)


def _reference_counts(texts: pa.Array, n_bits: int, ngram_max: int) -> Counter[tuple[int, int]]:
    """(row, column) -> count, token by token: the regex tokenizer, each token hashed alone, and
    an n-gram's hash the (n-1)-gram's mixed with its last token's."""
    tokens, rows = tokenize(texts)
    hashes = [int(h) for h in hash_tokens(tokens)] if len(tokens) else []
    counts: Counter[tuple[int, int]] = Counter()
    for row in set(rows.tolist()):
        row_hashes = [h for h, r in zip(hashes, rows.tolist(), strict=True) if r == row]
        for start in range(len(row_hashes)):
            combined = row_hashes[start]
            counts[row, combined & ((1 << n_bits) - 1)] += 1
            for end in range(start + 1, min(start + ngram_max, len(row_hashes))):
                combined = _splitmix64((combined * 0x9E3779B97F4A7C15 + row_hashes[end]) & _MASK)
                counts[row, combined & ((1 << n_bits) - 1)] += 1
    return counts


def _as_counter(matrix) -> Counter[tuple[int, int]]:
    coo = matrix.tocoo()
    return Counter({(int(r), int(c)): int(v) for r, c, v in zip(coo.row, coo.col, coo.data, strict=True)})


def _assert_same_matrix(a, b) -> None:
    assert a.shape == b.shape
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def _in_windows_of(size: int):
    return mock.patch.object(hashing, "_WINDOW_BYTES", size)


_words = st.text(alphabet=st.sampled_from("abcXYZ_09éÉß中😀İΣς٣"), min_size=1, max_size=12)
_separators = st.sampled_from([" ", ", ", "!", "\t\n", "-", "\u0301", "\u00ad", "..."])
_rows = st.lists(st.one_of(st.none(), st.lists(st.one_of(_words, _separators), max_size=12).map("".join)),
                 max_size=12)


@settings(max_examples=400, deadline=None)
@given(_rows, st.integers(1, 5), st.integers(2, 16), st.sampled_from([4, 5, 7, 13, 64]), st.booleans())
def test_tiny_windows_give_the_matrix_of_one_window_and_of_the_reference(rows, ngram_max, n_bits, window, sliced):
    texts = pa.array([None, *rows], pa.string())
    texts = texts.slice(1) if sliced else texts  # offsets not starting at 0
    whole = hashed_counts(texts, n_bits, ngram_max)
    with _in_windows_of(window):
        windowed = hashed_counts(texts, n_bits, ngram_max)
        windowed_tokens = token_hashes(texts)
    _assert_same_matrix(windowed, whole)
    for got, expected in zip(windowed_tokens, token_hashes(texts), strict=True):
        np.testing.assert_array_equal(got, expected)
    assert _as_counter(whole) == _reference_counts(texts, n_bits, ngram_max)


def test_a_token_spanning_many_windows_is_hashed_whole_and_ngrams_cross_windows():
    texts = pa.array(["x" * 1000 + " Héllo, wörld", "中" * 50, "", None, "a " * 40 + "zz" * 30 + " end"])
    with _in_windows_of(7):
        hashes, rows = token_hashes(texts)
        windowed = hashed_counts(texts, 20, 3)
    assert hashes[0] == hash_tokens(pa.array(["x" * 1000]))[0]
    assert rows.tolist() == [0, 0, 0, 1, 4, 4]
    _assert_same_matrix(windowed, hashed_counts(texts, 20, 3))
    assert np.asarray(windowed.sum(axis=1)).ravel().tolist() == [6, 1, 0, 0, 3]


def _corpus() -> pa.Array:
    """3,000 rows (1.15 MB: more than one window) of words, punctuation, multi-byte characters, long tokens, nulls."""
    rng = np.random.default_rng(2024)
    words = ["Free", "entry", "wkly", "comp", "héllo", "WÖRLD", "naïve", "中文", "😀ok", "İstanbul", "ΣΟΦΙΑ", "x",
             "a_b", "2024", "don't", "e-mail", "z" * 300, "ab" * 40]
    separators = [" ", ", ", "! ", "\t", "\n", "...", " - "]
    rows: list[str | None] = []
    for _ in range(3000):
        if rng.random() < 0.05:
            rows.append(None)
            continue
        n = int(rng.integers(0, 30))
        rows.append("".join(str(rng.choice(words)) + str(rng.choice(separators)) for _ in range(n)))
    return pa.array(rows, pa.string())


def _digest(matrix) -> str:
    digest = hashlib.sha256()
    for array in (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64), matrix.data.astype(np.float64)):
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


@pytest.mark.parametrize("window", [None, 257, 65536])
@pytest.mark.parametrize("ngram_max, pinned", [(1, "e62f1f040ea4f556"), (2, "d5f4a50307b30d5a"),
                                               (3, "bf694c3372b98915")])
def test_the_matrix_is_the_one_saved_models_were_trained_on(window, ngram_max, pinned):
    """Pinned from the batch-at-once hashing that came before windows: snapshots must keep predicting the same."""
    texts = _corpus()
    if window is None:
        assert _digest(hashed_counts(texts, 12, ngram_max)) == pinned
    else:
        with _in_windows_of(window):
            assert _digest(hashed_counts(texts, 12, ngram_max)) == pinned


@pytest.mark.parametrize("text, unigrams_and_bigrams", [("a" * 50_000_000, 1),
                                                        ("ab " * 16_666_666, 16_666_666 + 16_666_665)])
def test_a_50_mb_row_is_hashed_in_bounded_memory(text, unigrams_and_bigrams):
    """Hashed at once, these took about 1 GB and 2 GB (per-byte prefix sums, per-token arrays)."""
    texts = pa.array([text])
    del text
    tracemalloc.start()
    try:
        counts = hashed_counts(texts, 20, 2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counts.sum() == unigrams_and_bigrams
    assert peak < 200e6, f"peak {peak / 1e6:.0f} MB"


# ---- names of the hashed columns ------------------------------------------------------------------
def _column_of(name: str, n_bits: int) -> int:
    """The column a word or an n-gram (words joined by a space) hashes to, by the reference's rule."""
    hashes = [int(h) for h in hash_tokens(pa.array(name.split(" ")))]
    combined = hashes[0]
    for word_hash in hashes[1:]:
        combined = _splitmix64((combined * 0x9E3779B97F4A7C15 + word_hash) & _MASK)
    return combined & ((1 << n_bits) - 1)


def _grams_of_row(texts: pa.Array, row: int, ngram_max: int) -> set[str]:
    """The row's words and n-grams by the regex tokenizer, spelled as names are."""
    tokens, rows = tokenize(texts)
    words = [word for word, r in zip(tokens.to_pylist(), rows.tolist(), strict=True) if r == row]
    return {" ".join(words[start:start + n]) for n in range(1, ngram_max + 1) for start in range(len(words) - n + 1)}


@settings(max_examples=200, deadline=None)
@given(_rows, st.integers(1, 4), st.integers(1, 12))
def test_every_hashed_column_of_a_row_is_named_by_the_row_s_grams_that_hash_to_it(rows, ngram_max, n_bits):
    texts = pa.array(rows, pa.string())
    counts = hashed_counts(texts, n_bits, ngram_max)
    names = hashed_names(texts, n_bits, ngram_max)
    assert len(names) == len(rows)
    for row, row_names in enumerate(names):
        columns = counts.indices[counts.indptr[row]:counts.indptr[row + 1]]
        assert sorted(row_names) == sorted(columns.tolist())
        grams = _grams_of_row(texts, row, ngram_max)
        named = set()
        for column, name in row_names.items():
            parts = name.split("|")
            assert parts == sorted(set(parts))
            assert all(_column_of(part, n_bits) == column for part in parts)
            named.update(parts)
        assert named == grams
    wanted = np.full((len(rows), 3), -1, dtype=np.int64)  # two columns of each row's, and one it may not have
    for row, row_names in enumerate(names):
        wanted[row, :min(2, len(row_names))] = sorted(row_names)[:2]
        wanted[row, 2] = (1 << n_bits) - 1
    restricted = hashed_names(texts, n_bits, ngram_max, columns=wanted)
    assert restricted == [{column: row_names[column] for column in chosen if column in row_names}
                          for row_names, chosen in zip(names, wanted.tolist(), strict=True)]


def test_colliding_grams_are_joined_and_unicode_is_named_lowercased():
    names = hashed_names(pa.array(["Café ÉTÉ naïve café", "x y"]), 1, ngram_max=2)
    grams = ["café", "été", "naïve", "café été", "été naïve", "naïve café"]  # "x" and "y" are too short
    by_column: dict[int, list[str]] = {}
    for gram in grams:
        by_column.setdefault(_column_of(gram, 1), []).append(gram)
    assert names == [{column: "|".join(sorted(colliding)) for column, colliding in by_column.items()}, {}]
    assert any("|" in name for name in names[0].values())  # six grams in two columns
