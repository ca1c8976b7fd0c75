"""--promote auto: when a challenger's predictions do better than the served model's, it serves instead.

Every model is judged on the same labeled examples (``Partition`` tells the watch each judgement).
The watch keeps each model's log-loss of the last ``window`` examples judged on this replica, a
ring of (window, models), NaN where a model was not judged (it knew no class yet, say). A
challenger is promoted when, on every one of those examples, it and the served model were both
judged, and its mean log-loss is lower than the served model's by ``margin`` at least, relatively:
``challenger <= served * (1 - margin)``; of several such, the one of lowest log-loss. The ring
then starts empty, so that the next promotion compares a window of examples the new served
model served.

Memory: 8 bytes per example of the window per model (10,000 examples and 9 models: 720 KB).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nbstream.evaluation import example_losses
from nbstream.ndarrays import AnyArray, FloatArray

from ..partition.partition import Judged


@dataclass(frozen=True)
class Promotion:
    """A challenger (``to_model``) that serves in place of ``from_model``: their mean log-loss over
    the ``window`` examples both were judged on last, and the relative margin asked for."""
    from_model: str
    to_model: str
    served_log_loss: float
    challenger_log_loss: float
    window: int
    margin: float

    @property
    def lower_by(self) -> float:
        """How much lower, relatively, the challenger's log-loss is (0.2: 20% lower)."""
        return 1 - self.challenger_log_loss / self.served_log_loss if self.served_log_loss else 0.0

    def figures(self) -> dict[str, object]:
        """The figures, as JSON values (a log line's fields, the group's state)."""
        return {"from_model": self.from_model, "to_model": self.to_model,
                "served_log_loss": round(self.served_log_loss, 6),
                "challenger_log_loss": round(self.challenger_log_loss, 6),
                "lower_by": round(self.lower_by, 6), "window": self.window, "margin": self.margin}


class PromotionWatch:
    """names : every model's name; window : examples compared (--promote-window); margin : how much
    lower, relatively, a challenger's log-loss must be (--promote-margin)."""

    def __init__(self, names: list[str], window: int, margin: float):
        self.names, self.window, self.margin = list(names), window, margin
        self._column = {name: i for i, name in enumerate(self.names)}
        self._losses = np.full((window, len(self.names)), np.nan)  # a ring: row i % window is the i-th judged
        self._judged = 0  # examples judged since the ring was last emptied
        self._decided = 0  # as many when the last decision was taken

    def judged(self, y: AnyArray, judged: dict[str, Judged]) -> None:
        """Take the judgements of learned rows: y (n,) their labels, in stream order; judged : each
        model's predictions of some of them (``Judged``), by name."""
        rows = np.zeros(len(y), dtype=bool)
        for judgement in judged.values():
            rows |= judgement.judged
        losses = np.full((len(y), len(self.names)), np.nan)
        for name, judgement in judged.items():
            losses[judgement.judged, self._column[name]] = _log_losses(y[judgement.judged], judgement.classes,
                                                                       judgement.proba)
        self._append(losses[rows])

    def decide(self, served: str) -> Promotion | None:
        """The promotion the last ``window`` examples call for, if any (the ring then starts empty)."""
        if self._judged < self.window or self._judged == self._decided:
            return None
        self._decided = self._judged
        means = self.log_losses()
        served_loss = means.get(served)
        if served_loss is None:
            return None
        better = {name: loss for name, loss in means.items()
                  if name != served and loss <= served_loss * (1 - self.margin) and self._both_judged(served, name)}
        if not better:
            return None
        best = min(better, key=lambda name: better[name])
        self.reset()
        return Promotion(served, best, served_loss, better[best], self.window, self.margin)

    def log_losses(self) -> dict[str, float]:
        """Each model's mean log-loss over the examples of the ring it was judged on (those judged
        none left out)."""
        kept = self._losses if self._judged >= self.window else self._losses[:self._judged]
        counts = np.isfinite(kept).sum(axis=0)
        sums = np.nansum(kept, axis=0)
        return {name: float(sums[i] / counts[i]) for i, name in enumerate(self.names) if counts[i]}

    def reset(self) -> None:
        """Start the ring empty (after the served model changed)."""
        self._losses.fill(np.nan)
        self._judged = self._decided = 0

    def _both_judged(self, served: str, challenger: str) -> bool:
        columns = [self._column[served], self._column[challenger]]
        return bool(np.isfinite(self._losses[:, columns]).all())

    def _append(self, losses: FloatArray) -> None:
        """Rows (k, models) of log-losses, the newest last, into the ring."""
        kept = losses[-self.window:]
        start = self._judged + len(losses) - len(kept)
        self._losses[(start + np.arange(len(kept))) % self.window] = kept
        self._judged += len(losses)


def _log_losses(y: AnyArray, classes: AnyArray, proba: FloatArray) -> FloatArray:
    """(k,) each row's log-loss: y (k,) labels; proba (k, C) over classes (C,) (a label no column
    stands for: p = 0, clipped as ``PredictionQuality`` clips it)."""
    column = {label: i for i, label in enumerate(classes.tolist())}
    true_column = np.fromiter((column.get(label, -1) for label in y.tolist()), dtype=np.intp, count=len(y))
    return example_losses(proba, true_column)[0]
