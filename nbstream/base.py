"""``NaiveBayes``: the class every streaming Naive Bayes model derives from, put together from
its core (``nbstream.core``: learning, forgetting, windows, the smoothed tables, predicting,
parameters), merging and the learned state (``nbstream.merging``) and test-then-train
(``nbstream.prequential``).
"""

from __future__ import annotations

from .core import StatsT
from .merging import MergeableModel
from .prequential import PrequentialScores, TestThenTrain
from .tables import TablesT

__all__ = ["NaiveBayes", "PrequentialScores"]


class NaiveBayes(TestThenTrain[StatsT, TablesT], MergeableModel[StatsT, TablesT]):
    """Base class; see the five models for parameters and examples."""
