"""--promote auto's watch: the log-loss of every model over the last examples judged, and when a
challenger beats the served model by the margin."""

from __future__ import annotations

import numpy as np
import pytest

from worker.service.models.promotion import PromotionWatch
from worker.service.partition.partition import Judged

CLASSES = np.array(["a", "b"])


def judged_with(p_right: float, n: int, rows: np.ndarray | None = None) -> Judged:
    """n rows of label "a", each predicted with probability ``p_right`` for it (those of ``rows``)."""
    rows = np.ones(n, dtype=bool) if rows is None else rows
    return Judged(CLASSES, np.tile([p_right, 1 - p_right], (int(rows.sum()), 1)), rows)


def feed(watch: PromotionWatch, n: int, **p_right: float) -> None:
    watch.judged(np.array(["a"] * n), {name: judged_with(p, n) for name, p in p_right.items()})


def test_nothing_is_decided_before_the_window_is_full():
    watch = PromotionWatch(["main", "cnb"], window=100, margin=0.05)
    feed(watch, 99, main=0.5, cnb=0.9)
    assert watch.decide("main") is None
    feed(watch, 1, main=0.5, cnb=0.9)
    promotion = watch.decide("main")
    assert promotion is not None and (promotion.from_model, promotion.to_model) == ("main", "cnb")
    assert promotion.served_log_loss == pytest.approx(-np.log(0.5))
    assert promotion.challenger_log_loss == pytest.approx(-np.log(0.9))
    assert promotion.lower_by == pytest.approx(1 - np.log(0.9) / np.log(0.5))


@pytest.mark.parametrize("p_challenger, promoted", [(0.52, False), (0.53, True)])
def test_a_challenger_must_be_lower_by_the_margin_relatively(p_challenger, promoted):
    """-log(0.52) is 5.7% below -log(0.5), -log(0.53) 8.4%: a margin of 7% takes the second only."""
    watch = PromotionWatch(["main", "cnb"], window=100, margin=0.07)
    feed(watch, 100, main=0.5, cnb=p_challenger)
    assert (watch.decide("main") is not None) == promoted


def test_of_several_better_challengers_the_lowest_is_promoted_and_the_ring_starts_empty():
    watch = PromotionWatch(["main", "a", "b"], window=100, margin=0.05)
    feed(watch, 150, main=0.5, a=0.8, b=0.9)
    assert watch.decide("main").to_model == "b"
    assert watch.log_losses() == {} and watch.decide("b") is None
    feed(watch, 100, main=0.99, a=0.8, b=0.5)
    assert watch.decide("b").to_model == "main"  # the former served model can take its place back


def test_a_challenger_not_judged_on_every_example_of_the_window_waits():
    watch = PromotionWatch(["main", "new"], window=100, margin=0.05)
    rows = np.arange(100) >= 10  # it knew no class for the first ten
    watch.judged(np.array(["a"] * 100), {"main": judged_with(0.5, 100), "new": judged_with(0.9, 100, rows)})
    assert watch.decide("main") is None
    feed(watch, 10, main=0.5, new=0.9)  # ten more: the ten without it fall out of the window
    assert watch.decide("main").to_model == "new"


def test_only_the_last_window_counts_and_a_long_batch_keeps_its_newest_rows():
    watch = PromotionWatch(["main", "cnb"], window=100, margin=0.05)
    feed(watch, 1_000, main=0.5, cnb=0.9)
    feed(watch, 250, main=0.9, cnb=0.5)  # more than the window at once
    assert watch.log_losses() == {"main": pytest.approx(-np.log(0.9)), "cnb": pytest.approx(-np.log(0.5))}
    assert watch.decide("main") is None


def test_a_label_no_class_stood_for_costs_the_clipped_loss_of_probability_0():
    watch = PromotionWatch(["main"], window=100, margin=0.05)
    watch.judged(np.array(["c"]), {"main": judged_with(0.5, 1)})
    assert watch.log_losses()["main"] == pytest.approx(-np.log(np.finfo(np.float64).eps))
