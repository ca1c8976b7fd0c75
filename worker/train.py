"""`worker train`: learn from Parquet files in bounded memory, checkpointing the position.

A checkpointed snapshot at --out records the files, the position reached and a signature
of the run's settings. The same command run again continues from that position (no row is
counted twice); a different command refuses to overwrite it unless --fresh.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import nbstream
from nbstream.features import FeatureSpec, extract_labels
from nbstream.snapshot import load_with_header, read_header

from .checkpoint import CheckpointPolicy
from .config import ConfigError, TrainConfig
from .progress import RowProgress
from .rejects import Rejects
from .sources.parquet import Position, count_rows, expand_paths, open_file, read_batches


class InvalidRowError(ValueError):
    """A row that cannot be used, named by file, row and column."""

    @classmethod
    def first_in(cls, batch, problems, advice: str) -> "InvalidRowError":
        row, column, message = problems.first()
        return cls(f"{batch.path}: row {batch.first_row + row}, column {column!r}: {message}. {advice}")


@dataclass
class TrainSummary:
    rows_read: int
    rows_learned: int
    rows_rejected: int
    seconds: float
    resumed_from: Position | None
    snapshot: Path
    model: nbstream.base.NaiveBayes
    spec: FeatureSpec


def run_signature(config: TrainConfig, files: list[str]) -> dict:
    """What must match for a restart to continue a checkpointed run."""
    base = None
    if config.resume:
        header = read_header(config.resume)
        base = {"path": str(Path(config.resume).resolve()), "created_at": header["created_at"]}
    return {"files": [str(Path(f).resolve()) for f in files], "label": config.label,
            "model": asdict(config.model), "features": asdict(config.features), "resume": base}


def _initial_state(config: TrainConfig, files: list[str], signature: dict):
    """(model, spec, start position, rows read, rows rejected) for this run."""
    if config.out.exists() and not config.fresh:
        model, header = load_with_header(config.out)
        if header["meta"].get("run") != signature:
            raise ConfigError(f"{config.out} holds a snapshot of a different run; pass --fresh to overwrite "
                              f"it, or --resume {config.out} with another --out to keep training it.")
        meta = header["meta"]
        return (model, FeatureSpec.from_json(meta["features"]),
                Position.from_json(meta["source"]["position"]), meta["rows_read"], meta["rows_rejected"])
    if config.resume:
        if Path(config.resume).resolve() == Path(config.out).resolve():
            raise ConfigError("--out must differ from --resume: the base snapshot identifies the run.")
        if config.features.columns or config.features.text:
            raise ConfigError("--resume takes the features from the snapshot; drop --features/--text.")
        if any(value is not None for name, value in asdict(config.model).items() if name != "kind"):
            raise ConfigError("--resume keeps the snapshot's model parameters; drop the parameter options.")
        model, header = load_with_header(config.resume)
        if config.model.kind and config.model.kind != header["kind"]:
            raise ConfigError(f"--model {config.model.kind} contradicts the {header['kind']} model in {config.resume}.")
        meta = header["meta"]
        if "features" not in meta:
            raise ConfigError(f"{config.resume} has no feature spec; it was not written by worker train.")
        return model, FeatureSpec.from_json(meta["features"]), Position(), 0, 0
    schema = open_file(files[0]).physical_schema
    spec = config.features.spec_for(schema, config.model.kind, files[0])
    if config.label not in schema.names:
        raise ConfigError(f"{files[0]}: label column {config.label!r} not found; columns are {schema.names}.")
    return config.model.build(), spec, Position(), 0, 0


def train(config: TrainConfig, progress: bool | None = None) -> TrainSummary:
    files = expand_paths(config.paths)
    signature = run_signature(config, files)
    model, spec, start, rows_read, rows_rejected = _initial_state(config, files, signature)
    policy = CheckpointPolicy(every_rows=config.checkpoint_every)
    rejects = Rejects(config.rejects_dir)
    rejects.count = rows_rejected
    interval_start = position = start
    counts_only = getattr(model, "_counts_only", False)

    def checkpoint(complete: bool) -> None:
        nonlocal interval_start
        rejects.flush(interval_start)
        meta = {"features": spec.to_json(), "label": config.label, "run": signature,
                "rows_read": rows_read, "rows_rejected": rejects.count,
                "source": {"type": "parquet", "files": signature["files"], "position": position.to_json(),
                           "complete": complete}}
        nbstream.save(model, config.out, meta=meta)
        interval_start = position
        policy.reset()

    started = time.monotonic()
    learned_before = getattr(model, "n_examples_seen_", 0)
    columns = list(dict.fromkeys(spec.columns + [config.label]))
    with RowProgress("training", count_rows(files), done=rows_read, enabled=progress) as bar:
        for batch in read_batches(files, columns, config.batch_size, start, check_schema=spec.check_schema):
            X, problems = spec.extract(batch.data, learn=True, counts_only=counts_only)
            y = extract_labels(batch.data, config.label, problems)
            if problems.any():
                if not config.skip_invalid:
                    raise InvalidRowError.first_in(batch, problems, "Use --skip-invalid to set such rows aside.")
                rejects.add(batch.data, batch.path, batch.first_row, problems)
                keep = ~problems.bad
                X, y = X[keep], y[keep]
            if len(y):
                model.partial_fit(X, y)
            rows_read += batch.data.num_rows
            position = batch.end
            bar.advance(batch.data.num_rows)
            if policy.record(batch.data.num_rows):
                checkpoint(complete=False)
    if getattr(model, "_classes", None) is None:
        raise ConfigError("no valid labeled rows to learn from.")
    position = Position(len(files), 0)
    checkpoint(complete=True)
    return TrainSummary(rows_read=rows_read, rows_learned=model.n_examples_seen_ - learned_before,
                        rows_rejected=rejects.count, seconds=time.monotonic() - started,
                        resumed_from=start if start != Position() else None, snapshot=config.out,
                        model=model, spec=spec)
