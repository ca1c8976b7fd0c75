"""Why a model predicts what it does: ``explain`` splits each row's log-odds of its predicted class
over the runner-up into the class priors' share and each feature's contribution, exactly.

A Naive Bayes model scores a row by a sum over its features plus a per-class term, so for the
predicted class c1 and the runner-up c2 (the best other class)

    log_odds = jll(c1) - jll(c2) = prior + sum over the features f of contribution_f

where ``prior`` is the difference of the class log priors, and a feature's contribution is:

- BernoulliNB: x_f (log p1_f - log p2_f) + (1 - x_f) (log(1 - p1_f) - log(1 - p2_f)) with x_f after
  ``binarize`` and p_f the smoothed P(x_f = 1 | c): a feature the row lacks contributes too.
- MultinomialNB: x_f (log theta1_f - log theta2_f), theta_f the smoothed P(f | c): a feature the row
  lacks contributes 0.
- ComplementNB: x_f (w1_f - w2_f), w its weights (``feature_log_prob_``: the negated log complement
  frequencies, or with ``norm`` those normalised). With two classes or more its score has no prior
  term, so ``prior`` is 0.
- GaussianNB: log N(x_f; mu1_f, var1_f) - log N(x_f; mu2_f, var2_f).
- CategoricalNB: log P(x_f = the row's category | c1) - log P(x_f = the row's category | c2); a
  category the model never saw contributes 0, as it adds nothing to the score.

The contributions are computed from the tables the scores come from, dense counts or sparse
alike, so ``prior`` plus their sum is ``log_odds`` to rounding. Where the runner-up's score is -inf
(a class prior of 0; a GaussianNB point mass the row is not nearest) the log-odds are infinite
and no sum of finite terms gives them.

What it costs: the scores (as ``predict_joint_log_proba``), then per row the contributions of its
features, of which only the top ones are ordered. Dense rows are taken in blocks of rows with one
pair of classes, each block's contributions computed at once; CSR rows only at their cells. A
BernoulliNB's features missing from a CSR row contribute log(1 - p1) - log(1 - p2), a vector fixed
for each pair of classes: its top features are found once per pair (n_features values each) and
merged with each row's own. ``top=None`` keeps every feature that contributes, which for a CSR row
of BernoulliNB is every feature the row lacks too: n_rows x n_features entries.

Each model supplies ``_prior_terms`` and ``_pair_contributions``; those that take CSR input,
``_cell_contributions``. The count models (scores linear in each feature) supply these from the
weights and offsets of their features (``LinearContributions``).
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from ..utils.largest import cells_of_rows, largest_of_cells, largest_of_rows, merged_largest
from ..utils.ndarrays import AnyArray, Features, FloatArray, IndexArray, IntArray
from ..utils.threads import blas_on_one_thread
from ..utils.validation import is_sparse
from .core import NaiveBayesCore, StatsT
from .tables import TablesT

# A feature's name by its index: a function of the index, or anything indexed by it (an array, a list,
# a mapping).
FeatureNames: TypeAlias = "Callable[[int], object] | Sequence[object] | Mapping[int, object] | npt.NDArray[Any]"
Top: TypeAlias = tuple[IntArray, FloatArray]  # features (n, k) and their contributions (n, k), ordered
_BLOCK_CELLS = 1 << 17  # contributions ranked at a time: a block of rows stays in the cache (1 MiB)


@dataclass(frozen=True, eq=False)
class Explanations:
    """What ``explain`` finds for each of n rows (read-only arrays).

    classes : (n_classes,) the model's labels
    predicted : (n,) the predicted class's index in ``classes`` (what ``predict`` gives)
    runner_up : (n,) the best other class's index (the first of equals); -1 for a model of one class
    log_odds : (n,) score of the predicted class minus the runner-up's (NaN for one class)
    prior : (n,) the class log priors' share of log_odds (NaN for one class)
    features : (n, k) int64, the features of largest |contribution|, in decreasing |contribution|
        (equal ones by index); features contributing exactly 0 are left out, -1 pads a row
    contributions : (n, k) float64, their contributions (0.0 where padded)

    ``prior + contributions.sum(axis=1)`` is ``log_odds`` (to rounding) when every contributing
    feature is kept (``top=None``).
    """

    classes: AnyArray
    predicted: IndexArray
    runner_up: IndexArray
    log_odds: FloatArray
    prior: FloatArray
    features: IntArray
    contributions: FloatArray

    def __post_init__(self) -> None:
        for array in vars(self).values():
            array.flags.writeable = False

    def __len__(self) -> int:
        return len(self.predicted)

    def row(self, i: int, names: FeatureNames | None = None) -> dict[str, Any]:
        """Row i as JSON-ready values: {"class", "runner_up" (None for one class), "log_odds" and
        "prior" (None where not finite: one class, infinite odds), "features": [{"feature",
        "contribution"}, ...]}; a feature
        is named by ``names`` (a function of its index, or an array, list or mapping indexed by it),
        else by its index. Labels and names are plain Python values."""
        return self[i:i + 1].rows(names)[0]

    def rows(self, names: FeatureNames | None = None, *,
             row_names: Sequence[FeatureNames] | None = None) -> list[dict[str, Any]]:
        """Every row as ``row`` gives it; row_names: names for each row instead (n,), for features
        named by what the row holds (the words of a text)."""
        labels = [_plain(label) for label in self.classes]
        namers = (_namer(names) for _ in range(len(self))) if row_names is None else map(_namer, row_names)
        features, contributions = self.features.tolist(), _json_floats(self.contributions)
        return [{"class": labels[predicted], "runner_up": None if runner_up < 0 else labels[runner_up],
                 "log_odds": log_odds, "prior": prior,
                 "features": [{"feature": name(feature), "contribution": contribution}
                              for feature, contribution in zip(row_features, row_contributions, strict=True)
                              if feature >= 0]}
                for predicted, runner_up, log_odds, prior, row_features, row_contributions, name
                in zip(self.predicted.tolist(), self.runner_up.tolist(), _json_floats(self.log_odds),
                       _json_floats(self.prior), features, contributions, namers, strict=True)]

    def __getitem__(self, rows: slice) -> Explanations:
        """The explanations of some of the rows."""
        return Explanations(self.classes, self.predicted[rows], self.runner_up[rows], self.log_odds[rows],
                            self.prior[rows], self.features[rows], self.contributions[rows])


def _json_floats(values: FloatArray) -> list[Any]:
    """values as (nested) lists of floats, None where infinite or NaN."""
    finite = np.isfinite(values)
    if finite.all():
        plain: list[Any] = values.tolist()
        return plain
    with_none = values.astype(object)
    with_none[~finite] = None
    plain = with_none.tolist()
    return plain


def _plain(value: object) -> object:
    """A numpy scalar as the Python value it holds (labels, names)."""
    return value.item() if isinstance(value, np.generic) else value


def _namer(names: FeatureNames | None) -> Callable[[int], object]:
    """A feature's name (a plain value) by its index, from what ``Explanations.row`` takes."""
    if names is None:
        return int
    if callable(names):
        return lambda feature: _plain(names(feature))
    if isinstance(names, np.ndarray):
        plain: list[object] = names.tolist()
        return plain.__getitem__
    return lambda feature: _plain(names[feature])


