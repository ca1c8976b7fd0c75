"""The ``worker`` command line: thin Typer commands that build a config, delegate and print.

Every option can also come from an environment variable NBSTREAM_<OPTION> (shown in --help).
"""

from . import batch, convert, inference, service  # noqa: F401  (registers the commands)
from .app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
