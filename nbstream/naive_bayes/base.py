"""``NaiveBayes``: the class every streaming Naive Bayes model derives from, put together from
its core (``nbstream.naive_bayes.core``: learning, forgetting, windows, the smoothed tables, predicting,
parameters), merging and the learned state (``nbstream.naive_bayes.merging``), test-then-train
(``nbstream.naive_bayes.prequential_scores``) and explanations (``nbstream.naive_bayes.explanations``).
"""

from __future__ import annotations

from .core import StatsT
from .explanations import Explaining
from .merging import MergeableModel
from .prequential_scores import PrequentialScores, TestThenTrain
from .tables import TablesT

__all__ = ["NaiveBayes", "PrequentialScores"]


class NaiveBayes(TestThenTrain[StatsT, TablesT], MergeableModel[StatsT, TablesT], Explaining[StatsT, TablesT]):
    """Base class; see the five models for parameters and examples."""
