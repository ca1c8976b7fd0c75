"""Shared fixtures: the real datasets (through NBSTREAM_DATA_DIR or ../shared/data) and the Kafka broker."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from scripts.datasets import load_mnist, mnist_table
from tests.helpers.paths import data_dir, missing_data


@pytest.fixture(scope="session")
def mnist() -> dict[str, np.ndarray]:
    try:
        return load_mnist(data_dir() / "mnist")
    except FileNotFoundError:
        missing_data("MNIST")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def mnist_parquet(mnist, tmp_path_factory) -> dict[str, Path]:
    """MNIST as Parquet (id, label, pixels fixed_size_list<uint8>[784]), 10,000-row groups."""
    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("mnist")
    paths = {}
    for split, first_id in (("train", 0), ("test", 60_000)):
        paths[split] = folder / f"{split}.parquet"
        pq.write_table(mnist_table(mnist[f"{split}_images"], mnist[f"{split}_labels"], first_id),
                       paths[split], row_group_size=10_000)
    return paths


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory) -> str:
    """A real broker for the session (see tests/helpers/kafka.py for where it comes from)."""
    from tests.helpers.kafka import kafka_broker

    manager = kafka_broker(tmp_path_factory.mktemp("kafka"))
    try:
        bootstrap = manager.__enter__()
    except Exception as error:  # noqa: BLE001 - any failure to start means no broker
        if os.environ.get("CI"):
            pytest.fail(f"no Kafka broker for the Kafka tests: {error}")
        pytest.skip(f"no Kafka broker: {error}")
    yield bootstrap
    manager.__exit__(None, None, None)
