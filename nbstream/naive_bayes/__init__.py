"""The five Naive Bayes models, their base and core, merging, and test-then-train.

``NaiveBayes`` is what every model derives from; the models are public as ``nbstream.BernoulliNB``
and so on. The modules here are private to the package."""

from .base import NaiveBayes
from .bernoulli import BernoulliNB
from .categorical import CategoricalNB
from .complement import ComplementNB
from .explanations import Explanations
from .gaussian import GaussianNB
from .multinomial import MultinomialNB

__all__ = ["BernoulliNB", "CategoricalNB", "ComplementNB", "Explanations", "GaussianNB", "MultinomialNB", "NaiveBayes"]
