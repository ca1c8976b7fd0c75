"""`worker merge`: combine snapshots trained on different shards into one model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbstream
from nbstream.arrow import Pipeline
from nbstream.naive_bayes import NaiveBayes
from nbstream.persistence.snapshot import read_header

from ..errors import ConfigError
from ..io.files import refuse_replacing_an_input
from ..snapshot_meta import MergedFrom, SnapshotMeta, read_snapshot, write_snapshot

_MAX_DEPTH = 8  # merges of merges followed this deep when looking for shared sources


def merge_snapshots(paths: list[Path], out: Path) -> tuple[NaiveBayes[Any, Any], list[str]]:
    """Merge into the first snapshot's pipeline (``Pipeline.merge``: categories aligned); refused
    when kinds, parameters or features differ.

    Returns the model and one warning per pair of snapshots that learned from the same data
    (the same Parquet file, Kafka partition or snapshot): their merge counts it twice."""
    if len(paths) < 2:
        raise ConfigError("merge needs at least two snapshots.")
    refuse_replacing_an_input(Path(out), paths, "the merged model")
    model, first = read_snapshot(paths[0])
    merged = Pipeline(model, first.features, label=first.label)
    learned_by = {source: paths[0] for source in _learned_from(first)}
    overlaps: list[str] = []
    for path in paths[1:]:
        other, meta = read_snapshot(path)
        sources = _learned_from(meta)
        shared = sorted(source for source in sources if source in learned_by)
        if shared:
            overlaps.append(f"{learned_by[shared[0]]} and {path} both learned from {shared[0]}"
                            f"{f' (and {len(shared) - 1} more)' if len(shared) > 1 else ''}: "
                            "the merged model counts those examples twice.")
        learned_by.update({source: path for source in sources})
        try:
            merged.merge(Pipeline(other, meta.features, label=meta.label))
        except (TypeError, ValueError) as error:
            raise ConfigError(f"cannot merge {path} ({other.kind}) into {paths[0]} ({model.kind}): {error}") from None
    meta = SnapshotMeta(features=merged.features, label=first.label,
                        source=MergedFrom([str(Path(p).resolve()) for p in paths]))
    write_snapshot(model, out, meta)
    return model, overlaps


def _learned_from(meta: SnapshotMeta, depth: int = 0) -> set[str]:
    """What a snapshot's model learned from: files, partitions, and what the snapshots it
    continued (--resume) or merged learned from, as far as they can still be read."""
    sources: set[str] = set()
    earlier = [meta.run["resume"]["path"]] if isinstance(meta.run, dict) and isinstance(meta.run.get("resume"), dict) \
        else []
    if isinstance(meta.source, MergedFrom):
        earlier += meta.source.snapshots
    elif meta.source is not None:
        sources |= meta.source.learned_from()
    for path in earlier:
        earlier_meta = _meta_of(path) if depth < _MAX_DEPTH else None
        if earlier_meta is None:
            sources.add(str(path))  # too deep, gone or unreadable: the snapshot itself stands for its data
        else:
            sources |= _learned_from(earlier_meta, depth + 1)
    return sources


def _meta_of(path: str) -> SnapshotMeta | None:
    """The worker metadata of a snapshot, from its header alone; None if it cannot be read."""
    try:
        return SnapshotMeta.from_json(read_header(path)["meta"], path)
    except (OSError, nbstream.SnapshotError):
        return None
