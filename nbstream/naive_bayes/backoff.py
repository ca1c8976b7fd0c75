"""A key's model backed off to the group's: the key's counts plus m pseudo-examples drawn from
the group's model, smoothed as the family smooths any counts.

With pi_c the group's class prior (``class_log_prior_``), the m pseudo-examples hold, in
expectation,

    class c:               m pi_c examples
    feature f of class c:  m pi_c L_c theta_cf

where theta_cf is the group's smoothed probability of feature f in class c (BernoulliNB: of
x_f = 1, (N_cf + alpha) / (N_c + 2 alpha); MultinomialNB and ComplementNB: of a unit of f,
(N_cf + alpha) / (N_c. + n_features alpha)) and L_c the units an example of class c carries:
1 for BernoulliNB, the group's mean row sum N_c. / N_c for the others. The key's model is then
the family's model of the key's counts plus these, with the family's own alpha and priors; so
for MultinomialNB

    P_k(c)      = (n_kc + m pi_c) / (n_k + m)
    theta_k(cf) = (n_kcf + m pi_c L_c theta_cf + alpha) / (n_kc. + m pi_c L_c + n_features alpha)

m = 0 gives the key's own model, that of its examples alone; the larger m, the closer a key of few
examples stays to the group's model. A key that has learned nothing is answered by the group's
model itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..stats.keyed_counts import KeyCells
from ..stats.sparse_counts import PairCounts
from ..utils.ndarrays import FloatArray
from .base import NaiveBayes
from .discrete import FeatureCountsNB
from .state import ModelState


@dataclass(frozen=True)
class PseudoCounts:
    """What m pseudo-examples drawn from the group's model add to a key's counts, in expectation:
    class_count (n_classes,), feature_count (n_classes, n_features)."""

    class_count: FloatArray
    feature_count: FloatArray


def pseudo_examples(group: FeatureCountsNB[Any], prior_weight: float) -> tuple[FloatArray, FloatArray]:
    """(m pi_c, m pi_c L_c), each (n_classes,): the pseudo-examples of each class, and the units of
    features they carry."""
    examples = prior_weight * np.exp(group._class_log_prior())
    if group.kind == "bernoulli":
        return examples, examples
    class_count, totals = group._stats.class_count, feature_totals(group)
    with np.errstate(divide="ignore", invalid="ignore"):
        units = np.where(class_count > 0, totals / class_count, 0.0)
    return examples, examples * units


def feature_totals(group: FeatureCountsNB[Any]) -> FloatArray:
    """N_c.: each class's counts summed over the features, (n_classes,)."""
    counts = group._stats
    if isinstance(counts, PairCounts):
        return counts.class_feature_totals()
    return counts.feature_count.sum(axis=1)  # type: ignore[no-any-return]


def pseudo_counts(group: FeatureCountsNB[Any], prior_weight: float) -> PseudoCounts:
    """The counts of ``prior_weight`` pseudo-examples of the fitted ``group`` model (dense)."""
    examples, units = pseudo_examples(group, prior_weight)
    counts = group._as_dense(group._stats)
    alpha = group._smoothing_alpha()
    if group.kind == "bernoulli":
        denominator = counts.class_count[:, None] + np.multiply(alpha, 2)
    else:
        denominator = (feature_totals(group) + np.sum(np.broadcast_to(alpha, (group.n_features_in_,))))[:, None]
    theta = (counts.feature_count + alpha) / denominator
    return PseudoCounts(examples, units[:, None] * theta)


def key_model(group: FeatureCountsNB[Any], cells: KeyCells, examples: int, pseudo: PseudoCounts
              ) -> NaiveBayes[Any, Any]:
    """The model of one key (``cells`` of it alone) that learned ``examples`` rows, backed off by
    ``pseudo``: a model of the group's family and parameters (dense counts), classes and features."""
    n_features = pseudo.feature_count.shape[1]
    class_count = pseudo.class_count + cells.class_count[0]
    feature_count = pseudo.feature_count.copy()
    feature_count[cells.classes, cells.features] += cells.counts
    group_state = group.export_state(tables=False, copy=False)
    state = ModelState(kind=group.kind, params={**group_state.params, "counts": "dense"},
                       classes=group_state.classes, open_classes=group_state.open_classes, n_features=n_features,
                       examples_seen=examples, statistics={"class_count": class_count, "feature_count": feature_count},
                       feature_names=group_state.feature_names)
    return type(group).from_state(state, copy=False, keep_tables=True)
