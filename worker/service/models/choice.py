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
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from nbstream.checked import shown

from .names import NAME_RULE, is_model_name

SERVED_MODEL = "served-model"  # the state-topic name of the group's choice


@dataclass(frozen=True)
class ServedChoice:
    """served : the name of the model the group serves; writer : the replica that chose it (a
    token of its own); promotion : the figures of the promotion that made it (JSON values)."""
    served: str
    writer: str
    promotion: dict

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
