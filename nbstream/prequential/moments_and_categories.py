"""What each row of a batch is scored with in test-then-train, in bulk, for GaussianNB and
CategoricalNB: the model's statistics plus the rows learned before it.

Rows go in blocks of about 2**16 (row, class, feature) cells, so that memory does not grow with
the batch. Within a block every row's statistics come at once from vectorized scans; from one
block to the next, the statistics of everything learned so far are carried forward.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from ..stats.counts import CategoryCounts, GaussianMoments
from ..stats.moments import Moments, pool
from ..utils.blocked import row_blocks
from ..utils.ndarrays import Features, FloatArray, IndexArray, IntArray
from ..utils.segment_sums import segment_sums_before
from .counts import LearnedRows


def moments_before_each_row(statistics: GaussianMoments, X: Features, rows: IndexArray,
                            weights: FloatArray | None, n_classes: int) -> Iterator[tuple[slice, Moments]]:
    """For each block of rows, the moments each row is scored with: ``statistics`` pooled with
    the learned rows before it, class by class.

    X : (n_samples, n_features); rows : (n_samples,) the class row of each row to learn, -1 for
    rows only scored; weights : (n_samples,) or None; n_classes : the classes after the batch
    (those beyond the statistics' start empty).
    Yields (block, moments): weight (n_block, n_classes), mean and m2 (n_block, n_classes,
    n_features). Each is pooled by Chan's update in a parallel prefix scan: O(log n_block)
    poolings, none of them a difference of sums of squares.
    """
    n_features = X.shape[1]
    carried = _grown(statistics.moments, n_classes)
    for block in row_blocks(X.shape[0], n_classes * n_features):
        learned = LearnedRows(rows[block], None if weights is None else weights[block], n_classes)
        taught = np.flatnonzero(learned.learned)
        by_class = taught[np.argsort(learned.rows[taught], kind="stable")]
        per_class = np.bincount(learned.rows[taught], minlength=n_classes)
        # One segment of slots per class: the moments carried so far, then the class's rows in order.
        heads = np.cumsum(per_class + 1) - (per_class + 1)
        slots = np.arange(len(by_class)) + np.repeat(heads + 1 - (np.cumsum(per_class) - per_class), per_class)
        n_slots = n_classes + len(taught)
        scanned = Moments(np.empty(n_slots), np.empty((n_slots, n_features)), np.zeros((n_slots, n_features)))
        scanned.weight[heads], scanned.mean[heads], scanned.m2[heads] = carried
        scanned.weight[slots] = learned.weights[by_class]
        scanned.mean[slots] = X[block][by_class]
        _prefix_pool(scanned, np.repeat(heads, per_class + 1))
        seen = heads + learned.versions()  # (n_block, n_classes): the slot that pooled what each row sees
        yield block, Moments(scanned.weight[seen], scanned.mean[seen], scanned.m2[seen])
        ends = heads + per_class
        carried = Moments(scanned.weight[ends], scanned.mean[ends], scanned.m2[ends])


def _prefix_pool(moments: Moments, segment_start: IndexArray) -> None:
    """Replace, in place, the moments of each slot by those pooled over its segment up to it
    (Hillis and Steele's scan: slot k pools with slot k - step, for step = 1, 2, 4, ...).

    moments : weight (n_slots,), mean and m2 (n_slots, n_features); segment_start : (n_slots,)
    the first slot of each slot's segment."""
    weight, mean, m2 = moments
    reach = np.arange(len(weight)) - segment_start  # how many slots of its segment precede each slot
    step = 1
    while step <= reach.max(initial=0):
        pools = reach[step:] >= step
        pooled = pool(Moments(weight[:-step], mean[:-step], m2[:-step]),
                      Moments(weight[step:], mean[step:], m2[step:]))
        np.copyto(weight[step:], pooled.weight, where=pools)
        np.copyto(mean[step:], pooled.mean, where=pools[:, None])
        np.copyto(m2[step:], pooled.m2, where=pools[:, None])
        step *= 2


def _grown(moments: Moments, n_classes: int) -> Moments:
    """Copies of the moments with empty classes added up to n_classes."""
    weight, mean, m2 = moments
    n_features, held = mean.shape[1], len(weight)
    grown = Moments(np.zeros(n_classes), np.zeros((n_classes, n_features)), np.zeros((n_classes, n_features)))
    grown.weight[:held], grown.mean[:held], grown.m2[:held] = weight, mean, m2
    return grown


class CategoryView(NamedTuple):
    """The counts each row of a block is scored with, for categorical features.

    class_count : (n_block, n_classes) the weight of each class;
    own_count : (n_block, n_features, n_classes) the weight of the row's own category of each
        feature in each class (0 for a category beyond the tables);
    feature_total : (n_block, n_features, n_classes) the weight of all categories of each
        feature in each class (the sum of that table's row);
    n_categories : (n_block, n_features) how many categories each feature has (codes below it
        have a table entry).
    """

    class_count: FloatArray
    own_count: FloatArray
    feature_total: FloatArray
    n_categories: IntArray


def counts_before_each_row(statistics: CategoryCounts, X: IntArray, rows: IndexArray, weights: FloatArray | None,
                           n_classes: int) -> Iterator[tuple[slice, CategoryView]]:
    """For each block of rows, the counts each row is scored with: ``statistics`` plus the
    learned rows before it. A category that a learned row brings widens its feature's table for
    every later row, whatever their class.

    X : (n_samples, n_features) non-negative integer codes; rows, weights, n_classes : as in
    ``moments_before_each_row``. Yields (block, view).
    """
    n_features = X.shape[1]
    tables = statistics.category_count
    n_categories = np.array([table.shape[1] for table in tables], dtype=np.int64)
    reached = n_categories.copy()  # by the end of the batch
    for block in row_blocks(X.shape[0], n_features):
        codes = X[block][rows[block] >= 0]
        if len(codes):
            np.maximum(reached, codes.max(axis=0).astype(np.int64) + 1, out=reached)
    # Every table in one (category, class) array, each feature followed by a zero row that
    # codes beyond its reach point to: a row's own counts are one gather.
    starts = np.cumsum(reached + 1) - (reached + 1)
    packed = np.zeros((int((reached + 1).sum()), n_classes))
    totals = np.zeros((n_features, n_classes))
    for feature, table in enumerate(tables):
        packed[starts[feature]:starts[feature] + table.shape[1], :table.shape[0]] = table.T
        totals[feature, :table.shape[0]] = table.sum(axis=1)
    class_count = np.zeros(n_classes)
    class_count[:len(statistics.class_count)] = statistics.class_count
    for block in row_blocks(X.shape[0], n_classes * n_features):
        codes = X[block].astype(np.int64)
        keys = starts + np.minimum(codes, reached)
        learned = LearnedRows(rows[block], None if weights is None else weights[block], n_classes)
        before = learned.before()
        # A row sees the categories of the learned rows before it.
        widened = np.maximum.accumulate(np.where(learned.learned[:, None], codes + 1, 0), axis=0)
        seen_categories = np.maximum(n_categories, np.vstack([np.zeros((1, n_features), np.int64), widened[:-1]]))
        own = packed[keys]
        own += _earlier_with_same_key(keys, learned)
        yield block, CategoryView(class_count + before, own, totals + before[:, None, :], seen_categories)
        taught = np.flatnonzero(learned.learned)
        block_total = np.bincount(learned.rows[taught], learned.weights[taught], minlength=n_classes)
        class_count = class_count + block_total
        totals = totals + block_total
        n_categories = np.maximum(n_categories, widened[-1])
        # The block's rows into the tables, one at a time in order, as learning adds them.
        np.add.at(packed, (keys[taught], learned.rows[taught, None]), learned.weights[taught, None])


def _earlier_with_same_key(keys: IntArray, learned: LearnedRows) -> FloatArray:
    """For each row and column, the weight per class of the earlier learned rows with the same
    key in that column, shape (n_rows, n_columns, n_classes).

    keys : (n_rows, n_columns) integers, no key in two columns. Cells are sorted by key, then
    row, and summed within each key (``segment_sums_before``: unit weights exactly in int64). A class that
    no earlier row with the key taught gets exactly 0 (a tiny alpha would magnify any residue)."""
    n_rows, n_columns = keys.shape
    flat = keys.ravel()
    # By key, then row; numpy sorts 8 and 16-bit integers by radix, far faster than int64
    # (docs/performance.md, "Choices inside the library").
    order = np.argsort(flat.astype(np.min_scalar_type(flat.max(initial=0)), copy=False), kind="stable")
    sorted_keys = flat[order]
    cell_rows = order // n_columns
    taught = np.flatnonzero(learned.learned[cell_rows])  # cells of learned rows, in the sorted order
    placed = np.zeros((len(flat) + 1, learned.n_classes), dtype=np.int64 if learned.unit_weights else np.float64)
    placed[taught + 1, learned.rows[cell_rows[taught]]] = learned.weights[cell_rows[taught]]
    opens = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    sums = segment_sums_before(placed, opens, axis=0)
    earlier = np.empty((len(flat), learned.n_classes))
    earlier[order] = sums
    return earlier.reshape(n_rows, n_columns, learned.n_classes)
