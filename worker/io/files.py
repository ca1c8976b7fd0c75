"""OS errors of the files a command writes, reported against the file the user named."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def writing(path: Path):
    """Re-raise an OSError inside the block as one naming ``path`` (not the temporary file
    beside it): "PATH: cannot write (No space left on device)"."""
    try:
        yield
    except OSError as error:
        raise OSError(error.errno, f"cannot write ({cannot_because(error)})", str(path)) from None


def cannot_because(error: OSError) -> str:
    """The reason of an OSError in a few words, from its errno when it has one."""
    return os.strerror(error.errno) if error.errno else (error.strerror or str(error))
