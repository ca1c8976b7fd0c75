"""Text to hashed token counts with Arrow compute and numpy: no per-row Python loop.

Tokens are lowercased runs of two or more word characters (letters, digits, underscore:
scikit-learn's default token pattern). Each token is hashed with a polynomial hash over its
UTF-8 bytes followed by the splitmix64 finaliser, computed for many tokens at once; word n-grams
combine the hashes of neighbouring tokens of the same row. The hash is part of the snapshot format
(``HASH_SCHEME``): a model only ever sees features hashed the same way.

A batch's bytes are processed in windows of at most ``_WINDOW_BYTES`` (one window for batches
of usual size), so the per-byte and per-token arrays stay bounded whatever the text: a token
or an n-gram cut by a window's edge is carried into the next window and hashed whole, and the
counts of a row cut by an edge are added together.

Where numba is installed, ``hashed_counts`` takes compiled loops instead (``hashing_loops``):
the same matrix, bit for bit, in one pass over each text's bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ..utils.compiled import worth_compiling
from ..utils.ndarrays import BoolArray, Features, FloatArray, IndexArray, IntArray
from .hashing_loops import HashedRows, Hashing, code_points_beyond_ascii, hashed_rows, splitmix64

Hashes = npt.NDArray[np.uint64]
Bytes = npt.NDArray[np.uint8]
CodePoints = npt.NDArray[np.uint32]

HASH_SCHEME = "poly31-splitmix64-v1"
_MULTIPLIER = np.uint64(0x100000001B3)
_NGRAM_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_WORD_CHARACTER = r"[\pL\pN_]"  # Unicode-aware \w
_NON_WORD_RUN = r"[^\pL\pN_]+"


def tokenize(texts: pa.Array) -> tuple[pa.Array, IntArray]:
    """Tokens of every row, and the row each token came from.

    texts : string array of length n_rows (nulls give no tokens)
    Returns (tokens: string array of length n_tokens, rows: int64 array of length n_tokens).
    """
    pieces = pc.split_pattern_regex(pc.utf8_lower(texts), _NON_WORD_RUN)
    lengths = pc.fill_null(pc.list_value_length(pieces), 0).to_numpy()
    tokens = pc.list_flatten(pieces)
    rows = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    keep = pc.greater_equal(pc.utf8_length(tokens), 2)
    return pc.filter(tokens, keep), rows[keep.to_numpy(zero_copy_only=False)]


def _string_bytes(strings: pa.Array) -> tuple[IntArray, Bytes]:
    """(offsets, data) of a string array without copying: offsets int64 of length n + 1 from 0,
    data the uint8 UTF-8 bytes they point into."""
    strings = strings.cast(pa.large_string()) if strings.type == pa.string() else strings
    if strings.type != pa.large_string():  # the offsets read below are those of these two types
        raise TypeError(f"text must be an Arrow string or large_string array; got {strings.type}")
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[strings.offset:strings.offset + len(strings) + 1]
    data = np.frombuffer(strings.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]] if len(strings) else \
        np.zeros(0, dtype=np.uint8)
    return offsets - offsets[0], data


def _inverse_mod_2_64(odd: int) -> int:
    """x with odd * x == 1 (mod 2**64), by Newton's iteration (each step doubles the bits right)."""
    inverse = odd
    for _ in range(6):
        inverse = inverse * (2 - odd * inverse) % (1 << 64)
    return inverse


_MULTIPLIER_INVERSE = np.uint64(_inverse_mod_2_64(int(_MULTIPLIER)))
_LONGEST_COMPILED_TEXT = 1 << 20  # bytes of a text beyond which numpy, window by window, hashes it
_CACHED_POWERS_LIMIT = 1 << 22  # bytes of a batch up to which the power tables are kept
_powers_cache: dict[int, Hashes] = {}


