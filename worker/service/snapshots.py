"""Snapshots of the service: the model a group starts from, and local copies of the group's model.

A new group starts from --init-model, else from the newest local copy in --snapshot-dir (an
earlier run's), else from nothing (``starting_point``). The copies are numbered snapshots in one
folder, the last K kept: the newest that reads back intact is used; a corrupt one (a crash
while the disk lied, a truncated copy) is reported and the one before it used.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbstream
from nbstream.arrow import CategoricalEncoder, FeatureEncoder
from nbstream.naive_bayes import NaiveBayes

from ..errors import ConfigError
from ..snapshot_meta import KafkaOffsets, SnapshotMeta, read_snapshot, write_snapshot
from .config import ServeConfig
from .partition.record import PartitionRecord

log = logging.getLogger(__name__)
_NAME = re.compile(r"snapshot-(\d{10})\.nbs$")


class SnapshotStore:
    def __init__(self, directory: Path, keep: int = 3):
        if keep < 1:
            raise ValueError(f"keep must be at least 1; got {keep}.")
        self.directory = Path(directory)
        self.keep = keep
        self.directory.mkdir(parents=True, exist_ok=True)

    def _numbered(self) -> list[tuple[int, Path]]:
        found = [(int(m.group(1)), path) for path in self.directory.iterdir() if (m := _NAME.match(path.name))]
        return sorted(found)

    def latest(self) -> tuple[NaiveBayes[Any, Any], SnapshotMeta, Path] | None:
        """(model, meta, path) of the newest intact snapshot, or None when there is none."""
        for _, path in reversed(self._numbered()):
            try:
                model, meta = read_snapshot(path)
                return model, meta, path
            except (nbstream.SnapshotError, ConfigError) as error:
                log.warning("skipping unreadable snapshot", extra={"path": str(path), "error": str(error)})
        return None

    def save(self, model: NaiveBayes[Any, Any], meta: SnapshotMeta) -> Path:
        numbered = self._numbered()
        number = numbered[-1][0] + 1 if numbered else 1
        path = write_snapshot(model, self.directory / f"snapshot-{number:010d}.nbs", meta)
        for _, old in self._numbered()[:-self.keep]:
            old.unlink(missing_ok=True)
        return path


@dataclass
class StartingPoint:
    """The model and features a group starts from: the configured ones, or those of a snapshot."""
    template: NaiveBayes[Any, Any]  # an unfitted model with the group's parameters
    features: dict[str, Any]  # the group's feature encoder, as JSON
    base: PartitionRecord | None = None  # a model the group starts from

    def fresh(self) -> NaiveBayes[Any, Any]:
        return type(self.template)(**self.template.get_params())


def starting_point(config: ServeConfig, store: SnapshotStore | None) -> StartingPoint:
    """--init-model, else the newest snapshot in --snapshot-dir (a group's earlier state), else nothing."""
    if config.snapshots.init_model is not None:
        model, meta = read_snapshot(config.snapshots.init_model)
        log.info("starting from --init-model", extra={"path": str(config.snapshots.init_model), "model": repr(model),
                                                       "examples": model.n_examples_seen_,
                                                       "features": meta.features.describe()})
        return _from_snapshot(model, meta.features, {}, config.models.name)
    found = store.latest() if store is not None else None
    if found is not None:
        model, meta, path = found
        if not isinstance(meta.source, KafkaOffsets) or meta.source.topic != config.topics.input:
            topic = meta.source.topic if isinstance(meta.source, KafkaOffsets) else None
            raise ConfigError(f"{path} holds the state of topic {topic!r}, not {config.topics.input!r}.")
        return _from_snapshot(model, meta.features, dict(meta.source.offsets), config.models.name)
    return StartingPoint(config.model.options().build(), config.feature_spec().encoder().to_json())


def _from_snapshot(model: NaiveBayes[Any, Any], features: FeatureEncoder, starts: dict[int, int],
                   name: str) -> StartingPoint:
    """name : the model's in the group (the one the serve options describe)."""
    group_features = features.spec.encoder().to_json() if isinstance(features, CategoricalEncoder) \
        else features.to_json()
    base = PartitionRecord(model, encoder=features if isinstance(features, CategoricalEncoder) else None,
                           starts=starts, name=name)
    return StartingPoint(type(model)(**model.get_params()), group_features, base)
