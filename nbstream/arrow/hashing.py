"""Text to hashed token counts with Arrow compute and numpy: no per-row Python loop.

Tokens are lowercased runs of two or more word characters (letters, digits, underscore:
scikit-learn's default token pattern). Each token is hashed with a polynomial hash over its
UTF-8 bytes followed by the splitmix64 finaliser, computed for all tokens of a batch at once; word n-grams combine the
hashes of neighbouring tokens of the same row. The hash is part of the snapshot format
(``HASH_SCHEME``): a model only ever sees features hashed the same way.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ..ndarrays import BoolArray, Features, IntArray

Hashes = npt.NDArray[np.uint64]
Bytes = npt.NDArray[np.uint8]
CodePoints = npt.NDArray[np.uint32]

HASH_SCHEME = "poly31-splitmix64-v1"
_MULTIPLIER = np.uint64(0x100000001B3)
_NGRAM_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_WORD_CHARACTER = r"[\pL\pN_]"  # Unicode-aware \w
_NON_WORD_RUN = r"[^\pL\pN_]+"


def _splitmix64(x: Hashes) -> Hashes:
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    mixed: Hashes = x ^ (x >> np.uint64(31))
    return mixed


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


def _hash_spans(data: Bytes, starts: IntArray, lengths: IntArray) -> Hashes:
    """The hash of each byte span data[start:start + length] (spans non-empty), shape (n_spans,), uint64.

    A span's polynomial hash sum_i (byte_i + 1) * M**(length - 1 - i), mod 2**64, comes from one
    prefix sum over all the bytes: M is odd, so it has an inverse N mod 2**64, and with
    P[k] = sum_{j<k} (data[j] + 1) * N**j the span [s, e) hashes to M**(e - 1) * (P[e] - P[s]).
    """
    if len(starts) == 0:
        return np.zeros(0, dtype=np.uint64)
    n = len(data)
    prefix = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum((data + np.uint64(1)) * _powers(_MULTIPLIER_INVERSE, n), out=prefix[1:])
    stops = starts + lengths
    return _splitmix64((prefix[stops] - prefix[starts]) * _powers(_MULTIPLIER, n)[stops - 1])


def hash_tokens(tokens: pa.Array) -> Hashes:
    """A 64-bit hash of each (non-empty) token, shape (n_tokens,), uint64.

    >>> h = hash_tokens(pa.array(["spam", "ham", "spam"]))
    >>> bool(h[0] == h[2]), bool(h[0] == h[1])
    (True, False)
    """
    offsets, data = _string_bytes(tokens)
    return _hash_spans(data, offsets[:-1], np.diff(offsets))


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


def token_hashes(texts: pa.Array) -> tuple[Hashes, IntArray]:
    """What ``tokenize`` and ``hash_tokens`` give, from the texts' bytes in numpy (no regex):
    (hash of each token, row of each token), tokens in row order and, within a row, text order.

    Texts are lowercased (byte by byte when all are ASCII), each byte is classed by its
    character, and tokens are the runs of word bytes of at least two characters, found from the
    edges of the byte mask.
    """
    texts = pc.fill_null(texts, "")
    ascii = pc.all(pc.string_is_ascii(texts)).as_py() is not False
    if not ascii:
        texts = pc.utf8_lower(texts)
    offsets, data = _string_bytes(texts)
    if ascii:
        data = _LOWER[data]
        word, first = _WORD[data], None
    else:
        word, first = _utf8_word_bytes(data)
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
        characters = stops - starts
    else:
        characters_before = np.concatenate([[0], np.cumsum(first)])
        characters = characters_before[stops] - characters_before[starts]
    keep = characters >= 2
    starts, lengths = starts[keep], (stops - starts)[keep]
    tokens_per_text = np.diff(np.searchsorted(starts, offsets))  # n_texts searches, not one per token
    rows = np.repeat(np.arange(len(texts), dtype=np.int64), tokens_per_text)
    return _hash_spans(data, starts, lengths), rows


def hashed_counts(texts: pa.Array, n_bits: int, ngram_max: int = 1) -> Features:
    """Token counts of each row in 2**n_bits hashed columns, as a CSR matrix.

    Returns scipy.sparse.csr_matrix of shape (len(texts), 2**n_bits), float64.
    """
    import scipy.sparse

    hashes, rows = token_hashes(texts)
    all_rows, all_hashes = [rows], [hashes]
    combined = hashes
    for n in range(2, min(ngram_max, len(hashes)) + 1):  # no n-gram is longer than the batch's tokens
        # n-gram ending at token j+n-1 = previous (n-1)-gram hash mixed with the next token.
        same_row = rows[n - 1:] == rows[:len(rows) - n + 1]
        combined = _splitmix64(combined[:-1] * _NGRAM_MULTIPLIER + hashes[n - 1:])
        all_rows.append(rows[n - 1:][same_row])
        all_hashes.append(combined[same_row])
    rows, hashes = np.concatenate(all_rows), np.concatenate(all_hashes)
    # One sort of (row, column) keys gives the matrix in CSR order, duplicates next to each other.
    keys = rows << n_bits | (hashes & np.uint64((1 << n_bits) - 1)).astype(np.int64)
    keys.sort()
    first = np.ones(len(keys), dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, len(keys))).astype(np.float64)
    distinct = keys[starts]
    indptr = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.bincount(distinct >> n_bits, minlength=len(texts)), out=indptr[1:])
    columns = (distinct & ((1 << n_bits) - 1)).astype(np.int32)
    return scipy.sparse.csr_matrix((counts, columns, indptr), shape=(len(texts), 1 << n_bits))
