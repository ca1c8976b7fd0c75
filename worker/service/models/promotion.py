"""--promote auto: when a challenger's predictions do better than the served model's, it serves instead.

Every model is judged on the same labeled examples. The watch keeps each model's log-loss of the
last ``window`` examples judged on this replica, NaN where a model was not judged (it knew no
class yet, say). A challenger is promoted when, on every one of those examples, it and the served
model were both judged, and its mean log-loss is lower than the served model's by ``margin`` at
least, relatively, and strictly: ``challenger < served * (1 - margin)`` (a tie never promotes); of
several such, the one of lowest log-loss. The ring then starts empty, so that the next promotion
compares a window of examples the new served model served.

The decision is taken at every example. A message learned with its label is judged before the
poll's predictions are sent (``scan``), so a challenger promoted by the judgement of message i
serves from message i + 1 on, inside the poll if need be: which model served each message depends
on the stream alone, not on how it was cut into polls. Examples learned when their label came
later (a labels topic) are judged in their partition, which queues them (``judged``); the loop
scans them after the poll (``scan_queued``), and a promotion they call for serves from the next poll.

Memory: 16 bytes per example of the window per model (10,000 examples and 9 models: 1.4 MB).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nbstream.metrics.classification import example_losses
from nbstream.utils.ndarrays import AnyArray, BoolArray, FloatArray, IntArray

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
    lower, relatively, a challenger's log-loss must be (--promote-margin).

    The decision is taken after every judged example, so which model served each message is a
    function of the stream alone, whatever the poll sizes: the window's sums are differences of
    running sums (``_Prefix``) added one example at a time in stream order, the same float64
    operations however the examples are cut into polls.
    """

    def __init__(self, names: list[str], window: int, margin: float):
        self.names, self.window, self.margin = list(names), window, margin
        self._column = {name: i for i, name in enumerate(self.names)}
        self._prefix = _Prefix(window, len(self.names))
        self._queued: list[FloatArray] = []  # judgements told by partitions (labels that came later)

    def losses(self, y: AnyArray, judged: dict[str, Judged]) -> tuple[FloatArray, BoolArray]:
        """The log-loss of each model for the rows any model was judged on, (k, models) in stream
        order, NaN where a model was not, and which of the n rows they are (n,): y (n,) the labels
        of rows learned in stream order; judged : each model's predictions of some of them, by name."""
        rows = np.zeros(len(y), dtype=bool)
        for judgement in judged.values():
            rows |= judgement.judged
        losses = np.full((len(y), len(self.names)), np.nan)
        for name, judgement in judged.items():
            losses[judgement.judged, self._column[name]] = _log_losses(y[judgement.judged], judgement.classes,
                                                                       judgement.proba)
        return losses[rows], rows

    def scan(self, losses: FloatArray, served: str) -> list[tuple[int, Promotion]]:
        """Take judged examples (k, models) (``losses``), in stream order, while ``served``
        serves: each promotion they call for, with the index of the example after whose judgement
        it is called for (the ring starts empty after each, and the promoted model serves on)."""
        found: list[tuple[int, Promotion]] = []
        start = 0
        while start < len(losses):
            first = self._first_promotion(losses[start:], served)
            if first is None:
                break
            index, promotion = first
            found.append((start + index, promotion))
            served = promotion.to_model
            self.reset()
            start += index + 1
        return found

    def judged(self, y: AnyArray, judged: dict[str, Judged]) -> None:
        """Queue the judgements of examples learned once their label came (``Referee``); the
        loop scans them after the poll (``scan_queued``)."""
        losses, _ = self.losses(y, judged)
        if len(losses):
            self._queued.append(losses)

    def scan_queued(self, served: str) -> list[Promotion]:
        """Scan the judgements queued since the last call (see ``scan``): the promotions they call for."""
        queued, self._queued = self._queued, []
        found: list[Promotion] = []
        for losses in queued:
            for _, promotion in self.scan(losses, served):
                found.append(promotion)
                served = promotion.to_model
        return found

    def log_losses(self) -> dict[str, float]:
        """Each model's mean log-loss over the examples of the ring it was judged on (those judged
        none left out)."""
        sums, counts = self._prefix.last(min(self._prefix.examples, self.window))
        return {name: float(sums[i] / counts[i]) for i, name in enumerate(self.names) if counts[i]}

    def reset(self) -> None:
        """Start the ring empty (after the served model changed)."""
        self._prefix.clear()

    def _first_promotion(self, losses: FloatArray, served: str) -> tuple[int, Promotion] | None:
        """The first of ``losses`` (k, models) after whose judgement a challenger is better than
        ``served`` over the last ``window`` examples, and its promotion; the examples up to it are
        taken (all of them when none is)."""
        ends, sums, counts = self._prefix.windows(losses)  # each full window's sums, ending at each example
        if served not in self._column or not len(ends):
            self._prefix.add(losses)
            return None
        s = self._column[served]
        full = counts == self.window  # judged on every example of the window
        # Strictly lower: a tie (identical models) never promotes, whatever the margin.
        better = full & full[:, [s]] & (sums < sums[:, [s]] * (1 - self.margin))
        better[:, s] = False
        hits = np.flatnonzero(better.any(axis=1))
        if not len(hits):
            self._prefix.add(losses)
            return None
        row = int(hits[0])
        candidates = np.where(better[row], sums[row], np.inf)
        best = int(np.argmin(candidates))  # the lowest log-loss; of equals, the first named
        index = int(ends[row])
        self._prefix.add(losses[:index + 1])
        promotion = Promotion(served, self.names[best], float(sums[row, s]) / self.window,
                              float(sums[row, best]) / self.window, self.window, self.margin)
        return index, promotion


