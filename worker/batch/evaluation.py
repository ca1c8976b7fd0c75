"""Classification metrics for `worker evaluate`: they live in the library (``nbstream.evaluation``)."""

from nbstream.evaluation import ConfusionCounts

__all__ = ["ConfusionCounts"]
