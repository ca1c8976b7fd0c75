"""The group's models as the last commit left them, handed to the inference API.

After each commit of the session (and each idle turn at which nothing was left to commit) every
named model's global model is copied, with the encoder its codes refer to, into an immutable
``AnsweringModel``, and the set replaces the one the API answers from. Between two commits the
global models learn what is not committed yet; the copies never do. The position of a copy is
the next offset of every input partition its state includes: those this replica owns (as just
committed) and the others' (as their committed states, read from the state topic, say).
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from dataclasses import replace

from nbstream.arrow import Pipeline

from ..inference.answering import AnsweringModel
from ..inference.sources import PublishedModels
from .group_state import GroupState
from .keys.answers import CommittedKeys, looked_up


class ModelPublisher:
    """Publishes ``group``'s models to ``board`` (topic: the input topic that names positions)."""

    def __init__(self, board: PublishedModels, group: GroupState, topic: str, label: str | None):
        self.board, self.group, self.topic, self.label = board, group, topic, label
        self._learned: Hashable = None  # what the models had learned when last copied
        self._served: str | None = None

    def position(self) -> dict[str, int]:
        """"TOPIC:PARTITION" -> the next offset the group's committed states include."""
        offsets = {p: s.next_offset for p, s in self.group.latest.items() if s.next_offset is not None}
        offsets.update(self.group.offsets())
        return {f"{self.topic}:{partition}": offset for partition, offset in sorted(offsets.items())}

    def publish(self) -> None:
        """Hand over the models, now that nothing learned is uncommitted. A model is copied only when
        it learned or merged something since the last copy; else the last copy goes on with the
        new position. The keys asked since the last publication (a model per key) are looked up."""
        models = self.group.models
        position = self.position()
        published = self.board.models()
        asked = self.board.take_keys()
        learned = (self.group.version(), tuple(models[name].version for name in models), self.group.keys_dropped())
        if learned == self._learned:
            if all(model.position == position for model in published.values()):
                if self._served == models.served and not asked:
                    return
            else:
                published = {name: replace(model, position=position) for name, model in published.items()}
        else:
            # (the copy's tables are computed by its first request, in the API's thread: the only
            # thread that ever uses it)
            published = {name: AnsweringModel(name, Pipeline(copy.deepcopy(models[name].model),
                                                             copy.deepcopy(models[name].encoder), label=self.label),
                                              str(models[name].version), position) for name in models}
            published = {name: self._with_keys(model, None) for name, model in published.items()}
        if asked:
            published = {name: self._with_keys(model, asked) for name, model in published.items()}
        self.board.publish(published, models.served)
        self._learned, self._served = learned, models.served

    def _with_keys(self, model: AnsweringModel, asked: set[str | int] | None) -> AnsweringModel:
        """The model with its keys (a group keeping a model per key): ``asked`` looked up now, beside
        those looked up before at this state (None: a new state, none looked up yet)."""
        weight = self.group.settings.key_prior_weight
        if weight is None:
            return model
        lookups = looked_up(self.group, asked, model.pipeline.classes_) if asked and model.ready else {}
        if asked is not None and isinstance(model.keys, CommittedKeys):
            return replace(model, keys=model.keys.answering(lookups))
        held = self.group.keys_held() + self.group.keys_evicted()  # (those out of memory are held too)
        return replace(model, keys=CommittedKeys(model.pipeline.model, weight, held, lookups))
