"""The Page-Hinkley test, as River's ``river.drift.PageHinkley``: cumulative deviations from
the running mean, beyond a threshold."""

from __future__ import annotations

import math
from typing import Any

from ..utils.checked import finite, integer, number, shown

# The largest magnitude a detector takes: the sums of squared deviations of any stream of such
# values stay far from float64's overflow, and every state stays finite JSON.
from .base import _COUNT_MAX, DriftDetector, _field


class PageHinkley(DriftDetector):
    """The Page-Hinkley test (Page, 1954): a CUSUM of the values' deviations from their running
    mean, with forgetting; a drift when the sum rises (or falls) more than ``threshold`` above its
    lowest (below its highest).

    min_instances : no drift is reported before this many values
    delta : the deviation tolerated without counting (finite, 0 or more)
    threshold : the change that makes a drift (lambda; finite, above 0)
    alpha : the forgetting factor of the sums, in (0, 1]
    mode : "up" watches increases of the mean, "down" decreases, "both" either
    """

    kind = "page-hinkley"
    parameters = ("min_instances", "delta", "threshold", "alpha", "mode")
    MODES = ("up", "down", "both")

    def __init__(self, min_instances: int = 30, delta: float = 0.005, threshold: float = 50.0,
                 alpha: float = 1 - 0.0001, mode: str = "both") -> None:
        super().__init__()
        self.min_instances = integer(min_instances, "PageHinkley min_instances", 0, _COUNT_MAX)
        self.delta = number(delta, "PageHinkley delta", 0.0, math.inf, open_high=True)
        self.threshold = number(threshold, "PageHinkley threshold", 0.0, math.inf, open_low=True, open_high=True)
        self.alpha = number(alpha, "PageHinkley alpha", 0.0, 1.0, open_low=True)
        if mode not in self.MODES:
            raise ValueError(f"PageHinkley mode must be one of {', '.join(self.MODES)}; got {shown(mode)}")
        self.mode = mode
        self._restart()

    def _restart(self) -> None:
        self._n = 0  # values since the restart
        self._mean = 0.0
        self._sum_increase = 0.0
        self._sum_decrease = 0.0
        self._min_increase = math.inf  # the lowest _sum_increase so far (none before the first value)
        self._max_decrease = -1.0  # the highest _sum_decrease so far, or River's start of -1

    def _learn(self, value: float) -> bool:
        self._n += 1
        self._mean += (1.0 / self._n) * (value - self._mean)
        deviation = value - self._mean
        self._sum_increase = self.alpha * self._sum_increase + deviation - self.delta
        self._sum_decrease = self.alpha * self._sum_decrease + deviation + self.delta
        self._min_increase = min(self._min_increase, self._sum_increase)
        self._max_decrease = max(self._max_decrease, self._sum_decrease)
        if self._n < self.min_instances:
            return False
        rise = self._sum_increase - self._min_increase > self.threshold
        fall = self._max_decrease - self._sum_decrease > self.threshold
        return rise if self.mode == "up" else fall if self.mode == "down" else rise or fall

    def _stream_state(self) -> dict[str, Any]:
        return {"n": self._n, "mean": self._mean, "sum_increase": self._sum_increase,
                "sum_decrease": self._sum_decrease,
                "min_increase": self._min_increase if self._n else None, "max_decrease": self._max_decrease}

    def _restore_stream_state(self, state: dict[str, object]) -> None:
        self._n = integer(_field(state, "n"), "PageHinkley n", 0, _COUNT_MAX)
        self._mean = finite(_field(state, "mean"), "PageHinkley mean")
        self._sum_increase = finite(_field(state, "sum_increase"), "PageHinkley sum_increase")
        self._sum_decrease = finite(_field(state, "sum_decrease"), "PageHinkley sum_decrease")
        self._max_decrease = finite(_field(state, "max_decrease"), "PageHinkley max_decrease")
        min_increase = _field(state, "min_increase")
        if self._n == 0:
            if min_increase is not None:
                raise ValueError("PageHinkley min_increase must be null before the first value")
            self._min_increase = math.inf
        else:
            self._min_increase = finite(min_increase, "PageHinkley min_increase")
            if self._min_increase > self._sum_increase or self._max_decrease < self._sum_decrease:
                raise ValueError("PageHinkley min_increase must be at most sum_increase, and max_decrease at least "
                                 "sum_decrease")


