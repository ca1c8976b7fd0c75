"""The ``worker`` Typer application and the one place errors are reported.

A ``UserError`` (and the library's errors about user input: an unreadable snapshot, data
that does not fit the feature spec, an optional package not installed) prints one line and
exits with status 2. Anything else is a bug and surfaces as one, with its traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import typer

import nbstream
from nbstream.arrow import FeatureError
from nbstream.utils.optional import MissingDependency

from ..errors import UserError
from ..io.files import cannot_because

app = typer.Typer(help="nbstream worker: streaming Naive Bayes over Parquet files and Kafka topics.",
                  no_args_is_help=True, pretty_exceptions_show_locals=False)

USER_ERRORS = (UserError, FeatureError, nbstream.SnapshotError, MissingDependency)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"nbstream {nbstream.__version__}")
        raise typer.Exit()


@app.callback()
def _commands(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                           help="Print the version and exit.")) -> None:
    """Train, evaluate and serve streaming Naive Bayes models; see each command's --help.

    The same program is installed as `worker` and as `nbstream`.
    """
    from ..service.telemetry.logs import configure_logging

    configure_logging(json_lines=False, level="warning")  # serve sets its own


def _os_error_line(error: OSError) -> str:
    """'PATH: reason' (and '-> OTHER' for a rename), without the errno noise."""
    where = f"{error.filename}" + (f" -> {error.filename2}" if error.filename2 else "") if error.filename else ""
    reason = error.strerror or cannot_because(error)
    return f"{where}: {reason}" if where else reason


@contextmanager
def reported_errors(log: logging.Logger | None = None) -> Iterator[None]:
    """Errors about the data or the settings, and what the system refused (a full disk, a
    path that cannot be written): one line on stderr, exit status 2.

    log : report through this logger instead (a service whose every line is a log line); an
        unexpected error is then logged with its traceback too, and the exit status is 1.
    """
    try:
        yield
    except (*USER_ERRORS, OSError) as error:
        message = _os_error_line(error) if isinstance(error, OSError) and not isinstance(error, USER_ERRORS) \
            else str(error)
        if log is None:
            typer.echo(f"error: {message}", err=True)
        else:
            log.error(message, extra={"exit_status": 2})
        raise typer.Exit(code=2) from None
    except Exception:
        if log is None:
            raise
        log.critical("stopped by an unexpected error", exc_info=True, extra={"exit_status": 1})
        raise typer.Exit(code=1) from None
