"""The container image: built from the Containerfile by scripts/container_image.py (on a Debian base
made with mmdebstrap, as no registry need be reachable), it runs `nbstream serve` against the test
broker as a user of its own, answers its probes, and learns exactly what an offline fit learns.

Needs podman and mmdebstrap: skipped without them, except in CI (CI set), where scripts/setup.sh
installs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import uuid

import numpy as np
import pytest

from tests.helpers.kafka import new_topic, read_all, send
from tests.helpers.paths import REPO
from tests.helpers.service import (
    Service,
    assert_equal_statistics,
    covered,
    free_port,
    labeled_messages,
    metric_values,
    wait_for,
)

IMAGE = "localhost/nbstream:test"
IMAGE_USER = "10001:10001"  # the Containerfile's UID
METRICS_PORT = 9100  # the image's NBSTREAM_METRICS_PORT, and the port it exposes


@pytest.fixture(scope="module")
def image() -> str:
    """The image, built now (about 45 s the first time, a few seconds when nothing changed)."""
    missing = [tool for tool in ("podman", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        reason = f"{' and '.join(missing)} not installed (scripts/setup.sh installs them in CI)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    built = subprocess.run([sys.executable, str(REPO / "scripts" / "container_image.py"), "build", "--debian-base",
                            "--tag", IMAGE], capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr
    print(built.stdout.strip())  # name, size, build time: shown with -s
    return IMAGE


def inspect(image: str) -> dict:
    done = subprocess.run(["podman", "image", "inspect", image], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)[0]["Config"]


def status(url: str) -> int:
    try:
        return urllib.request.urlopen(url, timeout=5).status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


class ContainerService(Service):
    """`nbstream serve` in a container of ``image`` on the host's network, with ``environment`` and
    the options a Service gives, its file system read-only as in deploy/kubernetes; its snapshot
    folder is mounted at the same path, owned by the image's user."""

    def __init__(self, image: str, *args, environment: dict[str, object], **kwargs):
        super().__init__(*args, **kwargs)
        self.image, self.environment = image, environment
        self.container = f"nbstream-test-{uuid.uuid4().hex[:8]}"

    def command(self) -> list[str]:
        python, dash_m, program, *arguments = super().command()
        assert [python, dash_m, program] == [sys.executable, "-m", "worker"]
        return ["podman", "run", "--rm", "--read-only", "--network=host", f"--name={self.container}",
                f"--volume={self.snapshots}:{self.snapshots}:U",
                *[f"--env={name}={value}" for name, value in self.environment.items()], self.image, *arguments]

    def start(self):
        self.snapshots.mkdir(parents=True, exist_ok=True)
        return super().start()

    def user(self) -> str:
        """uid:gid of the service's process in the container."""
        done = subprocess.run(["podman", "exec", self.container, "sh", "-c", "echo $(id -u):$(id -g)"],
                              capture_output=True, text=True, check=True)
        return done.stdout.strip()

    def remove(self) -> None:
        subprocess.run(["podman", "rm", "--force", "--ignore", self.container], capture_output=True)


def test_the_image_runs_nbstream_as_a_user_of_its_own_with_the_metrics_port_exposed(image):
    config = inspect(image)
    assert config["Entrypoint"] == ["nbstream"]
    assert config["User"] == IMAGE_USER
    assert f"{METRICS_PORT}/tcp" in config["ExposedPorts"]
    assert f"NBSTREAM_METRICS_PORT={METRICS_PORT}" in config["Env"]
    assert not [variable for variable in config["Env"] if "PASSWORD" in variable or "SECRET" in variable]
    version = subprocess.run(["podman", "run", "--rm", image, "--version"], capture_output=True, text=True)
    assert version.stdout.startswith("nbstream ") and version.returncode == 0


def test_serve_in_the_container_predicts_every_message_and_learns_what_an_offline_fit_learns(
        image, kafka_bootstrap, tmp_path):
    rng = np.random.default_rng(3)
    topic = new_topic(kafka_bootstrap, "container", partitions=2)
    values, X, labels = labeled_messages(2_000, rng)
    send(kafka_bootstrap, topic, values, partition_of=lambda i: i % 2)
    port = free_port()
    service = ContainerService(image, kafka_bootstrap, topic, tmp_path, client="confluent",
                               environment={"NBSTREAM_METRICS_PORT": port, "NBSTREAM_JSON_LOGS": "true"})
    try:
        service.start()
        predictions = read_all(kafka_bootstrap, service.output, expected=len(values), timeout=120)
        assert covered(predictions) == {(i % 2, i // 2) for i in range(len(values))}, service.log_tail()
        assert wait_for(lambda: status(f"http://127.0.0.1:{port}/readyz") == 200, timeout=30), service.log_tail()
        assert status(f"http://127.0.0.1:{port}/healthz") == 200
        lag = f'nbstream_consumer_lag_sum{{group="{service.group}",topic="{topic}"}}'  # what autoscalers read
        assert wait_for(lambda: metric_values(port).get(lag) == 0, timeout=30)  # measured every 5 s
        assert service.user() == IMAGE_USER
        assert service.terminate() == 0, service.log_tail()
    finally:
        service.remove()
    model, _ = service.state()
    assert_equal_statistics(model, X, labels)
    first_log_line = json.loads(service.log.read_text().splitlines()[0])
    assert {"time", "level", "message"} <= first_log_line.keys()


def test_serve_model_in_the_container_answers_infer_requests_with_the_snapshots_probabilities(image, tmp_path):
    from tests.helpers.inference import vector_model

    pipeline = vector_model().pipeline
    models = tmp_path / "models"
    models.mkdir()
    pipeline.save(models / "digits.nbs")
    port = free_port()
    name = f"nbstream-test-{uuid.uuid4().hex[:8]}"
    process = subprocess.Popen(["podman", "run", "--rm", "--read-only", "--network=host", f"--name={name}",
                                f"--volume={models}:/models:U", image, "serve-model", "/models/digits.nbs",
                                "--http-port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        ready = wait_for(lambda: status(f"http://127.0.0.1:{port}/v2/health/ready") == 200, timeout=60)
        assert ready, process.stdout.read().decode() if process.poll() is not None else "still starting"
        rows = np.arange(32).reshape(2, 16) % 4
        body = json.dumps({"inputs": [{"name": "pixels", "datatype": "INT64", "shape": [2, 16],
                                       "data": rows.ravel().tolist()}]}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/digits/infer", body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            outputs = {o["name"]: o for o in json.loads(answer.read())["outputs"]}
        np.testing.assert_allclose(np.reshape(outputs["probabilities"]["data"], (2, -1)),
                                   pipeline.model.predict_proba(rows), rtol=1e-12)
        subprocess.run(["podman", "stop", "--time", "30", name], capture_output=True, check=True)
        assert process.wait(timeout=60) == 0, process.stdout.read().decode()
    finally:
        subprocess.run(["podman", "rm", "--force", "--ignore", name], capture_output=True)
