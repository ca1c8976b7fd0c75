"""User-facing failures: problems with the settings or the data that the user can fix.

The command line reports a ``UserError`` (and the library's own errors about user input:
an unreadable snapshot, data that does not fit the feature spec) as one line with exit
status 2. Anything else is a bug and surfaces as one, with its traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nbstream.arrow import RowProblems

    from .io.parquet.source import Batch


class UserError(Exception):
    """Base of every failure the user can fix; its message names what was expected and what came."""


class ConfigError(UserError):
    """Settings that contradict each other, the data or an existing snapshot."""


class SourceError(UserError):
    """A path that matches no Parquet file, or a file that cannot be read."""


class InvalidRowError(UserError):
    """A row that cannot be used, named by file, row and column."""

    @classmethod
    def first_in(cls, batch: Batch, problems: RowProblems, advice: str) -> InvalidRowError:
        """The first bad row of a Parquet batch (see ``worker.io.parquet.Batch``)."""
        row, column, message = problems.first()
        return cls(f"{batch.path}: row {batch.first_row + row}, column {column!r}: {message}. {advice}")