def checked_top(top: object) -> int | None:
    """``top`` as explain takes it: an integer >= 1, or None for every feature (ValueError else)."""
    if top is None:
        return None
    if isinstance(top, bool) or not isinstance(top, numbers.Integral) or top < 1:
        raise ValueError(f"top must be an integer >= 1 (the features shown per row) or None (all); got {top!r}.")
    return int(top)


def first_two(jll: FloatArray) -> tuple[IndexArray, IndexArray]:
    """Each row's best class and best other class (the first of equals), each (n,), of scores
    (n, n_classes); the other is -1 when there is one class."""
    predicted = np.argmax(jll, axis=1)
    if jll.shape[1] == 1:
        return predicted, np.full(len(jll), -1, dtype=np.intp)
    rows = np.arange(len(jll))
    others = jll.copy()
    others[rows, predicted] = -np.inf
    runner_up = np.argmax(others, axis=1)
    alone = runner_up == predicted  # every other class scores -inf: the first other one
    runner_up[alone] = (predicted[alone] == 0).astype(np.intp)
    return predicted, runner_up


class PairContributions:
    """How each feature contributes to the log-odds of one class (first) over another (second)."""

    def dense(self, X: AnyArray, out: FloatArray) -> None:
        """Write each feature's contribution for prepared dense rows X (n_rows, n_features) into
        out (n_rows, n_features)."""
        raise NotImplementedError

    def absent(self) -> FloatArray | None:
        """What each feature contributes where a CSR row holds no value for it, shape (n_features,);
        None when that is 0 for every feature."""
        return None


