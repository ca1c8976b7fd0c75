"""`worker serve` replicas as real subprocesses, and what the tests check about them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import nbstream
from worker.service.snapshots import SnapshotStore

from .cli import worker_env
from .kafka import json_message

CLASSES = ["ham", "eggs", "spam"]


class Service:
    """One `worker serve` process; its log goes to a file in its folder.

    Defaults suit tests: a local snapshot copy, static membership, commits every 200 messages
    or half a second.
    """

    def __init__(self, bootstrap, topic, folder: Path, *extra, client="kafka-python", group=None,
                 instance="worker-1", name="serve", connection: list | None = None):
        """connection : the options that reach Kafka (default: --bootstrap BOOTSTRAP); the tests read
        the outputs through ``bootstrap`` either way."""
        self.bootstrap, self.topic, self.client = bootstrap, topic, client
        self.connection = [str(c) for c in connection] if connection else ["--bootstrap", bootstrap]
        self.output = f"{topic}.predictions"
        self.folder = Path(folder)
        self.snapshots = self.folder / f"{name}-snapshots"
        self.group = group or f"{topic}-group"
        self.instance = instance
        self.log = self.folder / f"{name}.log"
        self.extra = [str(e) for e in extra]
        self.process = None
        self._started_before = 0

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "worker", "serve", *self.connection, "--input", self.topic,
                   "--output", self.output, "--group", self.group, "--snapshot-dir", str(self.snapshots),
                   "--snapshot-interval", "0", "--kafka-client", self.client, "--checkpoint-every", "200",
                   "--checkpoint-interval", "0.5"]
        if self.instance:
            command += ["--instance-id", self.instance]
        return command + self.extra

    def start(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        self._started_before = self._starts_logged()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=log, env=worker_env())
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def pause(self):
        self.process.send_signal(signal.SIGSTOP)

    def resume(self):
        self.process.send_signal(signal.SIGCONT)

    def _starts_logged(self) -> int:
        return self.log.read_text(errors="replace").count("serving") if self.log.exists() else 0

    def terminate(self, timeout=90) -> int:
        """SIGTERM once the process has installed its stop handler (a signal during start-up
        would end it by the default action), then its exit status."""
        deadline = time.monotonic() + 60
        while self.running() and self._starts_logged() <= self._started_before and time.monotonic() < deadline:
            time.sleep(0.05)
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def log_tail(self, characters: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-characters:] if self.log.exists() else ""

    def checkpoints(self) -> int:
        found = list(self.snapshots.glob("snapshot-*.nbs"))
        return int(max(found).stem.split("-")[1]) if found else 0

    def state(self):
        model, meta, _ = SnapshotStore(self.snapshots).latest()
        return model, meta.to_json()


def labeled_messages(n, rng, start_id=0):
    """n JSON messages with 6 count features whose rates depend on the class."""
    labels = rng.choice(CLASSES, size=n)
    rates = 1 + np.searchsorted(CLASSES, labels)[:, None] * np.arange(1, 7) / 3
    X = rng.poisson(rates)
    values = [json_message(features=row.tolist(), label=label, id=start_id + i)
              for i, (row, label) in enumerate(zip(X, labels, strict=True))]
    return values, X, labels


def wait_for(condition, timeout=90.0, every=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return False


def covered(records):
    """(partition, offset) of every input message that has a prediction."""
    return {(p["partition"], p["offset"]) for p in (json.loads(r.value) for r in records)}


def assert_equal_statistics(model, X, labels):
    """The model's statistics are exactly those of one offline fit of X, labels."""
    offline = nbstream.MultinomialNB().fit(X, labels)
    order = np.argsort(model.classes_)
    assert model.classes_[order].tolist() == offline.classes_.tolist()
    np.testing.assert_array_equal(model.class_count_[order], offline.class_count_)
    np.testing.assert_array_equal(model.feature_count_[order], offline.feature_count_)
    assert model.n_examples_seen_ == len(labels)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def metric_values(port: int) -> dict[str, float]:
    """The service's /metrics samples by name with labels (``nbstream_dead_letters_total{reason="x"}``);
    empty when the endpoint does not answer."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}
