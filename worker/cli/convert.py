"""`worker convert`: a snapshot as a model for another runtime."""

from __future__ import annotations

from pathlib import Path

import typer

from ..batch.convert import Conversion
from ..config import TrainConfig
from .app import app, reported_errors
from .options import SNAPSHOT, Given, setting_option, settings_part


@app.command()
@settings_part("conversion", Conversion)
def convert(
    snapshot: Path = SNAPSHOT,
    out: Path = setting_option(TrainConfig, "out", help="File to write (an .onnx model)."),
    *,
    conversion: Given,
) -> None:
    """Write the snapshot's model for another runtime: input X (rows x features), outputs label and probabilities."""
    from ..batch.convert import convert as run_convert

    with reported_errors():
        how: Conversion = conversion.build()
        converted = run_convert(snapshot, out, how)
    typer.echo(f"{converted.kind} model of {converted.n_classes} classes and {converted.n_features:,} features "
               f"-> {converted.out} ({how.fmt}, {converted.dtype})")
