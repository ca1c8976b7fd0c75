"""`worker merge`: combine snapshots trained on different shards into one model."""

from __future__ import annotations

from pathlib import Path

import nbstream
from nbstream.arrow import CategoricalEncoder

from ..errors import ConfigError
from ..snapshot_meta import MergedFrom, SnapshotMeta, read_snapshot, write_snapshot


def merge_snapshots(paths: list[Path], out: Path) -> nbstream.base.NaiveBayes:
    """Merge into the first snapshot's model; refused when kinds, parameters or features differ."""
    if len(paths) < 2:
        raise ConfigError("merge needs at least two snapshots.")
    model, first = read_snapshot(paths[0])
    features = first.features
    for path in paths[1:]:
        other, meta = read_snapshot(path)
        if other.kind != model.kind:
            raise ConfigError(f"cannot merge {path} ({other.kind}) into {paths[0]} ({model.kind}).")
        if not features.same_layout(meta.features):
            raise ConfigError(f"cannot merge {path}: its features ({meta.features.describe()}) differ from "
                              f"{paths[0]}'s ({features.describe()}).")
        if isinstance(features, CategoricalEncoder):  # codes were given in each shard's order of appearance
            other.recode_categories(features.align(meta.features))
        try:
            model.merge(other)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"cannot merge {path}: {error}") from None
    meta = SnapshotMeta(features=features, label=first.label,
                        source=MergedFrom([str(Path(p).resolve()) for p in paths]))
    write_snapshot(model, out, meta)
    return model
