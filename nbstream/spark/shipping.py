"""nbstream ships itself to Spark's executors, so that nobody has to install it there.

Its own package is pure Python: it is zipped once per version and content (in the temporary
folder, named ``nbstream-VERSION-DIGEST.zip``) and added to the session as a Python file
(``SparkSession.addArtifacts(..., pyfile=True)``: ``SparkContext.addPyFile`` on a classic
session, an artifact uploaded to the server on Spark Connect). The executors put it first on
their ``sys.path``, so they run the driver's own nbstream even where another is installed. What
it imports stays the executors' to have: numpy and pyarrow (which PySpark's Arrow path needs
anyway), and scipy for text and sparse vectors.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_shipped: set[tuple[str, str]] = set()  # (session, zip file name): what was added where


def package_root() -> Path:
    """The folder of the nbstream package this process imported."""
    return Path(__file__).resolve().parent.parent


def package_files(root: Path) -> list[Path]:
    """The package's Python sources, sorted (compiled caches left out)."""
    return sorted(path for path in root.rglob("*.py") if "__pycache__" not in path.parts)


@functools.cache
def package_zip() -> Path:
    """The zip of this nbstream, made on the first call of a process (or found already made:
    its name holds the version and a digest of the sources)."""
    from .. import __version__

    root = package_root()
    files = package_files(root)
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root.parent).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    target = Path(tempfile.gettempdir()) / f"nbstream-{__version__}-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        _write_zip(target, root, files)
    return target


def _write_zip(target: Path, root: Path, files: list[Path]) -> None:
    """The zip written beside ``target`` and renamed into place: another process making the
    same one at the same moment never sees half of it."""
    handle, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as output, zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, path.relative_to(root.parent).as_posix())
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def ship(session: SparkSession) -> None:
    """Make sure the executors of ``session`` can import this nbstream (once per session)."""
    archive = package_zip()
    key = (_session_key(session), archive.name)
    if key in _shipped:
        return
    session.addArtifacts(str(archive), pyfile=True)
    _shipped.add(key)


def _session_key(session: Any) -> str:
    """What tells sessions apart: a Spark Connect session's id, else the application's id (a
    classic session's Python files belong to its SparkContext)."""
    session_id = getattr(session, "session_id", None)
    return str(session_id) if session_id is not None else str(session.sparkContext.applicationId)