def _powers(base: np.uint64, n: int) -> Hashes:
    """base**0 .. base**(n - 1) mod 2**64, shape (n,), uint64 (a read-only view of a kept table
    for batches of usual size)."""
    table = _powers_cache.get(int(base))
    if table is None or len(table) < n:
        size = max(n, 1 << 16) if n <= _CACHED_POWERS_LIMIT else n
        table = np.full(size, base, dtype=np.uint64)
        table[0] = 1
        np.cumprod(table, out=table)
        table.flags.writeable = False
        if size <= _CACHED_POWERS_LIMIT:
            _powers_cache[int(base)] = table
    return table[:n]


def _span_polynomials(data: Bytes, starts: IntArray, stops: IntArray) -> Hashes:
    """The polynomial hash of each byte span data[start:stop] (spans non-empty), before the
    finaliser, shape (n_spans,), uint64.

    A span's polynomial hash sum_i (byte_i + 1) * M**(length - 1 - i), mod 2**64, comes from one
    prefix sum over all the bytes: M is odd, so it has an inverse N mod 2**64, and with
    P[k] = sum_{j<k} (data[j] + 1) * N**j the span [s, e) hashes to M**(e - 1) * (P[e] - P[s]).
    """
    if len(starts) == 0:
        return np.zeros(0, dtype=np.uint64)
    n = len(data)
    prefix = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum((data + np.uint64(1)) * _powers(_MULTIPLIER_INVERSE, n), out=prefix[1:])
    polynomials: Hashes = (prefix[stops] - prefix[starts]) * _powers(_MULTIPLIER, n)[stops - 1]
    return polynomials


def _joined_polynomial(head: int, tail: int, tail_length: int) -> int:
    """The polynomial hash of bytes A + B from those of A (``head``) and of B (``tail``, of
    ``tail_length`` bytes): R(AB) = R(A) * M**len(B) + R(B) mod 2**64."""
    return (head * pow(int(_MULTIPLIER), tail_length, 1 << 64) + tail) % (1 << 64)


def hash_tokens(tokens: pa.Array) -> Hashes:
    """A 64-bit hash of each (non-empty) token, shape (n_tokens,), uint64.

    >>> h = hash_tokens(pa.array(["spam", "ham", "spam"]))
    >>> bool(h[0] == h[2]), bool(h[0] == h[1])
    (True, False)
    """
    offsets, data = _string_bytes(tokens)
    return splitmix64(_span_polynomials(data, offsets[:-1], offsets[1:]))


_LOWER = np.arange(256, dtype=np.uint8)
_LOWER[ord("A"):ord("Z") + 1] += 32
_WORD = np.zeros(256, dtype=bool)
for _first, _last in (("a", "z"), ("A", "Z"), ("0", "9"), ("_", "_")):
    _WORD[ord(_first):ord(_last) + 1] = True


# Whether each code point is a word character, as Arrow's regex engine classes it for
# ``tokenize``: learned the first time a code point is met (a few per batch at most, once warm).
_IS_WORD = np.zeros(0x110000, dtype=bool)
_CLASSED = np.zeros(0x110000, dtype=bool)


def _word_characters(points: CodePoints) -> BoolArray:
    """Whether each code point is a word character: shape like ``points`` (valid code points)."""
    new = np.unique(points[~_CLASSED[points]])
    if len(new):
        characters = pa.array(list(new.astype("<u4").tobytes().decode("utf-32-le")), pa.string())
        _IS_WORD[new] = pc.match_substring_regex(characters, f"^{_WORD_CHARACTER}$").to_numpy(zero_copy_only=False)
        _CLASSED[new] = True
    return _IS_WORD[points]


