"""The global model of each model a group learns, and which one serves.

Each named model is merged from its own statistics in every partition state, as a group of one
model is (``global_model.GlobalModel``); all of them follow the same states, so they merge again
together. Every message is predicted by each of them, test-then-train: the served model's
predictions are sent, the others' judged (and, in shadow mode, sent beside them).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any, Protocol

import numpy as np

from nbstream.arrow import FeatureEncoder
from nbstream.naive_bayes import NaiveBayes
from nbstream.utils.ndarrays import AnyArray

from ..explaining import Explaining
from ..global_model import GlobalModel, Predictions, Statistics
from .lineup import Lineup


class HoldsModels(Protocol):
    """A state that holds a model per name (a Partition, or a record of one)."""

    def statistics(self, name: str) -> Statistics | None:
        """Its model ``name`` (None: it holds none of that name)."""


class GroupStates(Protocol):
    """Where the models' statistics come from (``GroupState``)."""

    def states(self) -> list[HoldsModels]:
        """Every state the merges take."""

    def version(self) -> Hashable:
        """Changes whenever ``states()`` would give other states (see ``StatisticsSources``)."""


class NamedSources:
    """The statistics of one named model among a group's states: a ``GlobalModel``'s sources."""

    def __init__(self, group: GroupStates, name: str):
        self._group, self._name = group, name

    def states(self) -> list[Statistics]:
        found = (state.statistics(self._name) for state in self._group.states())
        return [statistics for statistics in found if statistics is not None]

    def version(self) -> Hashable:
        return self._group.version()


class GlobalModels:
    """The global model of every name of ``lineup`` over ``group``'s states, and the one that
    serves (at first the primary: the model the serve options describe).

    fresh() : an unfitted primary model; encoder : the group's; classes : a fixed class set, or None."""

    def __init__(self, lineup: Lineup, fresh: Callable[[], NaiveBayes[Any, Any]], encoder: FeatureEncoder,
                 group: GroupStates, classes: AnyArray | list[Any] | None = None):
        self._models = {name: GlobalModel(lineup.maker(name, fresh), encoder, NamedSources(group, name), classes)
                        for name in lineup.names}
        self._served = lineup.primary

    @property
    def served(self) -> str:
        """The name of the model whose predictions are sent."""
        return self._served

    @property
    def served_model(self) -> GlobalModel:
        return self._models[self._served]

    def serve(self, name: str) -> None:
        """Send the predictions of model ``name`` from now on (one of the lineup's)."""
        if name not in self._models:
            raise KeyError(f"no model is named {name!r}")
        self._served = name

    def __getitem__(self, name: str) -> GlobalModel:
        return self._models[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._models)

    def __contains__(self, name: object) -> bool:
        return name in self._models

    @property
    def challengers(self) -> list[str]:
        """The names of the models that do not serve."""
        return [name for name in self._models if name != self._served]

    @property
    def counts_only(self) -> bool:
        """Whether a model takes counts only: a message with a negative feature value is then
        no example for any of them."""
        return any(model.counts_only for model in self._models.values())

    def adopt_width(self, encoder: FeatureEncoder) -> None:
        """Take a list width another replica learned (see ``GlobalModel.adopt_width``)."""
        for model in self._models.values():
            model.adopt_width(encoder)

    def predict_then_learn(self, X: object, y: np.ndarray, learned: np.ndarray, partitions: np.ndarray,
                           explain: Explaining | None = None,
                           explain_challengers: bool = False) -> dict[str, Predictions]:
        """Each model's test-then-train predictions of a poll's rows (``GlobalModel.predict_then_learn``),
        by name, the served model's first; explained as ``explain`` asks (the challengers' too with
        ``explain_challengers``)."""
        names = [self._served, *self.challengers]
        return {name: self._models[name].predict_then_learn(
                    X, y, learned, partitions, explain if name == self._served or explain_challengers else None)
                for name in names}
