"""`worker train/evaluate --mlflow` against hostile tracking servers (tests/helpers/hostile_http.py, on
127.0.0.1): each command ends within its deadlines (--mlflow-timeout) with one line on stderr that
shows no credential, and the work done before (the snapshot, the metrics) is kept.

The commands run as subprocesses: a request given up at its deadline is left in a daemon thread,
which ends with the process."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers.cli import run_worker
from tests.helpers.hostile_http import HostileServer, answer, routes, trickle

PASSWORD = "pw-Hostile-7"
DEADLINE = 3  # --mlflow-timeout of these tests (seconds)
BOUND = 30  # seconds a command may take in all: its start (importing MLflow), the work, the deadlines
HEALTHY = {"/health": answer(200, b"OK", "text/plain")}
STALLED = trickle(b"", 3600, headers_too=True)  # the first byte of its answer after an hour


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    path = tmp_path_factory.mktemp("mlflow-deadlines") / "rows.parquet"
    pq.write_table(pa.table({"text": ["win cash now", "see you at lunch"] * 20, "label": ["spam", "ham"] * 20}), path)
    return path


def worker(server: HostileServer, monkeypatch, *args) -> tuple[object, float]:
    """``worker ARGS... --mlflow --mlflow-timeout DEADLINE`` against ``server``, its URI with a password;
    the result and the seconds it took."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url.replace("http://", f"http://alice:{PASSWORD}@"))
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    started = time.monotonic()
    result = run_worker(*args, "--mlflow", "--mlflow-timeout", DEADLINE, timeout=120)
    return result, time.monotonic() - started


def one_line_without_password(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr[:2000]
    assert PASSWORD not in lines[0] and len(lines[0]) < 600
    return lines[0]


def test_a_trickling_health_check_ends_at_its_deadline_before_any_work(rows, tmp_path, monkeypatch):
    with HostileServer(trickle(b"{}", 1.0, headers_too=True)) as server:  # a byte a second: no read times out
        result, seconds = worker(server, monkeypatch, "train", rows, "--label", "label", "--text", "text",
                                 "--out", tmp_path / "m.nbs")

    assert result.returncode == 2 and seconds < BOUND
    line = one_line_without_password(result.stderr)
    assert line.endswith(f"(MLFLOW_TRACKING_URI) does not answer (no complete answer within {DEADLINE} s): start "
                         f"it, or point MLFLOW_TRACKING_URI at one that runs.")
    assert not (tmp_path / "m.nbs").exists()


@pytest.mark.parametrize("status", [500, 400])  # 500: retried by MLflow; 400: its body repeated in the error
def test_an_api_answering_an_error_with_a_large_body_is_one_short_line_and_the_snapshot_is_kept(
        rows, tmp_path, monkeypatch, status):
    with HostileServer(routes(HEALTHY, answer(status, b"x" * 200_000, "text/plain"))) as server:
        result, seconds = worker(server, monkeypatch, "train", rows, "--label", "label", "--text", "text",
                                 "--out", tmp_path / "m.nbs")

    assert result.returncode == 3 and seconds < BOUND
    line = one_line_without_password(result.stderr)
    assert line.startswith(f"error: MLflow at {server.url}: starting the run failed: API request to ")
    assert f"snapshot: {tmp_path / 'm.nbs'}" in result.stdout and (tmp_path / "m.nbs").exists()


def test_a_stalled_api_is_given_up_at_the_deadline_and_the_snapshot_is_kept(rows, tmp_path, monkeypatch):
    with HostileServer(routes(HEALTHY, STALLED)) as server:
        result, seconds = worker(server, monkeypatch, "train", rows, "--label", "label", "--text", "text",
                                 "--out", tmp_path / "m.nbs")

    assert result.returncode == 3 and seconds < BOUND
    assert one_line_without_password(result.stderr) == (
        f"error: MLflow at {server.url}: starting the run did not end within {DEADLINE} s (--mlflow-timeout)")
    assert (tmp_path / "m.nbs").exists()


def test_evaluate_prints_its_metrics_when_the_api_stalls(rows, tmp_path, monkeypatch):
    assert run_worker("train", rows, "--label", "label", "--text", "text", "--out", tmp_path / "m.nbs").returncode == 0
    with HostileServer(routes(HEALTHY, STALLED)) as server:
        result, seconds = worker(server, monkeypatch, "evaluate", tmp_path / "m.nbs", rows, "--json")

    assert result.returncode == 3 and seconds < BOUND
    assert "did not end within" in one_line_without_password(result.stderr)
    assert json.loads(result.stdout)["rows"] == 40 and "mlflow" not in json.loads(result.stdout)
