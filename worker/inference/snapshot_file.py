"""A snapshot file as the model a server answers with (``worker serve-model``), reloaded when the
file is replaced. A folder of ``--snapshot-dir`` copies (snapshot-0000000001.nbs, ...) stands for
its newest copy.

With reload on, each request first looks at the file (one ``stat``: its inode, size and change
time). When the file was replaced since it was read, it is read again before the request is
answered; a replacement that does not load (forged, truncated, another kind of model under the
same name) is refused in one log line, the model read before keeps answering, and that file is
not tried again until it changes once more.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path

from nbstream import SnapshotError
from nbstream.arrow import Pipeline

from ..snapshot_meta import KafkaOffsets, read_snapshot_with_keys
from .answering import AnsweringModel, SnapshotKeys

log = logging.getLogger(__name__)

_CHECKSUM_BYTES = 32  # a snapshot ends with the SHA-256 of what comes before
RELOAD_POLL_SECONDS = 0.05


class SnapshotLoadError(Exception):
    """The file does not hold a model a server can answer with (one line)."""


def load_answering(path: Path, name: str) -> AnsweringModel:
    """The model of a snapshot written by a worker command (SnapshotLoadError, one line, else)."""
    path = newest_copy(path)
    try:
        model, meta, keyed = read_snapshot_with_keys(path)
        version = _checksum(path)
    except SnapshotError as error:
        raise SnapshotLoadError(str(error)) from None
    except OSError as error:
        raise SnapshotLoadError(f"{path}: cannot read ({os.strerror(error.errno) if error.errno else error}).") \
            from None
    if not model.is_fitted:
        raise SnapshotLoadError(f"{path}: the model learned nothing; there is nothing to answer with.")
    position = {f"{meta.source.topic}:{partition}": offset for partition, offset in meta.source.offsets.items()} \
        if isinstance(meta.source, KafkaOffsets) else {}
    pipeline = Pipeline(model, meta.features, label=meta.label)
    return AnsweringModel(name, pipeline, version, position, None if keyed is None else SnapshotKeys(keyed))


def _checksum(path: Path) -> str:
    """The first 16 hex digits of the snapshot's own checksum: what names its version."""
    with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as file:
        size = os.fstat(file.fileno()).st_size
        if size < _CHECKSUM_BYTES:
            raise SnapshotError(f"{path}: not a snapshot (too short).")
        file.seek(size - _CHECKSUM_BYTES)
        return file.read(_CHECKSUM_BYTES).hex()[:16]


def newest_copy(path: Path) -> Path:
    """The file ``path`` names: itself, or for a folder its newest numbered copy (the folder
    itself when it holds none: reading it then says what is wrong)."""
    if not path.is_dir():
        return path
    copies = sorted(path.glob("snapshot-[0-9]*.nbs"))
    return copies[-1] if copies else path


def _identity(path: Path) -> tuple[str, int, int, int, int] | None:
    file = newest_copy(path)
    try:
        info = os.stat(file)
    except OSError:
        return None
    return str(file), info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns


class SnapshotModel:
    """The model of one snapshot file under one name; with ``reload``, the file's latest model."""

    def __init__(self, path: Path, name: str, *, reload: bool):
        self.path, self.name, self.reload = path, name, reload
        self._identity = _identity(path)
        self._model = load_answering(path, name)  # a file that does not load at start is an error
        self._lock = threading.Lock()

    def models(self) -> Mapping[str, AnsweringModel]:
        if self.reload:
            self._look()
        return {self.name: self._model}

    def names(self) -> list[str]:
        return [self.name]

    def ready(self) -> bool:
        return True

    async def changed(self, timeout_s: float) -> None:
        """A reload is looked for at each request: look again every RELOAD_POLL_SECONDS (a file
        never reloaded never changes)."""
        await asyncio.sleep(min(timeout_s, RELOAD_POLL_SECONDS) if self.reload else timeout_s)

    def ask_key(self, key: str | int) -> None:
        """(A snapshot's model per key answers every key at once.)"""

    def _look(self) -> None:
        identity = _identity(self.path)
        if identity == self._identity or identity is None:
            return  # unchanged, or gone for a moment while it is replaced: keep answering
        with self._lock:
            if identity == self._identity:
                return
            self._identity = identity
            try:
                model = load_answering(self.path, self.name)
            except SnapshotLoadError as error:
                log.error("the replaced snapshot was refused; the previous model keeps answering",
                          extra={"snapshot": str(self.path), "cause": str(error), "version": self._model.version})
                return
            mismatch = _mismatch(self._model, model)
            if mismatch is not None:
                log.error("the replaced snapshot was refused; the previous model keeps answering",
                          extra={"snapshot": str(self.path), "version": self._model.version, "cause": mismatch})
                return
            self._model = model
            log.info("snapshot reloaded", extra={"snapshot": str(self.path), "version": model.version})


def _mismatch(served: AnsweringModel, replacement: AnsweringModel) -> str | None:
    """Why a replacement cannot take the served model's place (its clients would break), or None."""
    kind, new_kind = served.pipeline.model.kind, replacement.pipeline.model.kind
    if new_kind != kind:
        return f"it holds a {new_kind} model, not a {kind} one"
    if (replacement.keys is None) != (served.keys is None):
        return "it holds a model per key where the served snapshot did not" if replacement.keys is not None else \
            "it holds no model per key where the served snapshot did (requests naming a key would fail)"
    if replacement.inputs() != served.inputs():
        described = [[spec.metadata() for spec in model.inputs()] for model in (replacement, served)]
        return f"its inputs {described[0]} are not {described[1]}"
    return None
