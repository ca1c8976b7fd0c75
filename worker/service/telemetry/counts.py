"""Counts of the work done since the last commit, published to the metrics once that work is committed.

A session that fails is discarded and its work redone by the next one (from the last commit),
so counting messages, predictions, learned examples and dead letters as they happen would count
the redone ones twice (and a prediction that became a dead letter as both). The counters say what
was committed: what was consumed and left, exactly once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .metrics import ServiceMetrics


@dataclass
class UncommittedCounts:
    messages: int = 0
    predictions: int = 0
    learned: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)  # error -> how many
    labels: Counter[str] = field(default_factory=Counter)  # delayed labels: what became of them -> how many
    label_delays: list[np.ndarray] = field(default_factory=list)  # seconds from input to label, of joined pairs
    promotions: Counter[tuple[str, str]] = field(default_factory=Counter)  # (from model, to model) -> how many

    def add(self, *, messages: int = 0, predictions: int = 0, learned: int = 0) -> None:
        """Count messages consumed, predictions produced and examples learned (negative: taken back)."""
        self.messages += messages
        self.predictions += predictions
        self.learned += learned

    def label_outcome(self, outcome: str, count: int) -> None:
        """Count what became of delayed labels and pending examples (``LABEL_OUTCOMES``'s names)."""
        if count:
            self.labels[outcome] += count

    def joined(self, delays_s: np.ndarray) -> None:
        """Count pairs of a message and its label that met, learned: delays_s (n,) seconds from
        the message's timestamp to the label's."""
        self.labels["joined"] += len(delays_s)
        self.label_delays.append(delays_s)
        self.learned += len(delays_s)

    def promoted(self, from_model: str, to_model: str) -> None:
        """Count a challenger promoted in place of the served model."""
        self.promotions[from_model, to_model] += 1

    def dead_lettered(self, error: str) -> None:
        """Told of every dead letter sent (the sink's callback)."""
        self.dead_letters[error] += 1

    def publish(self, metrics: ServiceMetrics) -> None:
        """Add what was just committed to the metrics, and start counting anew."""
        metrics.messages.inc(self.messages)
        metrics.predictions.inc(self.predictions)
        metrics.learned.inc(self.learned)
        for error, count in self.dead_letters.items():
            metrics.dead_lettered(error, count)
        for outcome, count in self.labels.items():
            metrics.delayed_labels[outcome].inc(count)
        for delays in self.label_delays:
            metrics.label_delay.observe_many(delays)
        for (from_model, to_model), count in self.promotions.items():
            metrics.promotions.labels(from_model, to_model).inc(count)
        self.messages = self.predictions = self.learned = 0
        self.dead_letters.clear()
        self.labels.clear()
        self.label_delays.clear()
        self.promotions.clear()
