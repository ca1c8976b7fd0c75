"""The ``worker`` command line: thin commands that build a config and delegate."""

from __future__ import annotations

import json
from pathlib import Path

import typer

import nbstream
from nbstream.snapshot import read_header

app = typer.Typer(help="nbstream worker: streaming Naive Bayes over Parquet files and Kafka topics.",
                  no_args_is_help=True, add_completion=False)


@app.callback()
def _commands() -> None:
    """Train, evaluate and serve streaming Naive Bayes models; see each command's --help."""


@app.command()
def inspect(snapshot: Path = typer.Argument(..., help="Snapshot file written by nbstream.save.",
                                            envvar="NBSTREAM_SNAPSHOT"),
            as_json: bool = typer.Option(False, "--json", help="Print the header as JSON.")) -> None:
    """Show a snapshot's kind, parameters, classes, examples seen and metadata (checksum verified)."""
    try:
        header = read_header(snapshot)
        model = nbstream.load(snapshot)
    except nbstream.SnapshotError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    if as_json:
        header = {key: value for key, value in header.items() if key != "arrays"}
        typer.echo(json.dumps(header, indent=2))
        return
    typer.echo(f"kind:           {header['kind']}")
    typer.echo(f"format version: {nbstream.snapshot.FORMAT_VERSION} (checksum ok)")
    typer.echo(f"created:        {header['created_at']}")
    typer.echo(f"examples seen:  {header['examples_seen']}")
    typer.echo(f"features:       {header['n_features']}")
    typer.echo(f"parameters:     {model!r}")
    typer.echo(f"classes ({'open' if header['open_classes'] else 'fixed'}):")
    for label, count in zip(model.classes_.tolist(), model.class_count_.tolist()):
        typer.echo(f"  {label!s:<20} {count:,.6g}")
    if header["meta"]:
        typer.echo(f"metadata:       {json.dumps(header['meta'])}")


def main() -> None:
    app()
