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


def losses(watch: PromotionWatch, n: int, **p_right: float) -> np.ndarray:
    """The log-losses of n examples of label "a" each model predicted with probability ``p_right``."""
    return watch.losses(np.array(["a"] * n), {name: judged_with(p, n) for name, p in p_right.items()})[0]


def feed(watch: PromotionWatch, n: int, served: str = "main", **p_right: float) -> list[tuple[int, object]]:
    return watch.scan(losses(watch, n, **p_right), served)


def test_nothing_is_decided_before_the_window_is_full():
    watch = PromotionWatch(["main", "cnb"], window=100, margin=0.05)
    assert feed(watch, 99, main=0.5, cnb=0.9) == []
    [(index, promotion)] = feed(watch, 1, main=0.5, cnb=0.9)
    assert index == 0 and (promotion.from_model, promotion.to_model) == ("main", "cnb")
    assert promotion.served_log_loss == pytest.approx(-np.log(0.5))
    assert promotion.challenger_log_loss == pytest.approx(-np.log(0.9))
    assert promotion.lower_by == pytest.approx(1 - np.log(0.9) / np.log(0.5))


@pytest.mark.parametrize("p_challenger, promoted", [(0.52, False), (0.53, True)])
def test_a_challenger_must_be_lower_by_the_margin_relatively(p_challenger, promoted):
    """-log(0.52) is 5.7% below -log(0.5), -log(0.53) 8.4%: a margin of 7% takes the second only."""
    watch = PromotionWatch(["main", "cnb"], window=100, margin=0.07)
    assert bool(feed(watch, 100, main=0.5, cnb=p_challenger)) == promoted


def test_a_tie_never_promotes_even_with_no_margin():
    watch = PromotionWatch(["main", "twin"], window=100, margin=0.0)
    assert feed(watch, 1_000, main=0.5, twin=0.5) == []


def test_of_several_better_challengers_the_lowest_is_promoted_at_the_example_and_the_ring_starts_empty():
    watch = PromotionWatch(["main", "a", "b"], window=100, margin=0.05)
    [(index, promotion)] = feed(watch, 150, main=0.5, a=0.8, b=0.9)
    assert index == 99 and promotion.to_model == "b"
    assert watch.log_losses() == {name: pytest.approx(-np.log(p)) for name, p in [("main", 0.5), ("a", 0.8),
                                                                                    ("b", 0.9)]}  # the 50 after
    watch.reset()
    [(index, promotion)] = feed(watch, 100, served="b", main=0.99, a=0.8, b=0.5)
    assert index == 99 and promotion.to_model == "main"  # the former served model can take its place back


def test_a_challenger_not_judged_on_every_example_of_the_window_waits():
    watch = PromotionWatch(["main", "new"], window=100, margin=0.05)
    rows = np.arange(100) >= 10  # it knew no class for the first ten
    first = watch.losses(np.array(["a"] * 100), {"main": judged_with(0.5, 100), "new": judged_with(0.9, 100, rows)})
    assert watch.scan(first[0], "main") == []
    [(index, promotion)] = feed(watch, 10, main=0.5, new=0.9)  # the ten without it fall out of the window
    assert index == 9 and promotion.to_model == "new"


def test_only_the_last_window_counts_and_a_long_batch_keeps_its_newest_rows():
    watch = PromotionWatch(["main", "cnb"], window=100, margin=0.05)
    assert feed(watch, 1_000, cnb=0.5, main=0.9) == []
    assert feed(watch, 250, main=0.9, cnb=0.5) == []  # more than the window at once
    assert watch.log_losses() == {"main": pytest.approx(-np.log(0.9)), "cnb": pytest.approx(-np.log(0.5))}


def test_a_label_no_class_stood_for_costs_the_clipped_loss_of_probability_0():
    watch = PromotionWatch(["main"], window=100, margin=0.05)
    watch.scan(watch.losses(np.array(["c"]), {"main": judged_with(0.5, 1)})[0], "main")
    assert watch.log_losses()["main"] == pytest.approx(-np.log(np.finfo(np.float64).eps))


def test_the_promotions_are_the_same_however_the_examples_are_cut():
    """Random log-losses of three models, scanned one example at a time and in random pieces:
    the same promotions at the same examples, with the same figures to the last bit."""
    rng = np.random.default_rng(7)
    drifting = np.repeat(rng.uniform(0.2, 1.5, size=(40, 3)), 50, axis=0) + rng.uniform(0, 0.3, size=(2_000, 3))
    drifting[rng.random(drifting.shape) < 0.01] = np.nan  # some examples a model was not judged on

    def promotions(pieces: list[int]) -> list[tuple[int, tuple]]:
        watch, served, done, found = PromotionWatch(["m0", "m1", "m2"], window=60, margin=0.02), "m0", 0, []
        for size in pieces:
            for index, promotion in watch.scan(drifting[done:done + size], served):
                found.append((done + index, (promotion.to_model, promotion.served_log_loss,
                                             promotion.challenger_log_loss)))
                served = promotion.to_model
            done += size
        return found

    one_by_one = promotions([1] * 2_000)
    assert len(one_by_one) >= 5
    for _ in range(5):
        cuts = np.sort(rng.choice(np.arange(1, 2_000), size=rng.integers(1, 60), replace=False))
        assert promotions(np.diff([0, *cuts, 2_000]).tolist()) == one_by_one


def test_judgements_of_labels_that_came_later_are_scanned_after_the_poll():
    watch = PromotionWatch(["main", "cnb"], window=100, margin=0.05)
    watch.judged(np.array(["a"] * 60), {"main": judged_with(0.5, 60), "cnb": judged_with(0.9, 60)})
    watch.judged(np.array(["a"] * 60), {"main": judged_with(0.5, 60), "cnb": judged_with(0.9, 60)})
    [promotion] = watch.scan_queued("main")
    assert promotion.to_model == "cnb" and watch.scan_queued("cnb") == []
    assert watch.log_losses() == {"main": pytest.approx(-np.log(0.5)), "cnb": pytest.approx(-np.log(0.9))}
