"""The long-running commands under a pseudo-terminal, where the progress bar is drawn."""

from __future__ import annotations

import os
import select
import subprocess
import sys

import pytest

from tests.helpers.cli import worker_env
from tests.helpers.paths import SMS


def run_in_terminal(*args, timeout: float = 300) -> tuple[int, str]:
    """``python -m worker ARGS...`` with stdin, stdout and stderr on a pty: (exit status, what it showed)."""
    controller, terminal = os.openpty()
    process = subprocess.Popen([sys.executable, "-m", "worker", *map(str, args)], stdin=terminal, stdout=terminal,
                               stderr=terminal, env={**worker_env(), "TERM": "xterm", "COLUMNS": "120"},
                               close_fds=True)
    os.close(terminal)
    shown = bytearray()
    while True:
        ready, _, _ = select.select([controller], [], [], timeout)
        if not ready:
            process.kill()
            raise TimeoutError(shown.decode(errors="replace")[-2000:])
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    return process.wait(timeout=60), shown.decode(errors="replace")


@pytest.fixture(scope="module")
def sms_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("terminal") / "sms.nbs"
    status, shown = run_in_terminal("train", SMS / "train.parquet", "--label", "label", "--text", "text",
                                    "--out", out)
    assert status == 0, shown
    assert "rows/s" in shown and "learned 4,459 rows" in shown  # the bar was drawn, and the summary printed
    return out


def test_train_draws_its_progress_in_a_terminal(sms_model):
    assert sms_model.exists()


def test_evaluate_draws_its_progress_in_a_terminal(sms_model):
    status, shown = run_in_terminal("evaluate", sms_model, SMS / "test.parquet")
    assert status == 0, shown
    assert "rows/s" in shown and "accuracy" in shown


def test_predict_draws_its_progress_in_a_terminal(sms_model, tmp_path):
    status, shown = run_in_terminal("predict", sms_model, SMS / "test.parquet", "--out", tmp_path / "p.parquet")
    assert status == 0, shown
    assert "rows/s" in shown and (tmp_path / "p.parquet").exists()


def test_piped_output_has_no_progress_bar(sms_model):
    done = subprocess.run([sys.executable, "-m", "worker", "evaluate", str(sms_model), str(SMS / "test.parquet")],
                          capture_output=True, text=True, env=worker_env(), timeout=300)
    assert done.returncode == 0 and "rows/s" not in done.stderr and "\x1b[" not in done.stderr + done.stdout


def test_produce_draws_its_progress_in_a_terminal(kafka_bootstrap, kafka_client):
    from tests.helpers.kafka import new_topic, read_all

    topic = new_topic(kafka_bootstrap, "produce-terminal")
    status, shown = run_in_terminal("produce", "--bootstrap", kafka_bootstrap, "--kafka-client", kafka_client,
                                    "--topic", topic, SMS / "test.parquet", "--text", "text", "--label", "label",
                                    "--rate", 2_000)
    assert status == 0, shown
    assert "sending" in shown and "rows/s" in shown and "1115/1115" in shown and "sent 1,115 messages" in shown
    assert len(read_all(kafka_bootstrap, topic, expected=1_115)) == 1_115
