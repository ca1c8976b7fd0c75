"""Hashed counts by compiled loops: the matrix of the numpy path, bit for bit, whatever the text."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbstream.arrow import hashing
from nbstream.arrow.hashing import hashed_counts
from nbstream.utils import compiled
from nbstream.utils.compiled import SWITCH

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def every_batch_compiled(monkeypatch):
    """The compiled loops take batches of any size here (by default small ones take numpy)."""
    monkeypatch.setattr(compiled, "SMALLEST_BATCH", 0)


def _both_paths(monkeypatch, texts: pa.Array, n_bits: int, ngram_max: int):
    monkeypatch.setenv(SWITCH, "1")
    compiled = hashed_counts(texts, n_bits, ngram_max)
    monkeypatch.setenv(SWITCH, "0")
    numpy_path = hashed_counts(texts, n_bits, ngram_max)
    monkeypatch.setenv(SWITCH, "1")
    return compiled, numpy_path


def _assert_identical(compiled, numpy_path):
    assert compiled.shape == numpy_path.shape
    for ours, theirs in ((compiled.indptr, numpy_path.indptr), (compiled.indices, numpy_path.indices),
                         (compiled.data, numpy_path.data)):
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)


MIXED = ["Free PRIZE!! call 09061701461 now", None, "", "x", "a b c", "A_1 __ 9z_", "Ünïcödé Straße ÉCOLE x",
         "日本語のテキスト 東京タワー", "İstanbul ΑΒΓ ﬁne 𝐀𝐁 x²y ǅemal", "a\u00a0b c\u2003d e\u200bf", "café—thé…",
         "tabs\tand\nnew lines\r\nend", "ends with a long word " + "w" * 300]


@pytest.mark.parametrize("ngram_max", [1, 2, 3, 5])
def test_ascii_unicode_nulls_and_empty_texts_give_the_numpy_paths_matrix(monkeypatch, ngram_max):
    _assert_identical(*_both_paths(monkeypatch, pa.array(MIXED * 3), 18, ngram_max))


def test_a_batch_of_only_texts_beyond_ascii_or_only_nulls(monkeypatch):
    _assert_identical(*_both_paths(monkeypatch, pa.array(["über straße", "ñandú", "東京 大阪"]), 20, 2))
    _assert_identical(*_both_paths(monkeypatch, pa.array([None, None], pa.string()), 20, 2))
    _assert_identical(*_both_paths(monkeypatch, pa.array([], pa.string()), 20, 1))


def test_a_sliced_large_string_array_reads_its_own_rows(monkeypatch):
    texts = pa.array(["zero one", "two three", "föur five", "six"], pa.large_string()).slice(1, 2)
    compiled, numpy_path = _both_paths(monkeypatch, texts, 16, 2)
    _assert_identical(compiled, numpy_path)
    assert compiled.sum() == 6  # two words and a bigram in each


def test_texts_over_the_longest_compiled_are_hashed_by_numpy_in_order(monkeypatch):
    monkeypatch.setattr(hashing, "_LONGEST_COMPILED_TEXT", 12)
    texts = pa.array(["short one", "a text longer than twelve bytes", "wörd ok", "another long text here", "ab"])
    _assert_identical(*_both_paths(monkeypatch, texts, 20, 2))


def test_ngrams_beyond_the_tokens_allocate_nothing_for_them(monkeypatch):
    compiled, numpy_path = _both_paths(monkeypatch, pa.array(["one two three"]), 8, 10**9)
    _assert_identical(compiled, numpy_path)
    assert compiled.sum() == 6


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=60),
                          st.text(alphabet=st.sampled_from(list("ab AB_1.é日\u00a0\u0130ß")), max_size=40)),
                max_size=12),
       st.integers(1, 4))
def test_any_texts_give_the_numpy_paths_matrix(texts, ngram_max):
    with pytest.MonkeyPatch.context() as monkeypatch:
        _assert_identical(*_both_paths(monkeypatch, pa.array(texts, pa.string()), 12, ngram_max))


def _unchecked_strings(*raw: bytes) -> pa.Array:
    """A string array of these bytes as they are, unvalidated (as a forged Parquet file may hold)."""
    offsets = np.cumsum([0, *map(len, raw)]).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), len(raw), [None, pa.py_buffer(offsets.tobytes()),
                                                         pa.py_buffer(b"".join(raw))])


def test_surrogates_and_points_beyond_unicode_separate_tokens_as_in_numpy(monkeypatch):
    texts = _unchecked_strings("ab é".encode() + b" \xed\xa0\x80cd", b"xy\xf4\x90\x80\x80zw \xc3\xa9t\xc3\xa9", b"ok")
    compiled, numpy_path = _both_paths(monkeypatch, texts, 16, 2)
    _assert_identical(compiled, numpy_path)
    assert compiled[2].sum() == 1


def test_one_long_token_with_a_huge_ngram_length_allocates_for_its_tokens_only(monkeypatch):
    compiled, numpy_path = _both_paths(monkeypatch, pa.array(["x" * 200_000]), 18, 10**6)
    _assert_identical(compiled, numpy_path)
    assert compiled.nnz == 1


def test_an_array_of_another_string_layout_is_refused_in_one_line():
    with pytest.raises(TypeError, match="string or large_string"):
        hashed_counts(pa.array(["ab cd"], pa.string_view()), 12)
