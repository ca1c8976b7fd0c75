"""Test-then-train scores of dense rows against per-class weight vectors that change with every
learned row of the class (BernoulliNB: a class's weight changes its log(1 - p) at every feature).

Class c's statistics have a version for each learned row of c: version v after its v-th. Row i
is scored against, for each class, the version of the rows before i:
score_ic = x_i . W_c(v) + b_c(v), where (W, b) are the model's function of the version's counts.
Each learned row's version is computed once (F values), and the scores come from matrix products
over blocks of ``BLOCK`` rows: a block's rows against the versions of its own learned rows, and
against the versions each class had when the block began. That is (BLOCK + n_classes) x F
multiply-adds a row, and no Python loop over rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .ndarrays import Features, FloatArray, IndexArray
from .prequential_counts import LearnedRows

# Rows a block. A block's products (BLOCK x BLOCK x n_features multiply-adds) stay under the size
# from which OpenBLAS splits a product among threads, whose start-up costs more than it saves here.
BLOCK = 16
BLOCKS_PER_CHUNK = 32  # blocks whose (rows x features) arrays are made at once

# Turns counts (n_versions, n_features) and class weights (n_versions,) of versions into their weights
# W, in place in the counts, and returns their biases b (n_versions,).
Weigh = Callable[[FloatArray, FloatArray], FloatArray]


def version_scores(X: Features, learned: LearnedRows, counts: FloatArray, class_weights: FloatArray,
                   weigh: Weigh) -> FloatArray:
    """x_i . W_c(v) + b_c(v) for each row i and class c, v the version of c before row i.

    X : (n_samples, n_features) dense; counts : (n_classes, n_features) and class_weights :
    (n_classes,) the statistics before the batch (0 for classes new in it). Returns (n_samples,
    n_classes).
    """
    n_rows, n_features = X.shape
    n_classes = learned.n_classes
    state = _ClassVersions(counts.astype(np.float64), class_weights.astype(np.float64), weigh)
    scores = np.empty((n_rows, n_classes))
    step = BLOCK * BLOCKS_PER_CHUNK
    for start in range(0, n_rows, step):
        stop = min(start + step, n_rows)
        scores[start:stop] = state.score_and_learn(X[start:stop], learned.rows[start:stop],
                                                   learned.weights[start:stop])
    return scores


class _ClassVersions:
    """The version of each class's statistics reached so far: counts (n_classes, n_features),
    class weights (n_classes,), and their weights W (n_classes, n_features) and biases b."""

    def __init__(self, counts: FloatArray, class_weights: FloatArray, weigh: Weigh):
        self.counts, self.class_weights, self._weigh = counts, class_weights, weigh
        self.weights = counts.copy()
        self.biases = weigh(self.weights, class_weights.copy())

    def score_and_learn(self, X: Features, rows: IndexArray, weights: FloatArray) -> FloatArray:
        """Scores of a chunk of rows (n_rows, n_classes), each against the versions of the rows
        before it; then the versions after the chunk's learned rows."""
        n_rows, n_features = X.shape
        n_classes = len(self.class_weights)
        n_blocks = -(-n_rows // BLOCK)
        padded = n_blocks * BLOCK
        dense = np.zeros((padded, n_features))
        dense[:n_rows] = X
        blocks = dense.reshape(n_blocks, BLOCK, n_features)
        classes = np.full(padded, -1, dtype=np.intp)
        classes[:n_rows] = rows
        amounts = np.zeros(padded)
        amounts[:n_rows] = weights  # 0 for rows only scored
        taught = np.flatnonzero(classes >= 0)

        # The counts of each class when each block begins, from each block's class sums.
        by_class = np.zeros((padded, n_classes))
        by_class[taught, classes[taught]] = amounts[taught]
        by_class_blocks = by_class.reshape(n_blocks, BLOCK, n_classes)
        block_sums = np.matmul(by_class_blocks.transpose(0, 2, 1), blocks)  # (n_blocks, n_classes, F)
        block_weights = by_class_blocks.sum(axis=1)
        counts_at_start = np.empty_like(block_sums)
        counts_at_start[0] = self.counts
        for block in range(1, n_blocks):  # over blocks, not rows: a sum of n_blocks arrays
            np.add(counts_at_start[block - 1], block_sums[block - 1], out=counts_at_start[block])
        weights_at_start = np.cumsum(np.r_[self.class_weights[None], block_weights[:-1]], axis=0)

        # The counts after each learned row: its class's counts when the block began plus the
        # block's rows of that class up to it (a lower-triangular product within the block).
        block_classes = classes.reshape(n_blocks, BLOCK)
        same_class = (block_classes[:, :, None] == block_classes[:, None, :]) & (block_classes[:, None, :] >= 0)
        same_class &= np.tril(np.ones((BLOCK, BLOCK), dtype=bool))
        up_to = same_class * amounts.reshape(n_blocks, BLOCK)[:, None, :]
        own_class = np.maximum(block_classes, 0)  # rows only scored get a version they never use
        in_block = np.arange(n_blocks)[:, None]
        versions = np.empty((n_classes + padded, n_features))  # the chunk's own, then each learned row's
        versions[:n_classes] = self.weights
        after = versions[n_classes:].reshape(n_blocks, BLOCK, n_features)
        np.matmul(up_to, blocks, out=after)
        after += counts_at_start[in_block, own_class]
        weights_after = up_to.sum(axis=2) + weights_at_start[in_block, own_class]
        biases = np.r_[self.biases, self._weigh(versions[n_classes:], weights_after.reshape(-1))]

        # Each row against each class's version before it: the latest learned row of the class
        # before it within its block, else the version the class had when the block began.
        marks = np.full((padded + 1, n_classes), -1, dtype=np.intp)
        marks[taught + 1, classes[taught]] = taught
        latest = np.maximum.accumulate(marks, axis=0)  # row k: the latest before row k
        at_block_start = latest[:-1:BLOCK]  # (n_blocks, n_classes)
        start_versions = np.where(at_block_start >= 0, at_block_start + n_classes, np.arange(n_classes))
        against_own = np.matmul(blocks, after.transpose(0, 2, 1))  # (n_blocks, BLOCK, BLOCK)
        against_start = np.matmul(blocks, versions[start_versions].transpose(0, 2, 1))  # (n_blocks, BLOCK, C)
        against_start += biases[start_versions][:, None, :]
        latest_in = latest[:-1].reshape(n_blocks, BLOCK, n_classes) - (np.arange(n_blocks) * BLOCK)[:, None, None]
        within = latest_in >= 0
        column = np.where(within, latest_in, 0)
        own = np.take_along_axis(against_own, column, axis=2)
        own += biases[n_classes:].reshape(n_blocks, BLOCK)[in_block[:, :, None], column]
        scores = np.where(within, own, against_start).reshape(padded, n_classes)[:n_rows]

        final = np.where(latest[-1] >= 0, latest[-1] + n_classes, np.arange(n_classes))
        self.counts = counts_at_start[-1] + block_sums[-1]
        self.class_weights = weights_at_start[-1] + block_weights[-1]
        self.weights, self.biases = versions[final], biases[final]
        return scores