def _utf8_word_bytes(data: Bytes) -> tuple[BoolArray, BoolArray]:
    """For valid UTF-8 bytes, shape (n_bytes,): (is the byte part of a word character, is it
    the first byte of its character). Only the multi-byte characters are decoded."""
    word = _WORD[data]
    leads = np.flatnonzero(data >= 0xC0)  # first bytes of multi-byte characters
    if len(leads):
        padded = np.concatenate([data, np.zeros(3, dtype=np.uint8)])
        lead, c1, c2, c3 = ((padded[leads + i] & mask).astype(np.uint32)
                            for i, mask in ((0, 0xFF), (1, 0x3F), (2, 0x3F), (3, 0x3F)))
        sizes = 2 + (lead >= 0xE0) + (lead >= 0xF0)
        points = np.where(sizes == 2, (lead & 0x1F) << 6 | c1,
                          np.where(sizes == 3, (lead & 0x0F) << 12 | c1 << 6 | c2,
                                   (lead & 0x07) << 18 | c1 << 12 | c2 << 6 | c3))
        valid = (points < 0xD800) | ((points >= 0xE000) & (points < 0x110000))  # always, for valid UTF-8
        is_word = _word_characters(np.where(valid, points, ord(" ")))
        for k in range(int(sizes.max())):  # the character's class to each of its bytes
            has_byte = sizes > k
            word[leads[has_byte] + k] = is_word[has_byte]
    return word, (data & 0xC0) != 0x80


# Bytes of text tokenized at a time: bounds the per-byte and per-token arrays. Lowercasing grows
# a window by half at most, so its power tables stay within _CACHED_POWERS_LIMIT.
_WINDOW_BYTES = 1 << 20


@dataclass(frozen=True)
class _Window:
    """Consecutive bytes of a batch's texts and the rows they hold part of.

    data : uint8 (n_bytes,), whole UTF-8 characters
    offsets : int64 (n_rows_touched + 1,), the bounds of each touched row within ``data``
    first_row : the batch row of the first touched row
    continued : whether the last touched row goes on into the next window
    """

    data: Bytes
    offsets: IntArray
    first_row: int
    continued: bool


def _windows(offsets: IntArray, data: Bytes, size: int) -> Iterator[_Window]:
    """The bytes of texts (offsets int64 (n_rows + 1,) from 0 into data) in windows of at most
    ``size`` bytes (at least 4: a character's most), cut between characters; none for no bytes."""
    start = 0
    while start < len(data):
        stop = min(start + size, len(data))
        while start + 1 < stop < len(data) and data[stop] & 0xC0 == 0x80:  # cut before a character's first byte
            stop -= 1
        first = int(np.searchsorted(offsets, start, "right")) - 1  # the row holding byte `start`
        end = int(np.searchsorted(offsets, stop, "left"))  # rows first .. end - 1 begin before `stop`
        bounds = offsets[first:end + 1] - start
        if start > 0 or stop < len(data):
            np.clip(bounds, 0, stop - start, out=bounds)
        yield _Window(data[start:stop], bounds, first, bool(offsets[end] > stop))
        start = stop


def _lowered(data: Bytes, offsets: IntArray, valid: BoolArray | None) -> tuple[Bytes, IntArray, bool]:
    """Lowercased texts (data uint8 of valid UTF-8, offsets int64 (n_texts + 1,) from 0, valid
    (n_texts,) or None for all): (data, offsets, whether all bytes are ASCII). ASCII is
    lowercased byte by byte, other text by Arrow (which may change its length)."""
    if not len(data) or data.max() < 0x80:
        return _LOWER[data], offsets, True
    validity = None if valid is None else pa.array(valid).buffers()[1]
    texts = pa.Array.from_buffers(pa.large_string(), len(offsets) - 1,
                                  [validity, pa.py_buffer(offsets), pa.py_buffer(data)])
    offsets, data = _string_bytes(pc.utf8_lower(texts))
    return data, offsets, False


def _word_runs(data: Bytes, offsets: IntArray, ascii: bool) -> tuple[IntArray, IntArray, IntArray]:
    """The runs of word characters within each text of lowercased data (offsets int64
    (n_texts + 1,) from 0): (starts, stops, characters), each (n_runs,), in text order. Found
    from the edges of the mask of word bytes."""
    word, first = (_WORD[data], None) if ascii else _utf8_word_bytes(data)
    filled = np.diff(offsets) > 0
    before = np.zeros_like(word)  # is the byte before a word byte of the same text?
    before[1:] = word[:-1]
    before[offsets[:-1][filled]] = False
    after = np.zeros_like(word)  # is the byte after a word byte of the same text?
    after[:-1] = word[1:]
    after[offsets[1:][filled] - 1] = False
    starts = np.flatnonzero(word & ~before)
    stops = np.flatnonzero(word & ~after) + 1
    if first is None:
        return starts, stops, stops - starts
    characters_before = np.empty(len(data) + 1, dtype=np.int64)
    characters_before[0] = 0
    np.cumsum(first, out=characters_before[1:])  # straight into int64: no int64 copy of the mask
    return starts, stops, characters_before[stops] - characters_before[starts]


