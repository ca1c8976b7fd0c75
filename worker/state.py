"""The service's state on disk: numbered snapshots in one folder, the last K kept.

The newest snapshot that reads back intact is the state; a corrupt one (a crash while the
disk lied, a truncated copy) is reported and the one before it used.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import nbstream
from nbstream.snapshot import load_with_header

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

    def latest(self):
        """(model, meta, path) of the newest intact snapshot, or None when there is none."""
        for _, path in reversed(self._numbered()):
            try:
                model, header = load_with_header(path)
                return model, header["meta"], path
            except nbstream.SnapshotError as error:
                log.warning("skipping unreadable snapshot %s: %s", path, error)
        return None

    def save(self, model, meta: dict) -> Path:
        numbered = self._numbered()
        number = numbered[-1][0] + 1 if numbered else 1
        path = nbstream.save(model, self.directory / f"snapshot-{number:010d}.nbs", meta=meta)
        for _, old in self._numbered()[:-self.keep]:
            old.unlink(missing_ok=True)
        return path
