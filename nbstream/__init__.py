"""nbstream: streaming Naive Bayes with mergeable statistics and safe snapshots.

The five models follow scikit-learn's ``naive_bayes`` (same parameters, attributes and
numbers) and add what a stream needs: an open class set, ``merge``, forgetting
(``half_life``), lazy refresh of the smoothed tables, and ``save``/``load``.
"""

from .bernoulli import BernoulliNB
from .categorical import CategoricalNB
from .complement import ComplementNB
from .gaussian import GaussianNB
from .multinomial import MultinomialNB
from .snapshot import SnapshotError, load, save
from .validation import NotFittedError

__all__ = ["BernoulliNB", "CategoricalNB", "ComplementNB", "GaussianNB", "MultinomialNB",
           "NotFittedError", "SnapshotError", "load", "save"]
__version__ = "0.1.0"