def _token_hashes_by_window(texts: pa.Array) -> Iterator[tuple[Hashes, IntArray]]:
    """(hash of each token, row of each token) of one window after another, tokens in row order
    and, within a row, text order.

    Tokens are the runs of word characters of at least two characters. A run reaching a window's
    end within its row is held back as its polynomial hash, and joined with its rest at the
    start of the next window (or let go as a token of its own if the next window begins
    between words).
    """
    offsets, data = _string_bytes(texts)
    valid = texts.is_valid().to_numpy(zero_copy_only=False) if texts.null_count else None
    held: tuple[int, int, int] | None = None  # polynomial, characters and row of a cut run
    for window in _windows(offsets, data, _WINDOW_BYTES):
        touched = None if valid is None else valid[window.first_row:window.first_row + len(window.offsets) - 1]
        data_w, offsets_w, ascii = _lowered(window.data, window.offsets, touched)
        starts, stops, characters = _word_runs(data_w, offsets_w, ascii)
        carried, held = held, None
        joins = carried is not None and len(starts) > 0 and starts[0] == 0
        cut = window.continued and len(stops) > 0 and stops[-1] == len(data_w)
        keep = characters >= 2
        keep[:1] |= joins  # a short piece of a run may belong to a long token
        keep[-1:] |= cut
        starts, stops, characters = starts[keep], stops[keep], characters[keep]
        tokens_per_text = np.diff(np.searchsorted(starts, offsets_w))  # n_texts searches, not one per token
        rows = np.repeat(np.arange(window.first_row, window.first_row + len(tokens_per_text), dtype=np.int64),
                         tokens_per_text)
        polynomials = _span_polynomials(data_w, starts, stops)
        if carried is not None:
            polynomial, carried_characters, row = carried
            if joins:
                polynomials[0] = _joined_polynomial(polynomial, int(polynomials[0]), int(stops[0]))
                characters[0] += carried_characters
            else:
                polynomials = np.concatenate([np.array([polynomial], dtype=np.uint64), polynomials])
                characters = np.concatenate([[carried_characters], characters])
                rows = np.concatenate([[row], rows])
        if cut:
            held = int(polynomials[-1]), int(characters[-1]), int(rows[-1])
            polynomials, characters, rows = polynomials[:-1], characters[:-1], rows[:-1]
        if carried is not None:  # the carried run may be short, and pieces of runs were kept
            keep = characters >= 2
            polynomials, rows = polynomials[keep], rows[keep]
        if valid is not None:
            in_valid_row = valid[rows]
            polynomials, rows = polynomials[in_valid_row], rows[in_valid_row]
        yield splitmix64(polynomials), rows


def token_hashes(texts: pa.Array) -> tuple[Hashes, IntArray]:
    """What ``tokenize`` and ``hash_tokens`` give, from the texts' bytes in numpy (no regex):
    (hash of each token, row of each token), each (n_tokens,), in row order and, within a row,
    text order.

    Texts are lowercased (byte by byte when all are ASCII), each byte is classed by its
    character, and tokens are the runs of word bytes of at least two characters.
    """
    hashes, rows = [np.zeros(0, dtype=np.uint64)], [np.zeros(0, dtype=np.int64)]
    for window_hashes, window_rows in _token_hashes_by_window(texts):
        hashes.append(window_hashes)
        rows.append(window_rows)
    return np.concatenate(hashes), np.concatenate(rows)


