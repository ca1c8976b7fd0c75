"""Numbered snapshots in one folder, the last K kept.

The newest snapshot that reads back intact is used; a corrupt one (a crash while the disk
lied, a truncated copy) is reported and the one before it used. `worker serve
--snapshot-dir` keeps its local copies of the group's model here.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import nbstream

from ..errors import ConfigError
from ..snapshot_meta import SnapshotMeta, read_snapshot, write_snapshot

log = logging.getLogger(__name__)
_NAME = re.compile(r"snapshot-(\d{10})\.nbs$")


class SnapshotStore:
    def __init__(self, directory: Path, keep: int = 3):
        if keep < 1:
            raise ValueError(f"keep must be at least 1; got {keep}.")
        self.directory = Path(directory)
        self.keep = keep
        self.directory.mkdir(parents=True, exist_ok=True)

    def _numbered(self) -> list[tuple[int, Path]]:
        found = [(int(m.group(1)), path) for path in self.directory.iterdir() if (m := _NAME.match(path.name))]
        return sorted(found)

    def latest(self) -> tuple[nbstream.base.NaiveBayes, SnapshotMeta, Path] | None:
        """(model, meta, path) of the newest intact snapshot, or None when there is none."""
        for _, path in reversed(self._numbered()):
            try:
                model, meta = read_snapshot(path)
                return model, meta, path
            except (nbstream.SnapshotError, ConfigError) as error:
                log.warning("skipping unreadable snapshot", extra={"path": str(path), "error": str(error)})
        return None

    def save(self, model, meta: SnapshotMeta) -> Path:
        numbered = self._numbered()
        number = numbered[-1][0] + 1 if numbered else 1
        path = write_snapshot(model, self.directory / f"snapshot-{number:010d}.nbs", meta)
        for _, old in self._numbered()[:-self.keep]:
            old.unlink(missing_ok=True)
        return path
