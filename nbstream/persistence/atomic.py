"""Files replaced atomically and durably: a reader sees the old file or the new one, never half of
one, and a file once committed survives a crash (temporary file, fsync, rename, fsync directory).

Snapshots are written so, and the worker writes its Parquet outputs (predictions, rejected rows) so.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from types import TracebackType
from typing import BinaryIO


def check_output_path(path: str | os.PathLike[str]) -> None:
    """Raise OSError when ``path`` exists as anything but a regular file: a file written beside it
    and renamed into place would replace a directory's name, a device or a FIFO."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(mode):
        raise OSError(None, "a device, FIFO or socket, not a regular file: left as it is", str(path))


class AtomicFile:
    """The next version of ``path``, written to ``file`` (a temporary file beside it).

    ``commit()`` makes it durable and renames it into place; ``discard()`` removes it, leaving
    ``path`` as it was. As a context manager: committed when the block ends normally, discarded
    when it raises. The folder is made when missing.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        check_output_path(self.path)
        fd, name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        self.temporary = Path(name)
        self.file: BinaryIO = os.fdopen(fd, "wb")

    def commit(self) -> Path:
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.temporary, self.path)
        except BaseException:
            self.discard()
            raise
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a crash
        finally:
            os.close(directory)
        return self.path

    def discard(self) -> None:
        try:
            self.file.close()  # flushes what is buffered: on a full disk, that fails too
        except OSError:
            pass  # the file is removed either way; the error that led here is the one to report
        finally:
            self.temporary.unlink(missing_ok=True)

    def __enter__(self) -> BinaryIO:
        return self.file

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()