def _longer_ngrams(hashes: Hashes, rows: IntArray, ngram_max: int) -> Iterator[tuple[int, BoolArray, Hashes]]:
    """For n = 2 to ngram_max, of consecutive tokens (hashes and rows (n_tokens,)): (n, whether the n
    tokens from each start j are of one row, the hash of the n-gram from each start j), both
    (n_tokens - n + 1,). An n-gram's hash is its (n-1)-gram's mixed with its last token's."""
    combined = hashes
    for n in range(2, min(ngram_max, len(hashes)) + 1):  # no n-gram is longer than the tokens
        combined = splitmix64(combined[:-1] * _NGRAM_MULTIPLIER + hashes[n - 1:])
        yield n, rows[n - 1:] == rows[:len(rows) - n + 1], combined


def _ngrams_by_window(tokens: Iterable[tuple[Hashes, IntArray]], ngram_max: int) -> Iterator[tuple[Hashes, IntArray]]:
    """The word 1- to ngram_max-grams of each window of (token hashes, rows), as (hashes,
    rows): an n-gram comes out with the window of its last token, the last ngram_max - 1 tokens
    of a window being carried into the next."""
    carried_hashes, carried_rows = np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    for hashes, rows in tokens:
        all_hashes, all_rows = [hashes], [rows]
        if ngram_max > 1 and len(carried_hashes):
            hashes, rows = np.concatenate([carried_hashes, hashes]), np.concatenate([carried_rows, rows])
        for n, same_row, combined in _longer_ngrams(hashes, rows, ngram_max):
            same_row[:max(len(carried_hashes) - n + 1, 0)] = False  # came out with an earlier window
            all_rows.append(rows[n - 1:][same_row])
            all_hashes.append(combined[same_row])
        if ngram_max > 1:  # only the last row's tokens can begin an n-gram of the next window
            carried_hashes, carried_rows = hashes[-(ngram_max - 1):], rows[-(ngram_max - 1):]
            in_last_row = carried_rows == carried_rows[-1:]
            carried_hashes, carried_rows = carried_hashes[in_last_row], carried_rows[in_last_row]
        yield np.concatenate(all_hashes), np.concatenate(all_rows)


def _first_of_runs(sorted_keys: IntArray) -> IndexArray:
    """Where each run of equal values of sorted_keys (n,) begins, shape (n_distinct,)."""
    first = np.ones(len(sorted_keys), dtype=bool)
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=first[1:])
    return np.flatnonzero(first)


def _sorted_counts(keys: IntArray) -> tuple[IntArray, FloatArray]:
    """The distinct values of keys (n,), sorted in place, and how many times each occurs:
    (distinct (n_distinct,), counts (n_distinct,) float64)."""
    keys.sort()
    starts = _first_of_runs(keys)
    return keys[starts], np.diff(np.append(starts, len(keys))).astype(np.float64)


def _added(pairs: list[tuple[IntArray, FloatArray]]) -> tuple[IntArray, FloatArray]:
    """(distinct keys, counts) pairs added together: the same for their union of keys."""
    keys = np.concatenate([keys for keys, _ in pairs])
    counts = np.concatenate([counts for _, counts in pairs])
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    starts = _first_of_runs(keys)
    return keys[starts], np.add.reduceat(counts, starts) if len(starts) else counts


def _merged(windows: Iterable[tuple[IntArray, FloatArray]], n_bits: int) -> Iterator[tuple[IntArray, FloatArray]]:
    """The (distinct keys, counts) of windows in row order (keys row << n_bits | column, sorted
    within each window), as pieces of one sorted pair: the counts of a row cut by a window's
    edge are added together, the last row of the windows so far being held until it is whole."""
    held: tuple[IntArray, FloatArray] | None = None
    for keys, counts in windows:
        if not len(keys):
            continue
        if held is not None:
            held_keys, held_counts = held
            row = keys[0] >> n_bits
            cut = int(np.searchsorted(held_keys, row << n_bits))  # the held part of this window's first row
            if cut < len(held_keys):
                same = int(np.searchsorted(keys, (row + 1) << n_bits))
                yield held_keys[:cut], held_counts[:cut]
                held_keys, held_counts = _added([(held_keys[cut:], held_counts[cut:]), (keys[:same], counts[:same])])
                keys, counts = keys[same:], counts[same:]
                if not len(keys):
                    held = held_keys, held_counts
                    continue
            yield held_keys, held_counts
        held = keys, counts
    if held is not None:
        yield held


