"""Shared fixtures: the real datasets (through NBSTREAM_DATA_DIR or ../shared/data), the Kafka broker,
the Schema Registry and the MLflow tracking server."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from scripts.datasets import load_mnist, mnist_table
from tests.helpers.compiled import compile_the_loops
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


def _missing(server: str, error: Exception, needs: str = ""):
    """A test server that could not start fails the run in CI, and skips its tests elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"no {server} for the tests that need one: {error}")
    pytest.skip(f"no {server}{needs}: {error}")


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory) -> str:
    """A real broker for the session (see tests/helpers/kafka.py for where it comes from)."""
    from tests.helpers.kafka import kafka_broker

    manager = kafka_broker(tmp_path_factory.mktemp("kafka"))
    try:
        bootstrap = manager.__enter__()
    except Exception as error:  # noqa: BLE001 - any failure to start means no broker
        _missing("Kafka broker", error)
    yield bootstrap
    manager.__exit__(None, None, None)


@pytest.fixture(params=["kafka-python", "confluent"])
def kafka_client(request) -> str:
    """Every Kafka test runs on both clients: one behaviour, two transports."""
    return request.param


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory):
    """A broker of the module's own, which its tests may kill -9 and restart (a Broker, see
    scripts/kafka_broker.py); it has TLS and SASL_SSL listeners too."""
    from tests.helpers.kafka import local_broker

    try:
        broker = local_broker(tmp_path_factory.mktemp("own-kafka"), ssl=True, sasl_ssl=True)
    except Exception as error:  # noqa: BLE001
        _missing("Kafka broker", error)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def schema_registry_url(tmp_path_factory) -> str:
    """A real Confluent-compatible Schema Registry for the session (see tests/helpers/registry.py)."""
    from tests.helpers.registry import schema_registry

    manager = schema_registry(tmp_path_factory.mktemp("schema-registry"))
    try:
        url = manager.__enter__()
    except Exception as error:  # noqa: BLE001 - any failure to start means no registry
        _missing("Schema Registry", error, " (needs Java 17 and Maven, or NBSTREAM_SCHEMA_REGISTRY_URL)")
    yield url
    manager.__exit__(None, None, None)


@pytest.fixture(scope="module")
def own_registry(tmp_path_factory):
    """A registry of the module's own, which its tests may pause and resume (a Registry, see
    scripts/schema_registry.py)."""
    from tests.helpers.registry import local_registry

    try:
        registry = local_registry(tmp_path_factory.mktemp("own-schema-registry"))
    except Exception as error:  # noqa: BLE001
        _missing("Schema Registry", error, " (needs Java 17 and Maven, or NBSTREAM_SCHEMA_REGISTRY_URL)")
    yield registry
    registry.stop()


@pytest.fixture(scope="session")
def mlflow_tracking_uri(tmp_path_factory) -> str:
    """A real MLflow tracking server for the session (see tests/helpers/mlflow_server.py)."""
    from tests.helpers.mlflow_server import mlflow_server

    manager = mlflow_server(tmp_path_factory.mktemp("mlflow"))
    try:
        uri = manager.__enter__()
    except Exception as error:  # noqa: BLE001 - any failure to start means no server
        _missing("MLflow tracking server", error, " (pip install 'nbstream[mlflow]' mlflow)")
    yield uri
    manager.__exit__(None, None, None)


@pytest.fixture
def started():
    """Starts a tests.helpers.service.Service and kills it at the test's end if it still runs (a
    failed assertion leaves none)."""
    from tests.helpers.service import Service

    running: list[Service] = []

    def start(*args, **kwargs) -> Service:
        running.append(Service(*args, **kwargs).start())
        return running[-1]
    yield start
    for service in running:
        if service.running():
            service.kill()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The compiled loops compiled once, before xdist starts its workers (they load them)."""
    compile_the_loops()
