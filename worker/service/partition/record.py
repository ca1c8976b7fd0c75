"""One input partition's state: what it taught the model, where it stopped, how well it was predicted.

Statistics are additive, so the model every replica predicts with is the merge of the
partition states (see ``global_model.py``), and a partition's state moves between replicas
as one unit: the payload below, written to the state topic at every commit.

Payload (a frame of ``nbstream.persistence.framing``): b"NBPS", a uint32 header length, the JSON header,
then (once the partition has learned something) the model as an nbstream snapshot without its
smoothed tables. The header
keeps the prequential quality under "quality" (``quality.py``), and its accuracy alone under
"judged", "correct", "recent_judged" and "recent_correct" too: the previous version wrote and
reads those (so its replicas still read these states during a rolling upgrade), and a state it
wrote, without "quality", is read with its accuracy carried over.

When the service keeps pending examples (delayed labels), the header's "pending" field lists
them: their directory and the digest of each of their chunks' records, which are records of
the state topic of their own (``pending/records.py``), and "labels_next_offset" where the
partition stopped on the labels topic. Without pending examples the fields are
left out: the payload is byte for byte what it was before the field existed. The previous
version ignores header fields it does not know, so it reads these states' statistics as they are.

With a model per key (--model-key), the header's "keys" field lists the labels of the keys'
class rows and how many keys and examples they hold; each key's counts are a record of its own
(``keys/records.py``). Without it the field is left out.

A partition holds one model per name when the group learns challengers beside its served model
(``worker/service/models``). The model after the header, and the header's quality, are those of
the model the serve options describe, whose name is in "model_name" unless it is "main"; the
header's "models" field holds the others by name: each one's "quality", whether it is "fitted",
and its statistics as an nbstream snapshot without tables, in base64 (null while it learned
nothing). Without challengers both fields are left out, so the payload is what it was; the
previous version reads the first model and its quality and ignores the others.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

import nbstream
from nbstream.arrow import LONGEST_NGRAMS, FeatureEncoder
from nbstream.metrics.quality import EXACT_COUNT, PredictionQuality
from nbstream.naive_bayes import NaiveBayes
from nbstream.persistence.framing import Framing
from nbstream.persistence.snapshot import NewerFormatError, dumps, loads
from nbstream.utils.checked import INT32_MAX, INT64_MAX, integer, number, optional_text, required, shown

from ...errors import ConfigError
from ...model_names import DEFAULT_NAME, NAME_RULE, is_model_name
from ..keys.records import PartitionKeys
from ..pending.records import PendingRecords
from ..pending.store import PendingExamples

PARTITION_STATE = Framing(b"NBPS", "not a partition state", "partition state")  # no version: the header says
MOST_FEATURES = 1 << 31  # text hashed into 2**31 columns, the most --hash-bits allows
_ONE_COLUMN_KINDS = ("vector", "text")
_PARTITION = re.compile(r"0|[1-9][0-9]{0,9}")


@dataclass(frozen=True)
class ModelStatistics:
    """One named model of a partition as the merge reads it: its statistics, and the partition's
    own encoder where codes are learned per partition (None: the group's)."""
    model: NaiveBayes[Any, Any]
    encoder: FeatureEncoder | None = None


@dataclass(frozen=True)
class ModelState:
    """A partition's model other than its first: its statistics and how its predictions fared."""
    model: NaiveBayes[Any, Any]
    quality: PredictionQuality = field(default_factory=PredictionQuality)


@dataclass(frozen=True)
class PartitionRecord:
    """What a partition's state record holds (the payload below): a Partition's ``snapshot()``,
    another replica's committed state as read, or the group's base state.

    model : learned from this partition only (unfitted until its first labeled message)
    encoder : this partition's own feature encoder where codes are learned per partition
        (categorical), else None (the group's encoder is used)
    next_offset : the next input offset to process (None: nothing processed yet)
    quality : how its served predictions fared (prequential), cumulative and recent
    starts : the base state only: where partitions without a state of their own start
    label_field : the message field its labels were read from, as stored (None: not recorded)
    drift : the state of its drift watch, when the service watches for drift
    pending : its pending examples, when the service keeps them (delayed labels), else None; a
        record just read has none until its partition is taken over (``group_state``)
    pending_records : where its pending examples are in the state topic, as last read or written
    labels_next_offset : the next offset of the partition of the same number on the labels topic
        (delayed labels), None when the service reads no labels topic or read nothing there yet
    name : the name of ``model`` (the model the serve options describe)
    others : the partition's other models by name (challengers, and a served model promoted from them)
    keys : its keys' own counts, when the group keeps a model per key (--model-key), else None; a
        record just read has none until its partition is taken over (``group_state``)
    keys_header : what its state says of its keys (``PartitionKeys.header``), as read; None: it keeps none
    """
    model: NaiveBayes[Any, Any]
    encoder: FeatureEncoder | None = None
    next_offset: int | None = None
    quality: PredictionQuality = field(default_factory=PredictionQuality)
    starts: dict[int, int] = field(default_factory=dict)
    label_field: str | None = None
    drift: dict[str, Any] | None = None  # its drift watch as JSON (drift_watch.py), checked when restored
    pending: PendingExamples | None = None
    pending_records: PendingRecords | None = None
    labels_next_offset: int | None = None
    name: str = DEFAULT_NAME
    others: dict[str, ModelState] = field(default_factory=dict)
    keys: PartitionKeys | None = None
    keys_header: dict[str, Any] | None = None

    def statistics(self, name: str) -> ModelStatistics | None:
        """The statistics of its model ``name`` (None: it holds no model of that name)."""
        if name == self.name:
            return ModelStatistics(self.model, self.encoder)
        other = self.others.get(name)
        return None if other is None else ModelStatistics(other.model, self.encoder)

    def quality_of(self, name: str) -> PredictionQuality | None:
        """How the predictions of its model ``name`` fared (None: it holds none of that name)."""
        if name == self.name:
            return self.quality
        other = self.others.get(name)
        return None if other is None else other.quality

    @property
    def names(self) -> list[str]:
        """The names of its models, its first model's first."""
        return [self.name, *self.others]

    def to_payload(self, features: FeatureEncoder, label_field: str | None = None) -> bytes:
        """features : the encoder whose JSON to store (this partition's own, or the group's);
        label_field : the message field labels come from (export writes it into its snapshot).
        Pending examples are listed as ``pending_records`` last wrote (or read) them: their chunks'
        records are written first (``commit.StateWriter``)."""
        header = {"next_offset": self.next_offset, "quality": self.quality.to_json(), **self.quality.accuracy_sums(),
                  "starts": {str(p): o for p, o in self.starts.items()}, "features": features.to_json(),
                  "fitted": self.model.is_fitted, "label_field": label_field or self.label_field,
                  "drift": self.drift}
        listing = None if self.pending_records is None else self.pending_records.listing()
        if listing is not None:
            header["pending"] = listing
        if self.labels_next_offset is not None:
            header["labels_next_offset"] = self.labels_next_offset
        if self.name != DEFAULT_NAME:
            header["model_name"] = self.name
        if self.others:
            header["models"] = {name: _other_json(state) for name, state in self.others.items()}
        if self.keys is not None:
            header["keys"] = self.keys.header()
        model = dumps(self.model, tables=False) if self.model.is_fitted else b""
        return PARTITION_STATE.seal(json.dumps(header).encode(), [model])

    @classmethod
    def from_payload(cls, payload: bytes, fresh_model: NaiveBayes[Any, Any],
                     source: str) -> tuple[PartitionRecord, FeatureEncoder]:
        """The state and the feature encoder it was learned with (``fresh_model`` is its model when it
        learned nothing; the others that learned nothing are read with a fresh model like it, which
        the group replaces by their own). Raises UnreadableState (a nbstream.SnapshotError) unless
        every header field has the type and range ``to_payload`` writes."""
        try:
            header, model_bytes = _header_and_model(payload)
            encoder = _encoder(required(header, "features"))
            model = _model(model_bytes, required(header, "fitted"), fresh_model, encoder)
            stored_offset = required(header, "next_offset")
            next_offset = None if stored_offset is None else integer(stored_offset, "next_offset", 0, INT64_MAX)
            labels_offset = header.get("labels_next_offset")
            labels_next_offset = None if labels_offset is None else \
                integer(labels_offset, "labels_next_offset", 0, INT64_MAX)
            state = cls(model=model, next_offset=next_offset, quality=_quality(header),
                        starts=_starts(required(header, "starts")),
                        label_field=optional_text(header.get("label_field"), "label_field"),
                        drift=_drift(header.get("drift")), pending_records=_pending(header.get("pending")),
                        labels_next_offset=labels_next_offset, name=_name(header.get("model_name", DEFAULT_NAME)),
                        others=_others(header.get("models", {}), fresh_model, encoder),
                        keys_header=_keys_header(header.get("keys")))
            return state, encoder
        except NewerFormatError as error:  # the service's own state, of a newer version: not to be passed over
            raise ConfigError(f"{error} A newer nbstream wrote this group's states: serve it with that version, "
                              "or use a new --group.") from None
        except (ValueError, RecursionError) as error:  # FrameError, SnapshotError and FeatureError are ValueErrors
            raise UnreadableState(source, str(error)[:300]) from None


def _keys_header(value: object) -> dict[str, Any] | None:
    """The header's "keys" (checked in full when the keys are restored, ``keys/records.py``)."""
    if value is None or isinstance(value, dict):
        return value
    raise ValueError(f"keys must be an object; got {shown(value)}")


class UnreadableState(nbstream.SnapshotError):
    """A payload that is not a partition state this version writes; ``reason`` says what is wrong."""

    def __init__(self, source: str, reason: str):
        super().__init__(f"{source}: unreadable partition state ({reason}).")
        self.reason = reason


def partition_number(text: str) -> int | None:
    """The partition a decimal string names (plain ASCII digits, no sign or leading zero, at most
    Kafka's largest partition), else None: ``str.isdigit`` would take "²" and 5,000 digits."""
    if not _PARTITION.fullmatch(text):
        return None
    number = int(text)
    return number if number <= INT32_MAX else None


def _header_and_model(payload: bytes) -> tuple[dict[str, Any], bytes]:
    opened = PARTITION_STATE.open(payload)
    return opened.header, bytes(opened.body)


def _model(model_bytes: bytes, fitted: object, fresh_model: NaiveBayes[Any, Any],
           encoder: FeatureEncoder) -> NaiveBayes[Any, Any]:
    """The state's own model (a snapshot), or ``fresh_model`` when it learned nothing."""
    if type(fitted) is not bool:
        raise ValueError(f"fitted must be true or false; got {shown(fitted)}")
    if not fitted:
        if model_bytes:
            raise ValueError(f"{len(model_bytes):,} bytes after the header of a state that learned nothing")
        return fresh_model
    model = loads(model_bytes, "its model")[0]
    if encoder.n_features is not None and model.n_features_in_ != encoder.n_features:
        raise ValueError(f"its model has {model.n_features_in_:,} features; its features "
                         f"{encoder.n_features:,}")
    return model


def _other_json(state: ModelState) -> dict[str, Any]:
    fitted = state.model.is_fitted
    snapshot = base64.b64encode(dumps(state.model, tables=False)).decode() if fitted else None
    return {"fitted": fitted, "quality": state.quality.to_json(), "snapshot": snapshot}


def _name(value: object) -> str:
    if not is_model_name(value):
        raise ValueError(f"a model's name is {NAME_RULE}; got {shown(value)}")
    return value  # type: ignore[return-value]


def _others(value: object, fresh_model: NaiveBayes[Any, Any], encoder: FeatureEncoder) -> dict[str, ModelState]:
    """The header's other models: each one's statistics (a fresh model like ``fresh_model`` while
    it learned nothing) and quality."""
    if not isinstance(value, dict):
        raise ValueError(f"models must be a JSON object; got {shown(value)}")
    others = {}
    for name, entry in value.items():
        if not (is_model_name(name) and isinstance(entry, dict) and set(entry) == {"fitted", "quality", "snapshot"}):
            raise ValueError(f"models[{_name(name)}] must be an object of fitted, quality and snapshot; got "
                             f"{shown(entry)}")
        snapshot = entry["snapshot"]
        if entry["fitted"] is True and not isinstance(snapshot, str):
            raise ValueError(f"models[{name}].snapshot must be base64 text for a fitted model; got {shown(snapshot)}")
        try:
            model_bytes = b"" if snapshot is None else base64.b64decode(snapshot, validate=True)
        except (TypeError, binascii.Error):
            raise ValueError(f"models[{name}].snapshot must be base64; got {shown(snapshot)}") from None
        model = _model(model_bytes, entry["fitted"], type(fresh_model)(**fresh_model.get_params()), encoder)
        others[name] = ModelState(model, PredictionQuality.from_json(entry["quality"]))
    return others


def _quality(header: dict[str, Any]) -> PredictionQuality:
    """The header's quality; of a header the previous version wrote, its accuracy alone."""
    if "quality" in header:
        return PredictionQuality.from_json(header["quality"])
    judged = integer(required(header, "judged"), "judged", 0, EXACT_COUNT)
    return PredictionQuality.carried_over(judged, integer(required(header, "correct"), "correct", 0, judged),
                                          number(required(header, "recent_judged"), "recent_judged"),
                                          number(required(header, "recent_correct"), "recent_correct"))


def _drift(value: object) -> dict[str, Any] | None:
    """A drift watch's JSON, whose fields the watch checks when it is restored from it."""
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"drift must be a JSON object or null; got {shown(value)}")
    return value


