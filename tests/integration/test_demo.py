"""`scripts/demo.sh service`: the service demo from start to end, and its cleanup on Ctrl-C.

The demo starts a broker of its own (Java and Maven, as scripts/kafka_broker.py needs) and uses
the project's .venv as it is (NBSTREAM_DEMO_SKIP_SETUP=1). Every process it starts inherits a
marker variable from the test, so what it leaves running is found in /proc by that marker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

DEMO = REPO / "scripts" / "demo.sh"
RUN_TIMEOUT = 300  # seconds for a whole demo run (a first run also downloads the Kafka jars)
PROMPT = 30  # seconds an interrupted demo may take to stop everything
N_TRAIN = 4459  # training messages, produced first; the held-out ones follow them
# Prequential accuracy starts from an empty model (always predicting "ham" scores 0.866; the batch
# demo's model, trained on every training message first, 0.9865 on the held-out ones).
LEAST_ACCURACY = 0.95
ACCURACY = re.compile(r'^nbstream_prequential_accuracy\{model="main",window="all"\} (\S+)$', re.MULTILINE)
MARK = "NBSTREAM_DEMO_TEST_MARK"  # set for the demo, so inherited by every process it starts
METRICS_URL = re.compile(r"metrics at (http://127\.0\.0\.1:\d+/metrics)")


def _missing(what: str):
    if os.environ.get("CI"):
        pytest.fail(f"the service demo needs {what}")
    pytest.skip(f"the service demo needs {what}")


class Demo:
    """`scripts/demo.sh service` in a session of its own, as a terminal would run it in the foreground:
    a signal to its process group is what Ctrl-C sends. Output goes to files in ``folder``."""

    def __init__(self, folder: Path):
        self.tmp = folder / "tmp"  # the demo's TMPDIR: its temporary folder is made here
        self.tmp.mkdir()
        self.mark = uuid.uuid4().hex
        env = {**os.environ, "NBSTREAM_DEMO_SKIP_SETUP": "1", "TMPDIR": str(self.tmp), MARK: self.mark}
        self.stdout, self.stderr = folder / "stdout", folder / "stderr"
        with open(self.stdout, "wb") as out, open(self.stderr, "wb") as err:
            self.process = subprocess.Popen([str(DEMO), "service"], cwd=REPO, env=env, stdout=out, stderr=err,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def output(self) -> tuple[str, str]:
        return self.stdout.read_text(errors="replace"), self.stderr.read_text(errors="replace")

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_everything()
            pytest.fail(f"the demo did not end within {timeout} s; its output:\n" + "\n".join(self.output()))

    def processes(self) -> dict[int, str]:
        """The command lines of the processes that carry this demo's marker (the demo and all it
        started, whatever became of their parents), by process id."""
        marker = f"{MARK}={self.mark}".encode()
        found = {}
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                    found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:  # gone meanwhile
                continue
        return found

    def kill_everything(self) -> None:
        """After a failure: nothing of the demo may outlive the test."""
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()


@pytest.fixture
def demo(tmp_path):
    if not Path("/proc/self/environ").exists():
        pytest.skip("finding the demo's processes needs /proc")
    for tool in ("java", "mvn", "setsid", "pgrep"):
        if shutil.which(tool) is None:
            _missing(tool)
    if not (REPO / ".venv" / "bin" / "worker").exists():
        _missing(".venv (scripts/setup.sh test)")
    started = Demo(tmp_path)
    yield started
    if started.process.poll() is None or started.processes():
        started.kill_everything()


def assert_all_gone(demo: Demo) -> None:
    assert demo.processes() == {}  # (a zombie's environment reads empty: only the living are found)
    assert list(demo.tmp.iterdir()) == []  # the demo's temporary folder is removed


def test_service_demo_prints_predictions_and_accuracy_then_stops_everything(demo):
    status = demo.wait(RUN_TIMEOUT)
    stdout, stderr = demo.output()
    assert status == 0, stdout + stderr
    predictions = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert len(predictions) == 5
    for prediction in predictions:
        assert prediction["prediction"] in ("ham", "spam")
        assert set(prediction["probabilities"]) == {"ham", "spam"}
        assert prediction["offset"] >= N_TRAIN  # held-out messages...
        # ...predicted by a model that learned the training set (but its last poll, of 100 at most)
        assert prediction["model_version"] >= N_TRAIN - 100
    found = ACCURACY.search(stdout)
    assert found, stdout
    assert LEAST_ACCURACY < float(found.group(1)) <= 1.0
    assert "the service exited with status 0" in stderr  # SIGTERM: it committed and exited
    assert_all_gone(demo)


@pytest.mark.faults
def test_ctrl_c_while_the_service_runs_stops_everything_promptly(demo):
    deadline = time.monotonic() + RUN_TIMEOUT
    url = None
    while url is None and demo.process.poll() is None and time.monotonic() < deadline:
        found = METRICS_URL.search(demo.output()[1])
        url = found.group(1) if found else None
        time.sleep(0.1)
    assert url, demo.output()
    while not _answers(url):  # the service is up (its stop handler installed) once /metrics answers
        assert demo.process.poll() is None and time.monotonic() < deadline, demo.output()
        time.sleep(0.1)
    running = demo.processes().values()
    assert any(" serve " in command for command in running)
    assert any("kafka.Kafka" in command for command in running)

    os.killpg(demo.process.pid, signal.SIGINT)  # what Ctrl-C in the terminal sends
    status = demo.wait(PROMPT)  # fails the test if it takes longer
    stdout, stderr = demo.output()
    assert status == 130, stdout + stderr
    assert "interrupted" in stderr
    assert "the service exited with status 0" in stderr  # it committed and exited
    assert_all_gone(demo)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False
