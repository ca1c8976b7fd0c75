"""The model kinds by name: what a snapshot records and a command line asks for.

>>> model_class("bernoulli").__name__
'BernoulliNB'
>>> MODEL_KINDS
('bernoulli', 'multinomial', 'complement', 'gaussian', 'categorical')
"""

from __future__ import annotations

from typing import Any

from .base import NaiveBayes
from .bernoulli import BernoulliNB
from .categorical import CategoricalNB
from .complement import ComplementNB
from .gaussian import GaussianNB
from .multinomial import MultinomialNB

_MODELS: dict[str, type[NaiveBayes[Any, Any]]] = {
    cls.kind: cls for cls in (BernoulliNB, MultinomialNB, ComplementNB, GaussianNB, CategoricalNB)}
MODEL_KINDS: tuple[str, ...] = tuple(_MODELS)


def model_class(kind: str) -> type[NaiveBayes[Any, Any]]:
    """The model class of a kind; ValueError listing the kinds for an unknown one."""
    try:
        return _MODELS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unknown model kind {kind!r}; choose one of {', '.join(MODEL_KINDS)}.") from None