# A term of each (class, feature) cell, shape (n_cells,), of its classes and features (n_cells,).
CellTerms: TypeAlias = Callable[[IndexArray, IndexArray], FloatArray]


class LinearContributions(PairContributions):
    """The contributions of a model whose score is linear in each feature: class c scores
    sum_f x_f w_cf + o_cf + its prior term, so a feature contributes x_f (w1_f - w2_f) + (o1_f - o2_f)
    (weights w of a unit of the feature; offsets o it adds whatever its value, Bernoulli's
    log(1 - p)).

    weights, offsets : the weights and offsets of (class, feature) cells (``CellTerms``); offsets
    None for a model without."""

    def __init__(self, weights: CellTerms, offsets: CellTerms | None, first: int, second: int, n_features: int):
        self._weights, self._offsets = weights, offsets
        self._first, self._second, self._n_features = first, second, n_features

    @functools.cached_property
    def weights(self) -> FloatArray:
        """w1 - w2, shape (n_features,)."""
        return _differences(self._weights, *self._every_feature())

    @functools.cached_property
    def offsets(self) -> FloatArray | None:
        """o1 - o2, shape (n_features,), or None."""
        return None if self._offsets is None else _differences(self._offsets, *self._every_feature())

    def _every_feature(self) -> tuple[IndexArray, IndexArray, IndexArray]:
        """(first class, second class, feature) of every feature, each (n_features,)."""
        features = np.arange(self._n_features)
        return np.full(self._n_features, self._first), np.full(self._n_features, self._second), features

    def dense(self, X: AnyArray, out: FloatArray) -> None:
        np.copyto(out, X)  # converted to float64 apart: faster than within the product
        out *= self.weights
        if self.offsets is not None:
            out += self.offsets

    def absent(self) -> FloatArray | None:
        return self.offsets


def linear_cell_contributions(weights: CellTerms, offsets: CellTerms | None, X: Features, first: IndexArray,
                              second: IndexArray) -> FloatArray:
    """The contribution of each stored cell of CSR rows X, shape (nnz,), for the first and second
    class of each row (n,): x (w1 - w2) + (o1 - o2) at the cell (see ``LinearContributions``)."""
    per_row = np.diff(X.indptr)
    cells = np.repeat(first, per_row), np.repeat(second, per_row), X.indices.astype(np.intp)
    contributions = _differences(weights, *cells)
    contributions *= X.data
    if offsets is not None:
        contributions += _differences(offsets, *cells)
    return contributions


def _differences(terms: CellTerms, firsts: IndexArray, seconds: IndexArray, features: IndexArray) -> FloatArray:
    """A term of the first class less the same of the second at each cell (n_cells,) of classes
    firsts and seconds and features (n_cells,)."""
    differences: FloatArray = terms(firsts, features) - terms(seconds, features)
    return differences


