"""Text to hashed token counts with Arrow compute and numpy: no per-row Python loop.

Tokens are lowercased runs of two or more word characters (letters, digits, underscore:
scikit-learn's default token pattern). Each token is hashed with a polynomial hash over its UTF-8 bytes followed by the
splitmix64 finaliser, computed for all tokens of a batch at once; word n-grams combine the
hashes of neighbouring tokens of the same row. The hash is part of the snapshot format
(``HASH_SCHEME``): a model only ever sees features hashed the same way.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HASH_SCHEME = "poly31-splitmix64-v1"
_MULTIPLIER = np.uint64(0x100000001B3)
_NGRAM_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def tokenize(texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Tokens of every row, and the row each token came from.

    texts : string array of length n_rows (nulls give no tokens)
    Returns (tokens: string array of length n_tokens, rows: int64 array of length n_tokens).
    """
    pieces = pc.split_pattern_regex(pc.utf8_lower(texts), r"[^\pL\pN_]+")  # Unicode-aware \W
    lengths = pc.fill_null(pc.list_value_length(pieces), 0).to_numpy()
    tokens = pc.list_flatten(pieces)
    rows = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    keep = pc.greater_equal(pc.utf8_length(tokens), 2)
    return pc.filter(tokens, keep), rows[keep.to_numpy(zero_copy_only=False)]


def hash_tokens(tokens: pa.Array) -> np.ndarray:
    """A 64-bit hash of each (non-empty) token, shape (n_tokens,), uint64.

    >>> h = hash_tokens(pa.array(["spam", "ham", "spam"]))
    >>> bool(h[0] == h[2]), bool(h[0] == h[1])
    (True, False)
    """
    if len(tokens) == 0:
        return np.zeros(0, dtype=np.uint64)
    tokens = tokens.cast(pa.large_string()) if tokens.type == pa.string() else tokens
    offsets = np.frombuffer(tokens.buffers()[1], dtype=np.int64)[tokens.offset:tokens.offset + len(tokens) + 1]
    data = np.frombuffer(tokens.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    offsets = offsets - offsets[0]
    lengths = np.diff(offsets)
    # Byte i of a token of length L contributes (byte + 1) * M**(L - 1 - i), mod 2**64.
    token_of_byte = np.repeat(np.arange(len(lengths)), lengths)
    exponent = offsets[1:][token_of_byte] - 1 - np.arange(len(data))
    powers = np.cumprod(np.full(int(lengths.max()), _MULTIPLIER, dtype=np.uint64))
    powers = np.concatenate([[np.uint64(1)], powers[:-1]])
    contributions = (data.astype(np.uint64) + np.uint64(1)) * powers[exponent]
    return _splitmix64(np.add.reduceat(contributions, offsets[:-1]))


def hashed_counts(texts: pa.Array, n_bits: int, ngram_max: int = 1):
    """Token counts of each row in 2**n_bits hashed columns, as a CSR matrix.

    Returns scipy.sparse.csr_matrix of shape (len(texts), 2**n_bits), float64.
    """
    import scipy.sparse

    tokens, rows = tokenize(texts)
    hashes = hash_tokens(tokens)
    all_rows, all_hashes = [rows], [hashes]
    combined = hashes
    for n in range(2, ngram_max + 1):
        # n-gram ending at token j+n-1 = previous (n-1)-gram hash mixed with the next token.
        same_row = rows[n - 1:] == rows[:len(rows) - n + 1]
        combined = _splitmix64(combined[:-1] * _NGRAM_MULTIPLIER + hashes[n - 1:])
        all_rows.append(rows[n - 1:][same_row])
        all_hashes.append(combined[same_row])
    rows, hashes = np.concatenate(all_rows), np.concatenate(all_hashes)
    columns = (hashes & np.uint64((1 << n_bits) - 1)).astype(np.int64)
    counts = scipy.sparse.csr_matrix((np.ones(len(rows)), (rows, columns)), shape=(len(texts), 1 << n_bits))
    counts.sum_duplicates()
    return counts
