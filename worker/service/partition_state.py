"""One input partition's state: what it taught the model, where it stopped, how well it was predicted.

Statistics are additive, so the model every replica predicts with is the merge of the
partition states (see ``global_model.py``), and a partition's state moves between replicas
as one unit: the payload below, written to the state topic at every commit.

Payload: b"NBPS", a uint32 header length, the JSON header, then (once the partition has
learned something) the model as an nbstream snapshot without its smoothed tables.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

import nbstream
from nbstream.arrow import FeatureEncoder
from nbstream.base import NaiveBayes
from nbstream.snapshot import dumps, loads

_MAGIC = b"NBPS"
RECENT_HALF_LIFE = 1_000  # judged examples: the recent accuracy forgets at this pace


@dataclass
class PartitionState:
    """model : learned from this partition only (unfitted until its first labeled message)
    encoder : this partition's own feature encoder where codes are learned per partition
        (categorical), else None (the group's encoder is used)
    next_offset : the next input offset to process (None: nothing processed yet)
    judged, correct : prequential counts; recent_* : the same, decayed (half-life RECENT_HALF_LIFE)
    starts : the base state only: where partitions without a state of their own start
    label_field : the message field its labels were read from, as stored (None: not recorded)
    """
    model: NaiveBayes
    encoder: FeatureEncoder | None = None
    next_offset: int | None = None
    judged: int = 0
    correct: int = 0
    recent_judged: float = 0.0
    recent_correct: float = 0.0
    starts: dict[int, int] = field(default_factory=dict)
    label_field: str | None = None
    changed: bool = False  # since it was last written

    def judge(self, correct: int, total: int) -> None:
        keep = 0.5 ** (total / RECENT_HALF_LIFE)
        self.recent_judged = self.recent_judged * keep + total
        self.recent_correct = self.recent_correct * keep + correct
        self.judged += total
        self.correct += correct

    def to_payload(self, features: FeatureEncoder, label_field: str | None = None) -> bytes:
        """features : the encoder whose JSON to store (this partition's own, or the group's);
        label_field : the message field labels come from (export writes it into its snapshot)."""
        header = {"next_offset": self.next_offset, "judged": self.judged, "correct": self.correct,
                  "recent_judged": self.recent_judged, "recent_correct": self.recent_correct,
                  "starts": {str(p): o for p, o in self.starts.items()}, "features": features.to_json(),
                  "fitted": self.model.is_fitted, "label_field": label_field or self.label_field}
        header_bytes = json.dumps(header).encode()
        model = dumps(self.model, tables=False) if self.model.is_fitted else b""
        return _MAGIC + struct.pack("<I", len(header_bytes)) + header_bytes + model

    @classmethod
    def from_payload(cls, payload: bytes, fresh_model: NaiveBayes, source: str) -> tuple["PartitionState", dict]:
        """The state and its stored feature JSON. Raises nbstream.SnapshotError when unreadable."""
        try:
            if not payload.startswith(_MAGIC):
                raise ValueError("not a partition state")
            (length,) = struct.unpack_from("<I", payload, len(_MAGIC))
            start = len(_MAGIC) + 4
            header = json.loads(payload[start:start + length])
            model = loads(payload[start + length:], source)[0] if header["fitted"] else fresh_model
            state = cls(model=model, next_offset=header["next_offset"], judged=int(header["judged"]),
                        correct=int(header["correct"]), recent_judged=float(header["recent_judged"]),
                        recent_correct=float(header["recent_correct"]),
                        starts={int(p): int(o) for p, o in header["starts"].items()},
                        label_field=_optional_text(header.get("label_field")))
            return state, header["features"]
        except nbstream.SnapshotError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError, struct.error) as error:
            raise nbstream.SnapshotError(f"{source}: unreadable partition state ({type(error).__name__}: "
                                         f"{str(error)[:200]}).") from None


def _optional_text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"expected a string or null, got {type(value).__name__}")
