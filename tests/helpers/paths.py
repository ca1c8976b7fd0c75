"""Where the repository and the test data are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMS = REPO / "scripts" / "data" / "sms_spam"


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
