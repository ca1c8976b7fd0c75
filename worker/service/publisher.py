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

from nbstream.arrow import Pipeline

from ..inference.answering import AnsweringModel
from ..inference.sources import PublishedModels
from .group_state import GroupState


class ModelPublisher:
    """Publishes ``group``'s models to ``board`` (topic: the input topic that names positions)."""

    def __init__(self, board: PublishedModels, group: GroupState, topic: str, label: str | None):
        self.board, self.group, self.topic, self.label = board, group, topic, label
        self._published: Hashable = None  # what the last published set was made of

    def position(self) -> dict[str, int]:
        """"TOPIC:PARTITION" -> the next offset the group's committed states include."""
        offsets = {p: s.next_offset for p, s in self.group.latest.items() if s.next_offset is not None}
        offsets.update(self.group.offsets())
        return {f"{self.topic}:{partition}": offset for partition, offset in sorted(offsets.items())}

    def publish(self) -> None:
        """Copy the models, now that nothing learned is uncommitted (a set the same as the last
        one published is not copied again)."""
        models = self.group.models
        position = self.position()
        made_of = (tuple(position.items()), self.group.version(),
                   tuple(models[name].version for name in models), models.served)
        if made_of == self._published:
            return
        published = {}
        for name in models:
            model = models[name]
            # (the copy's tables are computed by its first request, in the API's thread: the only
            # thread that ever uses it)
            pipeline = Pipeline(copy.deepcopy(model.model), copy.deepcopy(model.encoder), label=self.label)
            published[name] = AnsweringModel(name, pipeline, str(model.version), position)
        self.board.publish(published)
        self._published = made_of

