"""Hashed token counts by compiled loops (``nbstream.utils.compiled``): the numbers of
``hashing.hashed_counts``, in one pass over each text's bytes.

A text is read byte by byte: a run of word characters is hashed as it is read (the polynomial hash
of its bytes by Horner's rule, then the splitmix64 finaliser) and kept as a token when it has two
characters or more; each row's word n-grams come from its tokens, and its columns are sorted and
counted straight into CSR arrays. No array of the batch's bytes is made, where the numpy path makes
several. ASCII texts are lowercased byte by byte as they are read; a text with a byte beyond ASCII
is left for a second pass over its lowercased bytes (Unicode lowercasing is Arrow's), which decodes
each character and looks its class up in a table of the code points (also Arrow's).
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from ..utils.compiled import Kernel
from ..utils.ndarrays import BoolArray, FloatArray, IntArray

ROWS_PER_CALL = 1 << 14  # rows hashed by one call of the loops: their arrays stay a few MB

Bytes = npt.NDArray[np.uint8]
Hashes = npt.NDArray[np.uint64]
HashT = TypeVar("HashT", np.uint64, Hashes)  # one value, or an array of them


class HashedRows(NamedTuple):
    """Each row's hashed counts as CSR arrays, and the rows left for another pass.

    indptr : int64 (n_rows + 1,); indices : int32 (nnz,) each row's columns in order; counts :
    float64 (nnz,); left : (n_rows,) the rows given no cells because they hold a byte beyond ASCII
    (only when not decoding)."""

    indptr: IntArray
    indices: npt.NDArray[np.int32]
    counts: FloatArray
    left: BoolArray


class Hashing(NamedTuple):
    """How tokens are hashed and counted: into 2**n_bits columns, word 1- to ngram_max-grams, the
    token polynomial's multiplier and the n-grams' (as uint64)."""

    n_bits: int
    ngram_max: int
    multiplier: int
    ngram_multiplier: int


def hashed_rows(data: Bytes, offsets: IntArray, taken: BoolArray, hashing: Hashing,
                is_word: BoolArray | None = None) -> HashedRows:
    """The hashed counts of the ``taken`` rows of texts (others get no cells).

    data : uint8 UTF-8 bytes; offsets : int64 (n_rows + 1,) from 0; taken : (n_rows,).
    is_word : None to read ASCII texts only, lowercasing them, and leave the others; else the
    texts are lowercased already, and is_word (0x110000,) says which code points are word
    characters (every code point of the texts beyond ASCII must have been classed).
    """
    n_rows = len(offsets) - 1
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    left = np.zeros(n_rows, dtype=bool)
    indices, counts = [], []
    word_table = np.zeros(0, dtype=bool) if is_word is None else is_word
    for first in range(0, n_rows, ROWS_PER_CALL):
        last = min(first + ROWS_PER_CALL, n_rows)
        part = _hashed_rows(data, offsets[first:last + 1], taken[first:last], np.uint64(hashing.n_bits),
                            hashing.ngram_max, np.uint64(hashing.multiplier), np.uint64(hashing.ngram_multiplier),
                            BYTE_VALUES, is_word is not None, word_table)
        part_indptr, part_indices, part_counts, part_left = part
        left[first:last] = part_left
        indptr[first + 1:last + 1] = part_indptr[1:] + indptr[first]
        indices.append(part_indices)
        counts.append(part_counts)
    return HashedRows(indptr, np.concatenate(indices) if indices else np.zeros(0, np.int32),
                      np.concatenate(counts) if counts else np.zeros(0), left)


def code_points_beyond_ascii(data: Bytes) -> npt.NDArray[np.uint32]:
    """The distinct code points of the characters beyond ASCII of UTF-8 bytes whose sequences are
    whole, increasing; surrogates and points beyond Unicode (which Arrow's lowercasing lets by)
    left out."""
    points = np.unique(_code_points(data))
    valid: npt.NDArray[np.uint32] = points[(points < 0xD800) | ((points >= 0xE000) & (points < 0x110000))]
    return valid


def _code_points_loop(data: Bytes) -> npt.NDArray[np.uint32]:
    """The code point of each character beyond ASCII of valid UTF-8 bytes, in order."""
    points = np.empty(len(data) // 2 + 1, np.uint32)
    n, k = 0, 0
    while k < len(data):
        if data[k] < 0x80:
            k += 1
            continue
        point, size = _decoded(data, k)
        points[n] = point
        n += 1
        k += size
    return points[:n]


def _decoded(data: Bytes, k: int) -> tuple[np.uint32, int]:
    """The code point of the character of valid UTF-8 bytes whose first byte, beyond ASCII, is at
    k, and its number of bytes."""
    lead = np.uint32(data[k])
    six = np.uint32(0x3F)
    if lead >= 0xF0:
        return ((lead & np.uint32(0x07)) << np.uint32(18) | (np.uint32(data[k + 1]) & six) << np.uint32(12)
                | (np.uint32(data[k + 2]) & six) << np.uint32(6) | (np.uint32(data[k + 3]) & six)), 4
    if lead >= 0xE0:
        return ((lead & np.uint32(0x0F)) << np.uint32(12) | (np.uint32(data[k + 1]) & six) << np.uint32(6)
                | (np.uint32(data[k + 2]) & six)), 3
    return (lead & np.uint32(0x1F)) << np.uint32(6) | (np.uint32(data[k + 1]) & six), 2


def splitmix64(x: HashT) -> HashT:
    """The splitmix64 finaliser of uint64 values: an array (numpy) or one value (in the loops)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _byte_values() -> npt.NDArray[np.uint64]:
    """What each byte adds to a token's polynomial: its lowercased value + 1 for a word byte
    (letters, digits, underscore), 0 for a byte between tokens, BEYOND_ASCII for bytes 128 to 255."""
    values = np.zeros(256, dtype=np.uint64)
    for first, last in (("a", "z"), ("0", "9"), ("_", "_")):
        values[ord(first):ord(last) + 1] = np.arange(ord(first), ord(last) + 1) + 1
    values[ord("A"):ord("Z") + 1] = values[ord("a"):ord("z") + 1]
    values[128:] = BEYOND_ASCII
    return values


BEYOND_ASCII = np.uint64(1 << 63)
BYTE_VALUES = _byte_values()


def _insertion_sort(values: npt.NDArray[np.uint64]) -> None:
    """Sorts a few values in place: for a text's dozens of columns, faster than a quicksort."""
    for j in range(1, len(values)):
        value = values[j]
        k = j - 1
        while k >= 0 and values[k] > value:
            values[k + 1] = values[k]
            k -= 1
        values[k + 1] = value


SHORT_SORT = 64  # columns a row up to which they are sorted by insertion


def _hashed_rows_loop(data: Bytes, offsets: IntArray, taken: BoolArray, n_bits: np.uint64, ngram_max: int,  # noqa: PLR0913
                      multiplier: np.uint64, ngram_multiplier: np.uint64, byte_values: npt.NDArray[np.uint64],
                      decode: bool, is_word: BoolArray
                      ) -> tuple[IntArray, npt.NDArray[np.int32], FloatArray, BoolArray]:
    """``hashed_rows`` of rows of offsets (n + 1,), ``taken`` (n,): the CSR arrays, and which rows
    were left (a byte beyond ASCII while not decoding); byte_values : ``BYTE_VALUES``."""
    n_rows = len(offsets) - 1
    longest, taken_bytes = 0, 0
    for i in range(n_rows):
        if taken[i]:
            longest = max(longest, offsets[i + 1] - offsets[i])
            taken_bytes += offsets[i + 1] - offsets[i]
    tokens = np.empty(longest // 2 + 1, np.uint64)  # a token has two bytes at least
    combined = np.empty_like(tokens)
    grams = np.empty(len(tokens), np.uint64)  # a row's 1- to ngram_max-grams: grown to the row's count
    indptr = np.zeros(n_rows + 1, np.int64)
    capacity = max(16, taken_bytes // 4)  # grown when short
    indices = np.empty(capacity, np.int32)
    counts = np.empty(capacity, np.float64)
    left = np.zeros(n_rows, np.bool_)
    mask = (np.uint64(1) << n_bits) - np.uint64(1)
    nnz = 0
    for i in range(n_rows):
        indptr[i + 1] = nnz
        if not taken[i]:
            continue
        n_tokens = _row_tokens(data, offsets[i], offsets[i + 1], byte_values, multiplier, decode, is_word, tokens)
        if n_tokens < 0:
            left[i] = True
            continue
        longest_grams = min(ngram_max, n_tokens)  # no n-gram is longer than the row's tokens
        n_grams = longest_grams * n_tokens - longest_grams * (longest_grams - 1) // 2
        if n_grams > len(grams):
            grams = np.empty(n_grams, np.uint64)
        n_grams = _row_grams(tokens, n_tokens, ngram_max, ngram_multiplier, mask, combined, grams)
        if nnz + n_grams > len(indices):
            grown = max(2 * len(indices), nnz + n_grams)
            indices = np.concatenate((indices, np.empty(grown - len(indices), np.int32)))
            counts = np.concatenate((counts, np.empty(grown - len(counts), np.float64)))
        nnz = _counted(grams[:n_grams], indices, counts, nnz)
        indptr[i + 1] = nnz
    return indptr, indices[:nnz].copy(), counts[:nnz].copy(), left


def _row_tokens(data: Bytes, begin: int, end: int, byte_values: npt.NDArray[np.uint64], multiplier: np.uint64,
                decode: bool, is_word: BoolArray, tokens: npt.NDArray[np.uint64]) -> int:
    """The hashes of the tokens of data[begin:end] written to ``tokens``; how many, or -1 for a
    text with a byte beyond ASCII when not decoding. A character beyond ASCII, decoded, is a word
    character where is_word says so, and all its bytes enter the polynomial."""
    n_tokens, polynomial, characters = 0, np.uint64(0), 0
    k = begin
    while k < end:
        value = byte_values[data[k]]
        size = 1
        if value == BEYOND_ASCII:
            if not decode:
                return -1
            point, size = _decoded(data, k)
            if point < len(is_word) and is_word[point]:  # a point beyond Unicode (Arrow lets some by) separates
                for byte in data[k:k + size]:
                    polynomial = polynomial * multiplier + np.uint64(byte) + np.uint64(1)
                characters += 1
                k += size
                continue
            value = np.uint64(0)
        k += size
        if value != 0:
            polynomial = polynomial * multiplier + value
            characters += 1
            continue
        if characters >= 2:
            tokens[n_tokens] = splitmix64(polynomial)
            n_tokens += 1
        polynomial, characters = np.uint64(0), 0
    if characters >= 2:
        tokens[n_tokens] = splitmix64(polynomial)
        n_tokens += 1
    return n_tokens


def _row_grams(tokens: npt.NDArray[np.uint64], n_tokens: int, ngram_max: int, ngram_multiplier: np.uint64,
               mask: np.uint64, combined: npt.NDArray[np.uint64], grams: npt.NDArray[np.uint64]) -> int:
    """The columns of a row's 1- to ngram_max-grams of its ``n_tokens`` token hashes, written to
    ``grams``; how many. An n-gram's hash is its (n-1)-gram's mixed with its last token's."""
    for j in range(n_tokens):
        grams[j] = tokens[j] & mask
        combined[j] = tokens[j]
    n_grams = n_tokens
    for n in range(2, min(ngram_max, n_tokens) + 1):
        for j in range(n_tokens - n + 1):
            combined[j] = splitmix64(combined[j] * ngram_multiplier + tokens[j + n - 1])
            grams[n_grams] = combined[j] & mask
            n_grams += 1
    return n_grams


def _counted(columns: npt.NDArray[np.uint64], indices: npt.NDArray[np.int32], counts: FloatArray, nnz: int) -> int:
    """A row's columns sorted (in place) and written as distinct columns and their counts from
    cell ``nnz`` on; the cells after them."""
    if len(columns) <= SHORT_SORT:
        _insertion_sort(columns)
    else:
        columns.sort()
    for j in range(len(columns)):
        if j > 0 and columns[j] == columns[j - 1]:
            counts[nnz - 1] += 1.0
        else:
            indices[nnz] = np.int32(columns[j])
            counts[nnz] = 1.0
            nnz += 1
    return nnz


_hashed_rows = Kernel(_hashed_rows_loop,
                      uses=(splitmix64, _decoded, _insertion_sort, _row_tokens, _row_grams, _counted))
_code_points = Kernel(_code_points_loop, uses=(_decoded,))

