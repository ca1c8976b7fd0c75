"""The group's choice of the model it serves, as a record of the state topic.

A promotion (``promotion.py``) is written as a state named ``served-model`` in the commit that
follows it, in the same transaction as the predictions the promoted model served and the
offsets: it is in the group's state exactly when they are. Every replica follows the state topic
and serves the model its newest choice names; a replica starting reads it before serving. The
payload is a JSON object::

    {"served": "cnb", "writer": "9f2c...", "promotion": {"from_model": "main", "to_model": "cnb",
     "served_log_loss": ..., "challenger_log_loss": ..., "lower_by": ..., "window": 10000,
     "margin": 0.05, "offsets": {"0": 1234}}}

``writer`` tells a replica its own choice read back (already applied) from another's. The
previous version of the service does not know the name: it passes the record over with a warning.

``GroupChoice`` is a replica's side of it: the promotions it makes, until the commit that writes
them, and the choices of the others it reads (the newest in the topic wins).
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from nbstream.utils.checked import shown

from ...model_names import NAME_RULE, is_model_name
from .global_models import GlobalModels
from .promotion import Promotion, PromotionWatch

log = logging.getLogger(__name__)

SERVED_MODEL = "served-model"  # the state-topic name of the group's choice


@dataclass(frozen=True)
class ServedChoice:
    """served : the name of the model the group serves; writer : the replica that chose it (a
    token of its own); promotion : the figures of the promotion that made it (JSON values)."""
    served: str
    writer: str
    promotion: dict[str, Any]

    def to_payload(self) -> bytes:
        return json.dumps({"served": self.served, "writer": self.writer, "promotion": self.promotion}).encode()

    @classmethod
    def from_payload(cls, payload: bytes) -> ServedChoice:
        """The choice ``to_payload`` wrote; ValueError, one line, for anything else."""
        try:
            data = json.loads(payload)
        except (ValueError, RecursionError) as error:
            raise ValueError(f"not JSON ({str(error)[:100]})") from None
        if not (isinstance(data, dict) and set(data) == {"served", "writer", "promotion"}):
            raise ValueError(f"a choice is an object of served, writer and promotion; got {shown(data)}")
        if not is_model_name(data["served"]):
            raise ValueError(f"served must be a model's name, {NAME_RULE}; got {shown(data['served'])}")
        if not (isinstance(data["writer"], str) and isinstance(data["promotion"], dict)):
            raise ValueError(f"writer must be text and promotion an object; got {shown(data)}")
        return cls(data["served"], data["writer"], data["promotion"])


class GroupChoice:
    """Which of ``models`` serves, as this replica and the group choose it; watch : what promotes
    challengers here (its examples start anew when another model serves; None: none)."""

    def __init__(self, models: GlobalModels, watch: PromotionWatch | None = None):
        self._models, self._watch = models, watch
        self._writer = uuid.uuid4().hex  # names this replica's choices
        self._unwritten: ServedChoice | None = None  # its last promotion, until a commit writes it

    def promote(self, promotion: Promotion, offsets: dict[int, int]) -> None:
        """Serve ``promotion.to_model`` from now on; the next commit writes the choice (offsets :
        where each owned partition's next message is, with the figures)."""
        self._models.serve(promotion.to_model)
        figures = promotion.figures() | {"offsets": {str(p): offset for p, offset in sorted(offsets.items())}}
        self._unwritten = ServedChoice(promotion.to_model, self._writer, figures)

    def adopt(self, choice: ServedChoice | None) -> None:
        """Serve the model the group's newest choice names, read from the topic (none: nothing
        new), unless this replica made it (it serves it already) or it is not one of this run's."""
        if choice is None or choice.writer == self._writer:
            return
        self._unwritten = None  # the group chose after this replica: its own choice is not to be written
        served = self._models.served
        if choice.served not in self._models:
            log.warning("the group serves a model that is not given: serving another", extra={
                "group_serves": choice.served, "serving": served})
        elif choice.served != served:
            self._models.serve(choice.served)
            if self._watch is not None:
                self._watch.reset()
            log.info("serving the model the group chose", extra={"model": choice.served, "previous": served,
                                                                  "promotion": choice.promotion})

    def to_write(self) -> ServedChoice | None:
        """The choice the next commit writes (None: nothing changed)."""
        return self._unwritten

    def written(self, choice: ServedChoice) -> None:
        """``choice`` is in the state topic (in the commit's transaction)."""
        if self._unwritten is choice:
            self._unwritten = None