def _pending(value: object) -> PendingRecords | None:
    return None if value is None else PendingRecords.from_listing(value)


def _starts(value: object) -> dict[int, int]:
    if not isinstance(value, dict):
        raise ValueError(f"starts must be a JSON object; got {shown(value)}")
    starts = {}
    for key, offset in value.items():
        partition = partition_number(key)
        if partition is None:
            raise ValueError(f"starts names partition {shown(key)}; partitions are 0 to {INT32_MAX:,}")
        starts[partition] = integer(offset, f"starts[{key}]", 0, INT64_MAX)
    return starts


def _encoder(data: object) -> FeatureEncoder:
    """The feature encoder a header describes: each field is checked before nbstream reads it,
    and the encoder must describe itself back the same way (its width, categories, hashing)."""
    if not isinstance(data, dict):
        raise ValueError(f"features must be a JSON object; got {shown(data)}")
    kind, columns = data.get("kind"), data.get("columns")
    if not isinstance(kind, str) or kind not in FeatureEncoder.kinds:
        raise ValueError(f"features.kind must be one of {sorted(FeatureEncoder.kinds)}; got {shown(kind)}")
    if not (isinstance(columns, list) and columns and all(isinstance(column, str) for column in columns)):
        raise ValueError(f"features.columns must be a non-empty list of strings; got {shown(columns)}")
    if kind in _ONE_COLUMN_KINDS and len(columns) != 1:
        raise ValueError(f"{kind} features read one column; got {len(columns):,}")
    if "hash_bits" in data and type(data["hash_bits"]) is not int:  # FeatureSpec bounds it once it is one
        raise ValueError(f"features.hash_bits must be an integer; got {shown(data['hash_bits'])}")
    if "ngram_max" in data:
        integer(data["ngram_max"], "features.ngram_max", 1, LONGEST_NGRAMS)
    if data.get("n_features") is not None:
        integer(data["n_features"], "features.n_features", 1, MOST_FEATURES)
    if kind == "categorical":
        _check_categories(data.get("categories"), len(columns))
    encoder = FeatureEncoder.from_json(data)
    for key, value in encoder.to_json().items():
        if data.get(key) != value:
            raise ValueError(f"features.{key} is {shown(data.get(key))} where the other fields make it {shown(value)}")
    return encoder


def _check_categories(categories: object, columns: int) -> None:
    if not (isinstance(categories, list) and len(categories) == columns
            and all(isinstance(values, list) and all(isinstance(value, str) for value in values)
                    for values in categories)):
        raise ValueError(f"features.categories must be {columns} lists of strings; got {shown(categories)}")