def _csr(pieces: Iterable[tuple[IntArray, FloatArray]], n_rows: int, n_bits: int) -> Features:
    """The CSR matrix (n_rows, 2**n_bits) of sorted (distinct keys row << n_bits | column,
    counts) pieces, in key order and disjoint."""
    import scipy.sparse

    counts, columns = [], []
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    for keys, piece_counts in pieces:
        if not len(keys):
            continue
        rows = keys >> n_bits
        indptr[rows[0] + 1:rows[-1] + 2] += np.bincount(rows - rows[0])
        columns.append((keys & ((1 << n_bits) - 1)).astype(np.int32))
        counts.append(piece_counts)
    np.cumsum(indptr, out=indptr)
    return scipy.sparse.csr_matrix((_joined(counts, np.float64), _joined(columns, np.int32), indptr),
                                   shape=(n_rows, 1 << n_bits))


def _joined(arrays: list[npt.NDArray[Any]], dtype: type[np.generic]) -> npt.NDArray[Any]:
    """The arrays one after another (the array itself when one)."""
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)


def hashed_counts(texts: pa.Array, n_bits: int, ngram_max: int = 1) -> Features:
    """Token counts of each row in 2**n_bits hashed columns, as a CSR matrix.

    Returns scipy.sparse.csr_matrix of shape (len(texts), 2**n_bits), float64.
    """
    if worth_compiling(texts.nbytes):
        return _compiled_hashed_counts(texts, n_bits, ngram_max)
    return _numpy_hashed_counts(texts, n_bits, ngram_max)


def _numpy_hashed_counts(texts: pa.Array, n_bits: int, ngram_max: int) -> Features:
    """``hashed_counts`` in numpy, window by window of the texts' bytes."""
    column_mask = np.uint64((1 << n_bits) - 1)
    # One sort of (row, column) keys gives a window's counts in CSR order.
    windows = (_sorted_counts(rows << n_bits | (hashes & column_mask).astype(np.int64))
               for hashes, rows in _ngrams_by_window(_token_hashes_by_window(texts), ngram_max))
    return _csr(_merged(windows, n_bits), len(texts), n_bits)


def _compiled_hashed_counts(texts: pa.Array, n_bits: int, ngram_max: int) -> Features:
    """``hashed_counts`` by compiled loops (``hashing_loops``): ASCII texts in one pass, texts with
    a byte beyond ASCII in a second over their lowercased bytes, and texts over
    ``_LONGEST_COMPILED_TEXT`` bytes in numpy (which keeps their tokens in bounded memory)."""
    hashing = Hashing(n_bits, ngram_max, int(_MULTIPLIER), int(_NGRAM_MULTIPLIER))
    offsets, data = _string_bytes(texts)
    valid = texts.is_valid().to_numpy(zero_copy_only=False) if texts.null_count else np.ones(len(texts), dtype=bool)
    too_long = valid & (np.diff(offsets) > _LONGEST_COMPILED_TEXT)
    ascii_rows = hashed_rows(data, offsets, valid & ~too_long, hashing)
    parts = [(np.arange(len(texts)), ascii_rows)]
    beyond_ascii = np.flatnonzero(ascii_rows.left)
    if len(beyond_ascii):  # large_string: lowercasing may lengthen them past 32-bit offsets
        taken = texts.take(pa.array(beyond_ascii)).cast(pa.large_string())
        lowered_offsets, lowered = _string_bytes(pc.utf8_lower(taken))
        _word_characters(code_points_beyond_ascii(lowered))  # classes the code points not met before
        parts.append((beyond_ascii, hashed_rows(lowered, lowered_offsets, np.ones(len(beyond_ascii), dtype=bool),
                                                hashing, _IS_WORD)))
    long_rows = np.flatnonzero(too_long)
    if len(long_rows):
        counted = _numpy_hashed_counts(texts.take(pa.array(long_rows)), n_bits, ngram_max)
        parts.append((long_rows, HashedRows(counted.indptr.astype(np.int64), counted.indices, counted.data,
                                            np.zeros(len(long_rows), dtype=bool))))
    return _interleaved(parts, len(texts), n_bits)


