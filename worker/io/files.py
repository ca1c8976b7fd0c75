"""Files the user names: OS errors of the files a command writes, reported against the file the
user named, and the small text files an option points at (settings, a password)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError

SMALL_FILE_BYTES = 1 << 20  # more than any properties file, password or certificate needs


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Re-raise an OSError inside the block as one naming ``path`` (not the temporary file
    beside it): "PATH: cannot write (No space left on device)"."""
    try:
        yield
    except OSError as error:
        raise OSError(error.errno, f"cannot write ({cannot_because(error)})", str(path)) from None


def refuse_replacing_an_input(out: Path, inputs: Iterable[str | Path], what: str) -> None:
    """An output is written beside ``out`` and renamed into place at the end: were ``out`` one of
    the command's inputs, ``what`` (say, "the predictions") would replace it. Refused up front."""
    if not out.is_file():
        return
    for source in inputs:
        try:
            same = os.path.samefile(out, source)
        except OSError:  # a missing input is reported where it is read
            continue
        if same:
            raise ConfigError(f"--out {out} is also an input ({source}); {what} would replace it.")


def cannot_because(error: OSError) -> str:
    """The reason of an OSError in a few words, from its errno when it has one."""
    return os.strerror(error.errno) if error.errno else (error.strerror or str(error))


def not_a_regular_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a regular file ("no such file", "a directory", ...), or None."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return cannot_because(error)
    return _kind_problem(mode)


def special_kind(mode: int) -> str | None:
    """What a file of this ``st_mode`` is when it is not a regular file ("a FIFO", ...); None if it is."""
    if stat.S_ISREG(mode):
        return None
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a special file")


def _kind_problem(mode: int) -> str | None:
    kind = special_kind(mode)
    if kind is None:
        return None
    return "a directory, not a file" if kind == "a directory" else f"not a regular file ({kind})"


def read_small_text(path: Path, option: str, limit: int = SMALL_FILE_BYTES) -> str:
    """The UTF-8 text of a small regular file named by ``option``; anything else (a FIFO, which
    would wait for a writer, a device, a directory, a larger file) is one ConfigError line."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise ConfigError(f"{option} {path}: cannot read ({cannot_because(error)}).") from None
    try:
        info = os.fstat(fd)
        problem = _kind_problem(info.st_mode) or (f"larger than {limit:,} bytes" if info.st_size > limit else None)
        if problem is None:
            try:
                with open(fd, "rb", closefd=False) as file:
                    return file.read(limit + 1).decode("utf-8")
            except UnicodeDecodeError:
                problem = "not UTF-8 text"
            except OSError as error:
                problem = f"cannot read ({cannot_because(error)})"
    finally:
        os.close(fd)
    raise ConfigError(f"{option} {path}: {problem}.")
