"""Test-then-train scores of dense rows against per-class weight vectors that change with every
learned row of the class: BernoulliNB's (a class's weight changes its log(1 - p) at every
feature) and MultinomialNB's (whose dense rows a product scores faster than their cells).

Class c's statistics have a version for each learned row of c: version v after its v-th. Row i
is scored against, for each class, the version of the rows before i:
score_ic = x_i . W_c(v) + b_c(v), where (W, b) are the model's function of the version's counts.
Each learned row's version is computed once (F values), and the scores come from matrix products
over blocks of ``BLOCK`` rows: a block's rows against the versions of its own learned rows, and
against the versions each class had when the block began. That is about 2 (BLOCK + n_classes) x F
multiply-adds a row, and no Python loop over rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..utils.ndarrays import Features, FloatArray, IndexArray
from .counts import LearnedRows

# Rows a block. A row costs about 2 (BLOCK + n_classes) x n_features multiply-adds, and each block a
# few numpy calls. On MNIST (784 features, 10 classes) 8 rows took 0.55x the time of 16 in polls of
# 2,000 rows (a chunk's working arrays are half as large) and 0.95x in polls of 10,000; 4 or 32 took longer.
BLOCK = 8
BLOCKS_PER_CHUNK = 32  # blocks computed at once, fewer when their arrays would exceed CHUNK_VALUES
CHUNK_VALUES = 1 << 21  # values of one array of a chunk: 16 MB

# Turns counts (n_versions, n_features) and class weights (n_versions,) of versions into their weights
# W, in place in the counts, and returns their biases b (n_versions,); the third array, of the
# counts' shape, is scratch it may write.
Weigh = Callable[[FloatArray, FloatArray, FloatArray], FloatArray]


def version_scores(X: Features, learned: LearnedRows, counts: FloatArray, class_weights: FloatArray,
                   weigh: Weigh) -> FloatArray:
    """x_i . W_c(v) + b_c(v) for each row i and class c, v the version of c before row i.

    X : (n_samples, n_features) dense; counts : (n_classes, n_features) and class_weights :
    (n_classes,) the statistics before the batch (0 for classes new in it). Returns (n_samples,
    n_classes).
    """
    n_rows, n_features = X.shape
    largest = CHUNK_VALUES // (max(BLOCK, learned.n_classes) * n_features)  # rows or start versions of a block
    step = BLOCK * max(1, min(BLOCKS_PER_CHUNK, largest, -(-n_rows // BLOCK)))
    versions = _ClassVersions(counts.astype(np.float64), class_weights.astype(np.float64), weigh,
                              _Workspace(step // BLOCK, learned.n_classes, n_features))
    scores = np.empty((n_rows, learned.n_classes))
    for start in range(0, n_rows, step):
        stop = min(start + step, n_rows)
        scores[start:stop] = versions.score_and_learn(X[start:stop], learned.rows[start:stop],
                                                      learned.weights[start:stop])
    return scores


class _Workspace:
    """The large arrays a chunk of rows is computed in, made once a batch (a fresh array of
    megabytes costs page faults each time it is made).

    rows : (n_blocks, BLOCK, F) the chunk's rows, as float64
    versions : (n_classes + n_blocks * BLOCK + 1, F) the versions the chunk starts with, then the
        one after each of its rows, then a row of zeros
    at_start : (n_blocks, n_classes, F) each class's counts when each block begins
    scratch : (n_blocks * BLOCK, F); starting : (n_blocks, n_classes, F) the versions a block starts with
    """

    def __init__(self, n_blocks: int, n_classes: int, n_features: int):
        self.rows = np.zeros((n_blocks, BLOCK, n_features))
        self.versions = np.empty((n_classes + n_blocks * BLOCK + 1, n_features))
        self.versions[-1] = 0.0
        self.at_start = np.empty((n_blocks, n_classes, n_features))
        self.scratch = np.empty((n_blocks * BLOCK, n_features))
        self.starting = np.empty((n_blocks, n_classes, n_features))


class _ClassVersions:
    """The version of each class's statistics reached so far: counts (n_classes, n_features),
    class weights (n_classes,), and their weights W (n_classes, n_features) and biases b."""

    def __init__(self, counts: FloatArray, class_weights: FloatArray, weigh: Weigh, workspace: _Workspace):
        self.counts, self.class_weights, self._weigh, self._work = counts, class_weights, weigh, workspace
        self.weights = counts.copy()
        self.biases = weigh(self.weights, class_weights.copy(), np.empty_like(counts))

    def _padded(self, X: Features, rows: IndexArray, weights: FloatArray,
                n_blocks: int) -> tuple[FloatArray, IndexArray, FloatArray]:
        """The chunk's rows in the workspace's blocks (n_blocks, BLOCK, n_features), each row's class
        (padded,) (-1 past the rows) and weight (padded,) (0 past them, and for rows only scored)."""
        n_rows, padded = X.shape[0], n_blocks * BLOCK
        blocks = self._work.rows[:n_blocks]
        flat_rows = blocks.reshape(padded, X.shape[1])
        flat_rows[:n_rows] = X
        flat_rows[n_rows:] = 0.0
        classes = np.full(padded, -1, dtype=np.intp)
        classes[:n_rows] = rows
        amounts = np.zeros(padded)
        amounts[:n_rows] = weights
        return blocks, classes, amounts

    def score_and_learn(self, X: Features, rows: IndexArray, weights: FloatArray) -> FloatArray:
        """Scores of a chunk of at most the workspace's rows (n_rows, n_classes), each against the
        versions of the rows before it; then the versions after the chunk's learned rows."""
        work, n_rows = self._work, X.shape[0]
        n_classes = len(self.class_weights)
        n_blocks, n_features = -(-n_rows // BLOCK), X.shape[1]
        padded = n_blocks * BLOCK
        blocks, classes, amounts = self._padded(X, rows, weights, n_blocks)
        block_classes = classes.reshape(n_blocks, BLOCK)

        # Within a block, the sum of its rows of each row's class up to it: a lower-triangular product.
        same_class = (block_classes[:, :, None] == block_classes[:, None, :]) & (block_classes[:, None, :] >= 0)
        same_class &= np.tril(np.ones((BLOCK, BLOCK), dtype=bool))
        up_to = same_class * amounts.reshape(n_blocks, BLOCK)[:, None, :]
        versions = work.versions[:n_classes + padded + 1]
        versions[-1] = 0.0
        after = versions[n_classes:-1].reshape(n_blocks, BLOCK, n_features)
        np.matmul(up_to, blocks, out=after)

        # Each class's counts when each block begins: the previous block's, plus that block's sum
        # for the class, which its last learned row of the class holds (the zero row when none).
        latest = _latest_learned(classes, n_classes)  # (padded + 1, n_classes)
        block_ends = latest[BLOCK::BLOCK]  # the latest learned row of each class before each block's end
        begins = np.arange(n_blocks)[:, None] * BLOCK
        block_last = np.where(block_ends >= begins, block_ends + n_classes, len(versions) - 1)
        at_start = work.at_start[:n_blocks]
        at_start[0] = self.counts
        for block in range(1, n_blocks):  # over blocks, not rows: a sum of n_blocks arrays
            np.add(at_start[block - 1], versions[block_last[block - 1]], out=at_start[block])
        final_counts = at_start[-1] + versions[block_last[-1]]
        by_class = np.zeros((padded, n_classes))
        taught = np.flatnonzero(classes >= 0)
        by_class[taught, classes[taught]] = 1.0
        block_weights = (by_class * amounts[:, None]).reshape(n_blocks, BLOCK, n_classes).sum(axis=1)
        weights_at_start = np.cumsum(np.r_[self.class_weights[None], block_weights], axis=0)

        # The counts after each learned row (rows only scored get class 0's, never used), then the
        # versions' weights and biases.
        own_class = np.maximum(block_classes, 0)
        after += at_start[np.arange(n_blocks)[:, None], own_class]
        weights_after = up_to.sum(axis=2) + weights_at_start[:-1][np.arange(n_blocks)[:, None], own_class]
        biases = np.r_[self.biases, self._weigh(after.reshape(padded, n_features), weights_after.reshape(-1),
                                                work.scratch[:padded]), 0.0]
        versions[:n_classes] = self.weights

        # Each row against each class's version before it: the latest learned row of the class
        # before it within its block, else the version the class had when the block began.
        at_block_start = latest[:-1:BLOCK]
        start_versions = np.where(at_block_start >= 0, at_block_start + n_classes, np.arange(n_classes))
        starting = work.starting[:n_blocks]
        np.take(versions, start_versions, axis=0, out=starting)
        against_start = np.matmul(blocks, starting.transpose(0, 2, 1))  # (n_blocks, BLOCK, n_classes)
        against_start += biases[start_versions][:, None, :]
        against_own = np.matmul(blocks, after.transpose(0, 2, 1))  # (n_blocks, BLOCK, BLOCK)
        latest_in = latest[:-1].reshape(n_blocks, BLOCK, n_classes) - begins[:, :, None]
        within = latest_in >= 0
        column = np.where(within, latest_in, 0)
        own = np.take_along_axis(against_own, column, axis=2)
        own += biases[n_classes:-1].reshape(n_blocks, BLOCK)[np.arange(n_blocks)[:, None, None], column]
        scores = np.where(within, own, against_start).reshape(padded, n_classes)[:n_rows]

        final = np.where(latest[-1] >= 0, latest[-1] + n_classes, np.arange(n_classes))
        self.counts, self.class_weights = final_counts, weights_at_start[-1]
        self.weights, self.biases = versions[final], biases[final]
        return scores


def _latest_learned(classes: IndexArray, n_classes: int) -> IndexArray:
    """For each row k of 0..n_rows and class c, the latest row before k learned as c, -1 for none,
    shape (n_rows + 1, n_classes); classes : (n_rows,) each row's class, -1 for rows only scored."""
    latest = np.full((len(classes) + 1, n_classes), -1, dtype=np.intp)
    taught = np.flatnonzero(classes >= 0)
    latest[taught + 1, classes[taught]] = taught
    np.maximum.accumulate(latest, axis=0, out=latest)
    return latest
