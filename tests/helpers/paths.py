"""Where the repository and the test data are."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SMS = REPO / "scripts" / "data" / "sms_spam"


def script(name: str) -> ModuleType:
    """scripts/NAME.py as a module (a script, not part of the package), loaded once."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules[name]


def data_dir() -> Path:
    """NBSTREAM_DATA_DIR, else ../shared/data beside the checkout."""
    configured = os.environ.get("NBSTREAM_DATA_DIR")
    return Path(configured) if configured else REPO.parent / "shared" / "data"


def missing_data(what: str):
    """Skip on a developer machine without the data; in CI missing data is a failure."""
    message = f"{what} not found under {data_dir()} (set NBSTREAM_DATA_DIR; see README)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
