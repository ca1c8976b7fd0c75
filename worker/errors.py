"""User-facing failures: problems with the settings or the data that the user can fix.

The command line reports a ``UserError`` (and the library's own errors about user input:
an unreadable snapshot, data that does not fit the feature spec) as one line with exit
status 2. Anything else is a bug and surfaces as one, with its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Base of every failure the user can fix; its message names what was expected and what came."""


class ConfigError(UserError):
    """Settings that contradict each other, the data or an existing snapshot."""


class SourceError(UserError):
    """A path that matches no Parquet file, or a file that cannot be read."""


class InvalidRowError(UserError):
    """A row that cannot be used, named by file, row and column (``Batch.first_invalid``)."""
