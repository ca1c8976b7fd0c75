"""The models a group learns, by name: the one the serve options describe, and its challengers.

Every partition holds one model of each name, learned from the same labeled examples. A state
read from the topic may hold other names than the lineup of this run (challengers added or
removed since it was written): ``aligned`` gives it one model per name of the lineup, those of
names it does not know new, and leaves out the others. ``differing`` tells a model learned under
a name from the one the lineup describes under it (a SPEC changed under the same name).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from nbstream.naive_bayes import NaiveBayes

from ...model_names import DEFAULT_NAME
from ..partition.record import ModelState, PartitionRecord


@dataclass(frozen=True)
class Lineup:
    """primary : the name of the model the serve options describe (the group's ``fresh()``);
    challengers : each other model's maker (an unfitted model with its parameters), by name;
    named : whether predictions name the model that served them (--model-name or a challenger given)."""
    primary: str = DEFAULT_NAME
    challengers: dict[str, Callable[[], NaiveBayes[Any, Any]]] = field(default_factory=dict)
    named: bool = False

    @property
    def names(self) -> list[str]:
        """Every model's name, the primary's first."""
        return [self.primary, *self.challengers]

    def maker(self, name: str, fresh: Callable[[], NaiveBayes[Any, Any]]) -> Callable[[], NaiveBayes[Any, Any]]:
        """What makes an unfitted model of ``name`` (``fresh``: the primary's)."""
        return fresh if name == self.primary else self.challengers[name]

    def aligned(self, record: PartitionRecord, fresh: Callable[[], NaiveBayes[Any, Any]]) -> PartitionRecord:
        """The record holding one model per name of the lineup, the primary first: each as the
        record holds it (a new one in place of one that learned nothing), a new one for a name it
        holds none of; those of other names left out. fresh() : an unfitted primary model."""
        held = {record.name: ModelState(record.model, record.quality), **record.others}

        def state(name: str) -> ModelState:
            kept = held.get(name)
            make = self.maker(name, fresh)
            if kept is None:
                return ModelState(make())
            return kept if kept.model.is_fitted else ModelState(make(), kept.quality)

        first = state(self.primary)
        return replace(record, model=first.model, quality=first.quality, name=self.primary,
                       others={name: state(name) for name in self.challengers})

    def differing(self, record: PartitionRecord, fresh: Callable[[], NaiveBayes[Any, Any]]
                  ) -> tuple[str, NaiveBayes[Any, Any], NaiveBayes[Any, Any]] | None:
        """(name, the model the record learned, the model the lineup describes) of the first name of
        both whose model is of another kind or has other parameters; None when none is."""
        for name in record.names:
            statistics = record.statistics(name)
            if name not in self.names or statistics is None or not statistics.model.is_fitted:
                continue
            configured = self.maker(name, fresh)()
            learned = statistics.model
            if type(learned) is not type(configured) or learned.differing_params(configured):
                return name, learned, configured
        return None
