"""`worker convert`: a snapshot as a model for another runtime."""

from __future__ import annotations

from pathlib import Path

import typer

from .app import app, reported_errors
from .options import SNAPSHOT, env


@app.command()
def convert(
    snapshot: Path = SNAPSHOT,
    out: Path = typer.Option(..., "--out", envvar=env("OUT"), help="File to write (an .onnx model)."),
    fmt: str = typer.Option("onnx", "--format", envvar=env("CONVERT_FORMAT"),
                            help="onnx: an ONNX graph of standard operators, for ONNX Runtime and the others "
                                 "(pip install 'nbstream\\[onnx]')."),
    dtype: str = typer.Option("float64", "--dtype", envvar=env("DTYPE"),
                              help="float64 (the model's probabilities to rounding) or float32 (float32's "
                                   "precision; see the docs)."),
    model_only: bool = typer.Option(False, "--model-only", envvar=env("MODEL_ONLY"),
                                    help="Convert a pipeline's model alone: its input is the encoded features "
                                         "(for text, the hashed counts)."),
) -> None:
    """Write the snapshot's model for another runtime: input X (rows x features), outputs label and probabilities."""
    from ..batch.convert import convert as run_convert

    with reported_errors():
        converted = run_convert(snapshot, out, fmt=fmt, dtype=dtype, model_only=model_only)
    typer.echo(f"{converted.kind} model of {converted.n_classes} classes and {converted.n_features:,} features "
               f"-> {converted.out} ({fmt}, {converted.dtype})")
