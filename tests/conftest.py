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


SMS = REPO / "scripts" / "data" / "sms_spam"


@pytest.fixture(scope="session")
def mnist_parquet(mnist, tmp_path_factory) -> dict[str, Path]:
    """MNIST as Parquet (id, label, pixels fixed_size_list<uint8>[784]), 10,000-row groups."""
    import pyarrow.parquet as pq

    from worker.datasets import mnist_table

    folder = tmp_path_factory.mktemp("mnist")
    paths = {}
    for split, first_id in (("train", 0), ("test", 60_000)):
        paths[split] = folder / f"{split}.parquet"
        pq.write_table(mnist_table(mnist[f"{split}_images"], mnist[f"{split}_labels"], first_id),
                       paths[split], row_group_size=10_000)
    return paths


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory) -> str:
    """A real broker for the session (see tests/kafka_helpers.py for where it comes from)."""
    from tests.kafka_helpers import kafka_broker

    manager = kafka_broker(tmp_path_factory.mktemp("kafka"))
    try:
        bootstrap = manager.__enter__()
    except Exception as error:  # noqa: BLE001 - any failure to start means no broker
        if os.environ.get("CI"):
            pytest.fail(f"no Kafka broker for the Kafka tests: {error}")
        pytest.skip(f"no Kafka broker: {error}")
    yield bootstrap
    manager.__exit__(None, None, None)
