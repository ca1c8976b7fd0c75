"""What a worker snapshot records besides the model: features, label, source position, run, counters.

Every worker command writes and reads its metadata through ``SnapshotMeta``; the JSON it
produces is the ``meta`` of the snapshot header::

    {"features": {...},                     the feature encoder (spec and what it learned)
     "label": "label",                      the label column (train, merge)
     "source": {"type": "parquet", "files": [...], "position": {"file_index": 0, "row": 0},
                "complete": false}          or {"type": "kafka", "topic": T, "offsets": {"0": 17}}
                                            or {"type": "merge", "snapshots": [...]}
                                            or {"type": "files", "files": [...]} (--engine spark)
     "run": {...},                          train: what a restart must match to continue
     "rows_read": 0, "rows_rejected": 0,    train: counters
     "models": {"model": "mnb", "served": "mnb", "all": {"main": "BernoulliNB()", "mnb": "MultinomialNB()"}}}
                                            serve and export of a group that names its models: the
                                            model this snapshot holds, the one the group serves, and
                                            every model the group learns with its settings
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbstream
from nbstream.arrow import FeatureEncoder, Pipeline, feature_encoder_of, files_source
from nbstream.naive_bayes import NaiveBayes
from nbstream.naive_bayes.keyed import KeyedNB
from nbstream.persistence.snapshot import load_with_header, load_with_keys

from .io.parquet.source import Position


@dataclass(frozen=True)
class ParquetProgress:
    """How far a train run got through its files."""
    files: list[str]
    position: Position
    complete: bool

    def to_json(self) -> dict[str, Any]:
        return {"type": "parquet", "files": self.files, "position": self.position.to_json(),
                "complete": self.complete}

    def describe(self) -> str:
        position = self.position
        state = "complete" if self.complete else f"at file {position.file_index}, row {position.row}"
        return f"{len(self.files)} Parquet file(s), {state}"

    def learned_from(self) -> set[str]:
        """The files whose rows (some or all) the model learned."""
        if self.complete:
            return set(self.files)
        read = self.position.file_index + (1 if self.position.row > 0 else 0)
        return set(self.files[:read])


@dataclass(frozen=True)
class KafkaOffsets:
    """The next offset to process of each partition of a topic."""
    topic: str
    offsets: dict[int, int]

    def to_json(self) -> dict[str, Any]:
        return {"type": "kafka", "topic": self.topic,
                "offsets": {str(partition): offset for partition, offset in sorted(self.offsets.items())}}

    def describe(self) -> str:
        return json.dumps(self.to_json())

    def learned_from(self) -> set[str]:
        """The partitions the model learned records of, as 'topic[partition]'."""
        return {f"{self.topic}[{partition}]" for partition, offset in self.offsets.items() if offset > 0}


@dataclass(frozen=True)
class MergedFrom:
    """The snapshots a merged model was made of."""
    snapshots: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"type": "merge", "snapshots": self.snapshots}

    def describe(self) -> str:
        return json.dumps(self.to_json())


@dataclass(frozen=True)
class FilesRead:
    """The files whose every row a model learned, in no particular order (a Spark fit)."""
    files: list[str]

    def to_json(self) -> dict[str, Any]:
        return files_source(self.files)

    def describe(self) -> str:
        return f"{len(self.files)} file(s), every row"

    def learned_from(self) -> set[str]:
        return set(self.files)


Source = ParquetProgress | KafkaOffsets | MergedFrom | FilesRead


def _source_from_json(data: object) -> Source | None:
    if not isinstance(data, dict):
        return None
    if data.get("type") == "parquet":
        return ParquetProgress(list(data["files"]), Position.from_json(data["position"]), bool(data["complete"]))
    if data.get("type") == "kafka":
        return KafkaOffsets(data["topic"], {int(p): int(o) for p, o in data["offsets"].items()})
    if data.get("type") == "merge":
        return MergedFrom(list(data["snapshots"]))
    if data.get("type") == "files":
        return FilesRead(list(data["files"]))
    return None


_KNOWN_KEYS = ("features", "label", "source", "run", "rows_read", "rows_rejected", "models")


@dataclass(frozen=True)
class ModelsListing:
    """The models of a serving group: the one a snapshot holds (``model``), the one it serves, and
    each one's settings by name."""
    model: str
    served: str
    settings: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "served": self.served, "all": self.settings}

    @classmethod
    def from_json(cls, data: object) -> ModelsListing | None:
        if not (isinstance(data, dict) and isinstance(data.get("all"), dict)):
            return None
        return cls(str(data.get("model")), str(data.get("served")), {str(k): str(v) for k, v in data["all"].items()})

    def describe(self) -> str:
        """'mnb (served), main' with the snapshot's own model first."""
        names = [self.model, *(name for name in self.settings if name != self.model)]
        return ", ".join(f"{name} {self.settings.get(name, '')}".rstrip() + (" (served)" if name == self.served else "")
                         for name in names)


@dataclass
class SnapshotMeta:
    """The worker's metadata of one snapshot; ``extra`` keeps keys it does not know."""
    features: FeatureEncoder
    label: str | None = None
    source: Source | None = None
    run: dict[str, Any] | None = None
    rows_read: int = 0
    rows_rejected: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    models: ModelsListing | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"features": self.features.to_json()}
        if self.label is not None:
            data["label"] = self.label
        if self.source is not None:
            data["source"] = self.source.to_json()
        if self.run is not None:
            data.update(run=self.run, rows_read=self.rows_read, rows_rejected=self.rows_rejected)
        if self.models is not None:
            data["models"] = self.models.to_json()
        return {**self.extra, **data}

    @classmethod
    def from_json(cls, meta: dict[str, Any], path: str | os.PathLike[str]) -> SnapshotMeta:
        """Raise SnapshotError when the snapshot was not written by a worker command."""
        features = feature_encoder_of(meta, path)
        try:
            source = _source_from_json(meta.get("source"))
            return cls(features=features, label=meta.get("label"), source=source,
                       run=meta.get("run"), rows_read=int(meta.get("rows_read", 0)),
                       rows_rejected=int(meta.get("rows_rejected", 0)),
                       extra={key: value for key, value in meta.items()
                              if key not in _KNOWN_KEYS or (key == "source" and source is None)},
                       models=ModelsListing.from_json(meta.get("models")))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise nbstream.SnapshotError(f"{path}: worker metadata is inconsistent ({error!r}).") from None


def read_snapshot(path: str | os.PathLike[str]) -> tuple[NaiveBayes[Any, Any], SnapshotMeta]:
    """A snapshot written by a worker command: the model and its metadata, from one read."""
    model, header = load_with_header(path)
    return model, SnapshotMeta.from_json(header["meta"], path)


def read_snapshot_with_keys(path: str | os.PathLike[str]) -> tuple[NaiveBayes[Any, Any], SnapshotMeta,
                                                                    KeyedNB | None]:
    """``read_snapshot``, and the model per key of a snapshot that holds one (``worker train
    --model-key``; its group model is the model), from one read."""
    model, header, keyed = load_with_keys(path)
    return model, SnapshotMeta.from_json(header["meta"], path), keyed


def write_snapshot(model: NaiveBayes[Any, Any] | KeyedNB, path: str | os.PathLike[str], meta: SnapshotMeta) -> Path:
    """Write the model (a keyed one: its group's, with the keys' counts beside it) and its
    metadata atomically, as ``Pipeline.save`` does."""
    if isinstance(model, KeyedNB):
        return nbstream.save(model, path, meta=meta.to_json(), tables=False)
    return Pipeline(model, meta.features, label=meta.label, meta=meta.to_json()).save(path)