class _Prefix:
    """Running sums of each model's log-losses (NaN: not judged, adds 0) and counts of judged
    examples since the ring was emptied, kept for the last ``window + 1`` examples: the sums over
    any of the last ``window`` examples are differences of two of them."""

    def __init__(self, window: int, models: int):
        self.window = window
        self._sums = np.zeros((window + 1, models))  # row i % (window + 1): the sums after i examples
        self._counts = np.zeros((window + 1, models), dtype=np.int64)
        self.examples = 0

    def clear(self) -> None:
        self._sums.fill(0)
        self._counts.fill(0)
        self.examples = 0

    def _running(self, losses: FloatArray) -> tuple[FloatArray, IntArray]:
        """(k + 1, models) the running sums and counts from the last one kept through each of losses (k, models)."""
        last = self.examples % (self.window + 1)
        sums = np.cumsum(np.vstack([self._sums[last], np.nan_to_num(losses, nan=0.0)]), axis=0)
        counts = np.cumsum(np.vstack([self._counts[last], np.isfinite(losses)]), axis=0)
        return sums, counts

    def _kept(self, first: int) -> tuple[FloatArray, IntArray]:
        """The kept running sums and counts after ``first`` .. ``examples`` examples."""
        at = np.arange(first, self.examples + 1) % (self.window + 1)
        return self._sums[at], self._counts[at]

    def windows(self, losses: FloatArray) -> tuple[IntArray, FloatArray, IntArray]:
        """For each example of losses (k, models) that ends a full window: its index in losses,
        and the window's sums and counts (m, models)."""
        first = max(0, self.examples - self.window)
        kept_sums, kept_counts = self._kept(first)
        new_sums, new_counts = self._running(losses)
        sums = np.vstack([kept_sums, new_sums[1:]])  # row r: after first + r examples
        counts = np.vstack([kept_counts, new_counts[1:]])
        totals = self.examples + 1 + np.arange(len(losses))  # examples after each of losses
        ends = np.flatnonzero(totals >= self.window)
        after = totals[ends] - first
        return ends, sums[after] - sums[after - self.window], counts[after] - counts[after - self.window]

    def last(self, n: int) -> tuple[FloatArray, IntArray]:
        """The sums and counts of the last n examples (n <= window)."""
        sums, counts = self._kept(self.examples - n)
        return sums[-1] - sums[0], counts[-1] - counts[0]

    def add(self, losses: FloatArray) -> None:
        """Take losses (k, models), the newest last."""
        if not len(losses):
            return
        sums, counts = self._running(losses)
        kept = min(len(losses), self.window + 1)
        at = (self.examples + 1 + np.arange(len(losses) - kept, len(losses))) % (self.window + 1)
        self._sums[at], self._counts[at] = sums[-kept:], counts[-kept:]
        self.examples += len(losses)


def _log_losses(y: AnyArray, classes: AnyArray, proba: FloatArray) -> FloatArray:
    """(k,) each row's log-loss: y (k,) labels; proba (k, C) over classes (C,) (a label no column
    stands for: p = 0, clipped as ``PredictionQuality`` clips it)."""
    column = {label: i for i, label in enumerate(classes.tolist())}
    true_column = np.fromiter((column.get(label, -1) for label in y.tolist()), dtype=np.intp, count=len(y))
    return example_losses(proba, true_column)[0]
