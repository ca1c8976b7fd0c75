"""Shared fixtures: the real datasets, found through NBSTREAM_DATA_DIR or ../shared/data."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from worker.datasets import load_mnist

REPO = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    configured = os.environ.get("NBSTREAM_DATA_DIR")
    return Path(configured) if configured else REPO.parent / "shared" / "data"


def missing_data(what: str):
    """Skip on a developer machine without the data; in CI missing data is a failure."""
    message = f"{what} not found under {data_dir()} (set NBSTREAM_DATA_DIR; see README)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def mnist() -> dict[str, np.ndarray]:
    try:
        return load_mnist(data_dir() / "mnist")
    except FileNotFoundError:
        missing_data("MNIST")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