def _interleaved(parts: list[tuple[IndexArray, HashedRows]], n_rows: int, n_bits: int) -> Features:
    """The CSR matrix (n_rows, 2**n_bits) of parts, each (the rows it holds (k,), their counts),
    a row's cells coming from the one part that gave it any."""
    import scipy.sparse

    lengths = np.zeros(n_rows, dtype=np.int64)
    for rows, part in parts:
        lengths[rows] += np.diff(part.indptr)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    if len(parts) == 1:
        indices, counts = parts[0][1].indices, parts[0][1].counts
    else:
        indices, counts = np.empty(indptr[-1], dtype=np.int32), np.empty(indptr[-1])
        for rows, part in parts:
            part_lengths = np.diff(part.indptr)
            at = np.arange(len(part.indices)) - np.repeat(part.indptr[:-1] - indptr[rows], part_lengths)
            indices[at], counts[at] = part.indices, part.counts
    return scipy.sparse.csr_matrix((counts, indices, indptr), shape=(n_rows, 1 << n_bits))


def hashed_names(texts: pa.Array, n_bits: int, ngram_max: int = 1,
                 columns: IntArray | None = None) -> list[dict[int, str]]:
    """For each row, the name of each column ``hashed_counts`` gives it: the row's words and word
    n-grams (words joined by a space) that hash to that column, several joined by "|" in sorted
    order. Tokenized and hashed as ``hashed_counts`` does, through ``tokenize`` and ``hash_tokens``.

    columns : (n_rows, k) the columns to name in each row (-1: none), or None for every column.

    >>> names = hashed_names(pa.array(["Free prize", None]), 20, ngram_max=2)
    >>> sorted(names[0].values()), names[1]
    (['free', 'free prize', 'prize'], {})
    """
    tokens, rows = tokenize(texts)
    starts, lengths, keys = _grams(hash_tokens(tokens) if len(tokens) else np.zeros(0, np.uint64), rows, n_bits,
                                   ngram_max)
    if columns is not None:
        named_rows, places = np.nonzero(columns >= 0)
        keep = np.isin(keys, named_rows.astype(np.int64) << n_bits | columns[named_rows, places])
        starts, lengths, keys = starts[keep], lengths[keep], keys[keep]
    words = tokens.to_pylist()
    grams: dict[int, set[str]] = {}  # row << n_bits | column -> its names
    for key, start, length in zip(keys.tolist(), starts.tolist(), lengths.tolist(), strict=True):
        grams.setdefault(key, set()).add(words[start] if length == 1 else " ".join(words[start:start + length]))
    found: list[dict[int, str]] = [{} for _ in range(len(texts))]
    for key, names in grams.items():
        found[key >> n_bits][key & ((1 << n_bits) - 1)] = "|".join(sorted(names)) if len(names) > 1 else names.pop()
    return found


def _grams(hashes: Hashes, rows: IntArray, n_bits: int, ngram_max: int) -> tuple[IndexArray, IndexArray, IntArray]:
    """Every word 1- to ngram_max-gram of consecutive tokens (hashes and rows (n_tokens,)): its first
    token, its length in tokens, and row << n_bits | its column, each (n_grams,)."""
    starts, lengths, gram_hashes = [np.arange(len(hashes))], [np.ones(len(hashes), dtype=np.intp)], [hashes]
    for n, same_row, combined in _longer_ngrams(hashes, rows, ngram_max):
        at = np.flatnonzero(same_row)
        starts.append(at)
        lengths.append(np.full(len(at), n, dtype=np.intp))
        gram_hashes.append(combined[at])
    first = np.concatenate(starts)
    columns = (np.concatenate(gram_hashes) & np.uint64((1 << n_bits) - 1)).astype(np.int64)
    return first, np.concatenate(lengths), rows[first] << n_bits | columns
