"""`worker merge`: combine snapshots trained on different shards into one model."""

from __future__ import annotations

from pathlib import Path

import nbstream
from nbstream.features import FeatureSpec
from nbstream.snapshot import load_with_header

from .config import ConfigError


def merge_snapshots(paths: list[Path], out: Path) -> nbstream.base.NaiveBayes:
    """Merge into the first snapshot's model; refused when kinds, parameters or features differ."""
    if len(paths) < 2:
        raise ConfigError("merge needs at least two snapshots.")
    model, first = load_with_header(paths[0])
    if "features" not in first["meta"]:
        raise ConfigError(f"{paths[0]} has no feature spec; it was not written by worker train.")
    spec = FeatureSpec.from_json(first["meta"]["features"])
    for path in paths[1:]:
        other, header = load_with_header(path)
        if header["kind"] != first["kind"]:
            raise ConfigError(f"cannot merge {path} ({header['kind']}) into {paths[0]} ({first['kind']}).")
        other_spec = FeatureSpec.from_json(header["meta"].get("features", {"kind": None, "columns": []}))
        if not spec.same_layout(other_spec):
            raise ConfigError(f"cannot merge {path}: its features ({other_spec.describe()}) differ from "
                              f"{paths[0]}'s ({spec.describe()}).")
        if spec.kind == "categorical":  # codes were given in each shard's order of appearance
            other.recode_categories(spec.align_categories(other_spec))
        try:
            model.merge(other)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"cannot merge {path}: {error}") from None
    meta = {"features": spec.to_json(), "label": first["meta"].get("label"),
            "source": {"type": "merge", "snapshots": [str(Path(p).resolve()) for p in paths]}}
    nbstream.save(model, out, meta=meta)
    return model