class Explaining(NaiveBayesCore[StatsT, TablesT]):
    """The core with ``explain``; each model supplies ``_prior_terms``, ``_pair_contributions`` and,
    when it takes CSR input, ``_cell_contributions``."""

    def _prior_terms(self) -> FloatArray:
        """The per-class term of the scores that is the class prior's, shape (n_classes,)."""
        raise NotImplementedError

    def _pair_contributions(self, first: int, second: int) -> PairContributions:
        """How the features contribute to the log-odds of class first over class second."""
        raise NotImplementedError

    def _cell_contributions(self, X: Features, first: IndexArray, second: IndexArray) -> FloatArray:
        """The contribution of each stored cell of prepared CSR rows X, shape (nnz,), to the log-odds
        of each row's first class over its second (n,)."""
        raise NotImplementedError

    @blas_on_one_thread
    def explain(self, X: Features, top: int | None = 10) -> Explanations:
        """Each row's prediction explained: its log-odds over the runner-up class, split into the
        class priors' share and the contributions of its ``top`` features of largest |contribution|
        (see ``nbstream.naive_bayes.explanations`` for what a contribution is in each model).

        X : as ``predict`` takes it (checked as it checks it); top : an integer >= 1, or None for
        every feature whose contribution is not 0.

        >>> from nbstream import MultinomialNB
        >>> model = MultinomialNB().fit([[5, 0, 1], [0, 4, 1]], ["spam", "ham"])
        >>> explained = model.explain([[3, 0, 2]])
        >>> explained.rows(names=["win", "meeting", "hello"])[0]["features"][0]["feature"]
        'win'
        >>> bool(np.isclose(explained.prior + explained.contributions.sum(axis=1), explained.log_odds)[0])
        True
        """
        k = checked_top(top)
        X = self._prepared_for_prediction(X)
        jll = self._joint_log_likelihood(X)
        predicted, runner_up = first_two(jll)
        n_rows = len(jll)
        if jll.shape[1] == 1:
            nothing = np.full(n_rows, np.nan)
            return Explanations(self.classes_.copy(), predicted, runner_up, nothing, nothing.copy(),
                                np.full((n_rows, k or 0), -1, dtype=np.int64), np.zeros((n_rows, k or 0)))
        rows = np.arange(n_rows)
        prior_terms = self._prior_terms()
        top_of = self._top_of_sparse if is_sparse(X) else self._top_of_dense
        features, contributions = top_of(X, predicted, runner_up, k)
        return Explanations(self.classes_.copy(), predicted, runner_up, jll[rows, predicted] - jll[rows, runner_up],
                            prior_terms[predicted] - prior_terms[runner_up], features, contributions)

    def _top_of_dense(self, X: AnyArray, first: IndexArray, second: IndexArray, k: int | None) -> Top:
        """The top k features of dense rows X (n, n_features) (k None: all that contribute): the
        rows ordered by their pair of classes, in blocks whose contributions are found pair by
        pair and then ranked together."""
        n_rows, n_features = X.shape
        width = n_features if k is None else k
        features = np.full((n_rows, width), -1, dtype=np.int64)
        contributions = np.zeros((n_rows, width))
        order, runs = pair_runs(first, second)
        pairs = {pair: self._pair_contributions(*pair) for pair, _, _ in runs}
        step = max(1, _BLOCK_CELLS // n_features)
        for start in range(0, n_rows, step):
            stop = min(start + step, n_rows)
            block = np.empty((stop - start, n_features))
            for pair, run_start, run_stop in runs:
                at, to = max(run_start, start), min(run_stop, stop)
                if at < to:
                    pairs[pair].dense(X[order[at:to]], block[at - start:to - start])
            features[order[start:stop]], contributions[order[start:stop]] = largest_of_rows(block, width)
        return (features, contributions) if k is not None else _trimmed(features, contributions)

    def _top_of_sparse(self, X: Features, first: IndexArray, second: IndexArray, k: int | None) -> Top:
        """The top k features of CSR rows X (k None: all that contribute): each row's own cells,
        merged, where the model gives the features a row lacks a contribution, with those."""
        if not X.has_canonical_format:  # a feature stored twice is one feature
            X = X.copy()
            X.sum_duplicates()
        n_rows = X.shape[0]
        rows = np.repeat(np.arange(n_rows), np.diff(X.indptr))
        features, contributions = largest_of_cells(rows, X.indices, self._cell_contributions(X, first, second),
                                                   n_rows, k)
        pieces: list[tuple[IndexArray, Top]] = []
        order, runs = pair_runs(first, second)
        for pair, start, stop in runs:
            absent = self._pair_contributions(*pair).absent()
            if absent is not None:
                chosen = order[start:stop]
                pieces.append((chosen, merged_largest((features[chosen], contributions[chosen]),
                                                      top_of_absent(absent, X, chosen, k), k)))
        return _assembled((features, contributions), pieces)


def pair_runs(first: IndexArray, second: IndexArray) -> tuple[IndexArray, list[tuple[tuple[int, int], int, int]]]:
    """The rows ordered by their pair of classes, first then second (n,), and the runs of that
    order: ((first class, second class), start, stop) for each pair."""
    pairs = first.astype(np.int64) * (int(second.max(initial=0)) + 1) + second
    order = np.argsort(pairs, kind="stable")
    ordered = pairs[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(order) else np.zeros(0, np.intp)
    stops = np.r_[starts[1:], len(order)]
    return order, [((int(first[order[start]]), int(second[order[start]])), start, stop)
                   for start, stop in zip(starts.tolist(), stops.tolist(), strict=True)]


def top_of_absent(absent: FloatArray, X: Features, chosen: IndexArray, k: int | None) -> Top:
    """For the chosen CSR rows of X, the top k of the features each lacks, by their contributions
    absent (n_features,): (features (n_chosen, k), contributions (n_chosen, k)), ordered and padded.
    The candidates are the top k + (the most cells a chosen row has) of absent, found once."""
    starts, counts = X.indptr[chosen], np.diff(X.indptr)[chosen]
    wanted = len(absent) if k is None else min(len(absent), k + int(counts.max(initial=0)))
    candidates, values = (column[0] for column in largest_of_rows(absent[None, :], wanted))
    candidates, values = candidates[candidates >= 0], values[candidates >= 0]
    lacking = np.ones((len(chosen), len(candidates)), dtype=bool)
    held_features = X.indices[cells_of_rows(starts, counts)]
    by_feature = np.argsort(candidates)
    place = np.minimum(np.searchsorted(candidates[by_feature], held_features), max(len(candidates) - 1, 0))
    held = candidates[by_feature][place] == held_features if len(candidates) else np.zeros(0, dtype=bool)
    lacking[np.repeat(np.arange(len(chosen)), counts)[held], by_feature[place[held]]] = False
    if k is not None:
        lacking &= np.cumsum(lacking, axis=1) <= k
    width = int(lacking.sum(axis=1).max(initial=0)) if k is None else k
    order = np.argsort(~lacking, axis=1, kind="stable")[:, :width]  # the kept candidates, in their order
    kept = np.take_along_axis(lacking, order, axis=1)
    return np.where(kept, candidates[order], -1), np.where(kept, values[order], 0.0)


def _assembled(whole: Top, pieces: list[tuple[IndexArray, Top]]) -> Top:
    """``whole`` with the rows of each piece (rows, top of those rows) replaced, as wide as the widest."""
    if not pieces:
        return whole
    width = max([whole[0].shape[1]] + [top[0].shape[1] for _, top in pieces])
    features = np.full((len(whole[0]), width), -1, dtype=np.int64)
    contributions = np.zeros((len(whole[0]), width))
    features[:, :whole[0].shape[1]], contributions[:, :whole[0].shape[1]] = whole
    for rows, (piece_features, piece_contributions) in pieces:
        features[rows] = -1
        contributions[rows] = 0.0
        features[rows, :piece_features.shape[1]] = piece_features
        contributions[rows, :piece_features.shape[1]] = piece_contributions
    return features, contributions


def _trimmed(features: IntArray, contributions: FloatArray) -> Top:
    """Padded results without the columns that pad every row."""
    width = int((features >= 0).sum(axis=1).max(initial=0))
    return features[:, :width].copy(), contributions[:, :width].copy()
