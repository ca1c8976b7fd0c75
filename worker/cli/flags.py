"""The commands' own flags, which no config of their work holds, each declared once.

How a command shows its outcome (a progress bar, JSON) and the choices it passes to its work as
they are (predict's extra columns, evaluate's replay): a command takes those it has with
``setting_option(CommandFlags, name)``, in its own words where its help says more.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..setting import setting


@dataclass(frozen=True)
class CommandFlags:
    """Flags of the batch commands and produce."""
    progress: bool | None = setting(None, "--progress", negative="--no-progress",
                                    help="Progress bar with rows/s (default: on when stderr is a terminal).")
    as_json: bool = setting(False, "--json", help="Print the metrics as JSON.")
    proba: bool = setting(False, "--proba", help="Add a proba_<class> column per class.")
    id_column: str | None = setting(None, "--id", help="Column passed through to identify each row.")
    prequential: bool = setting(False, "--prequential",
                                help="Test-then-train: predict each row with the snapshot's model plus every earlier "
                                     "row (files in order), then learn it; the snapshot is not changed.")
