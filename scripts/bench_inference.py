"""The inference API under load, against MLServer serving the same model, and the Kafka loop beside it.

  api    `worker serve-model` of a BernoulliNB learned from MNIST's 60,000 training images
         (binarize 127.5), and MLServer's scikit-learn runtime serving the same model
         (``nbstream.to_sklearn``, saved as MLServer loads it): infer requests of 1 and 100 test
         images as FP64 JSON tensors, asking for the class probabilities, with 1, 8 and 32
         concurrent connections of one load generator (wrk: one thread, --seconds each): requests/s,
         p50 and p99 latency, and the ratios. Both servers run as they are installed, one process.
  kafka  `worker serve --http-port` on --messages SMS text JSON messages (exactly-once, multinomial on
         2^20 hashed words, the confluent client): predictions/s alone, and while 32 connections ask
         its API 1-row infer requests for as long as it runs, with --http-cpu-share 0.25 (the
         default) and 1; the API's requests/s and p99 meanwhile; and without --http-port.

    python scripts/bench_inference.py --data-dir ../shared/data [--only api,kafka] [--seconds 10]
        [--mlserver PATH/TO/mlserver] [--bootstrap HOST:PORT]

Needs wrk (Debian: apt install wrk). MLServer lives in a virtual environment of its own (its
dependencies pin what nbstream's do not): made at .bench/mlserver-venv on first use unless --mlserver
names its program. --record PATH writes the figure record of the api table (PATH, or
PATH/inference-api.json for a folder) and draws its chart.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_kafka import Predictions, broker, create_topic, send, sms_messages, start_serve, stop  # noqa: E402
from datasets import load_mnist  # noqa: E402

import nbstream  # noqa: E402
from nbstream.arrow import FeatureSpec, Pipeline  # noqa: E402
from scripts.bench import charts  # noqa: E402

MLSERVER_VENV = REPO / ".bench" / "mlserver-venv"
CLIENTS = (1, 8, 32)
ROWS = (1, 100)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_ready(url: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer 200 within {timeout:g} s")


def lua_posting(body: Path) -> str:
    """wrk's script POSTing the JSON file ``body``."""
    return (f'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
            f'local f = io.open("{body}", "rb")\nwrk.body = f:read("*a")\nf:close()\n')


def wrk(url: str, body: Path, connections: int, seconds: float) -> dict[str, float]:
    """requests/s, p50 and p99 (ms) of POSTing ``body`` to ``url`` over ``connections`` connections."""
    script = body.with_suffix(".lua")
    script.write_text(lua_posting(body))
    done = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency", "-s", str(script), url],
                          capture_output=True, text=True, check=True)
    return wrk_figures(done.stdout)


def wrk_figures(out: str) -> dict[str, float]:
    """requests/s, p50 and p99 (ms) of wrk's report (RuntimeError when a request failed)."""
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"{errors.group(1)} requests failed:\n{out}")
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "p50": _ms(re.search(r"\s50%\s+([\d.]+\w+)", out).group(1)),
            "p99": _ms(re.search(r"\s99%\s+([\d.]+\w+)", out).group(1))}


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(\w+)", text).groups()
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]


def table(header: list[str], rows: list[list]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
    print(flush=True)


# ---- api ------------------------------------------------------------------------------------------
def mnist_pipeline(data_dir: Path) -> tuple[Pipeline, np.ndarray]:
    mnist = load_mnist(data_dir / "mnist")
    model = nbstream.BernoulliNB(binarize=127.5).fit(mnist["train_images"].reshape(60_000, -1),
                                                      mnist["train_labels"])
    encoder = FeatureSpec.vector("pixels").encoder()
    encoder.width = 784
    return Pipeline(model, encoder, label="label"), mnist["test_images"].reshape(10_000, -1).astype(np.float64)


def mlserver_program(given: str | None) -> str:
    if given:
        return given
    program = MLSERVER_VENV / "bin" / "mlserver"
    if not program.exists():
        print(f"making {MLSERVER_VENV} (MLServer and its scikit-learn runtime)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(MLSERVER_VENV)], check=True)
        subprocess.run([str(MLSERVER_VENV / "bin" / "pip"), "install", "-q", "mlserver", "mlserver-sklearn",
                        "scikit-learn"], check=True)
    return str(program)


def start_mlserver(program: str, pipeline: Pipeline, folder: Path, workers: int) -> tuple[subprocess.Popen, int]:
    """MLServer serving the model as scikit-learn's estimator (its runtime loads it with joblib), with
    ``workers`` inference processes (0: in its main process)."""
    python = Path(program).parent / "python"
    root = folder / f"mlserver-{workers}"
    model_dir = root / "digits"
    model_dir.mkdir(parents=True)
    # The estimator crosses into MLServer's environment as joblib, the format its runtime reads.
    import joblib

    joblib.dump(nbstream.to_sklearn(pipeline.model), model_dir / "model.joblib")
    (model_dir / "model-settings.json").write_text(json.dumps({
        "name": "digits", "implementation": "mlserver_sklearn.SKLearnModel",
        "parameters": {"uri": "./model.joblib"}}))
    http, grpc, metrics = free_port(), free_port(), free_port()
    (root / "settings.json").write_text(json.dumps({
        "host": "127.0.0.1", "http_port": http, "grpc_port": grpc, "metrics_port": metrics,
        "parallel_workers": workers, "debug": False}))
    process = subprocess.Popen([program, "start", str(root)],
                               stdout=open(folder / "mlserver.log", "ab"), stderr=subprocess.STDOUT,
                               env={**os.environ, "PATH": f"{python.parent}:{os.environ['PATH']}"})
    wait_ready(f"http://127.0.0.1:{http}/v2/models/digits/ready")
    return process, http


def start_serve_model(pipeline: Pipeline, folder: Path) -> tuple[subprocess.Popen, int]:
    path = folder / "digits.nbs"
    pipeline.save(path)
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "worker", "serve-model", str(path), "--http-port", str(port)],
                               stdout=open(folder / "serve-model.log", "ab"), stderr=subprocess.STDOUT, cwd=REPO)
    wait_ready(f"http://127.0.0.1:{port}/v2/models/digits/ready")
    return process, port


def bodies(images: np.ndarray, folder: Path) -> dict[tuple[str, int], Path]:
    """The request bodies of 1 and 100 rows for each server (the same tensor; each names its outputs)."""
    made = {}
    for rows in ROWS:
        tensor = {"shape": [rows, 784], "datatype": "FP64", "data": images[:rows].ravel().tolist()}
        for server, name, output in (("nbstream", "pixels", "probabilities"), ("mlserver", "input-0", "predict_proba")):
            path = folder / f"{server}-{rows}.json"
            path.write_text(json.dumps({"inputs": [{"name": name, **tensor}], "outputs": [{"name": output}]}))
            made[server, rows] = path
    return made


def check_same_answers(ports: dict[str, int], images: np.ndarray, pipeline: Pipeline) -> None:
    """Both servers give the library's probabilities for the same rows (before anything is timed)."""
    expected = pipeline.model.predict_proba(images[:5])
    for server, (name, output, path) in {"nbstream": ("pixels", "probabilities", "digits"),
                                         "mlserver": ("input-0", "predict_proba", "digits")}.items():
        body = {"inputs": [{"name": name, "shape": [5, 784], "datatype": "FP64", "data": images[:5].ravel().tolist()}],
                "outputs": [{"name": output}]}
        request = urllib.request.Request(f"http://127.0.0.1:{ports[server]}/v2/models/{path}/infer",
                                         json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            got = np.array(json.loads(answer.read())["outputs"][0]["data"]).reshape(5, -1)
        if not np.allclose(got, expected, rtol=1e-9, atol=1e-300):
            raise AssertionError(f"{server}'s probabilities are not the library's")


def api(data_dir: Path, seconds: float, mlserver: str | None, workers: int, folder: Path) -> charts.Record:
    pipeline, images = mnist_pipeline(data_dir)
    program = mlserver_program(mlserver)
    ours, our_port = start_serve_model(pipeline, folder)
    theirs, their_port = start_mlserver(program, pipeline, folder, workers)
    try:
        check_same_answers({"nbstream": our_port, "mlserver": their_port}, images, pipeline)
        paths = bodies(images, folder)
        rows, measured = [], {}
        for n_rows in ROWS:
            for clients in CLIENTS:
                mine = wrk(f"http://127.0.0.1:{our_port}/v2/models/digits/infer", paths["nbstream", n_rows], clients,
                           seconds)
                other = wrk(f"http://127.0.0.1:{their_port}/v2/models/digits/infer", paths["mlserver", n_rows],
                            clients, seconds)
                rows.append([n_rows, clients, f"{mine['rps']:,.0f}", f"{mine['p50']:.2f}", f"{mine['p99']:.2f}",
                             f"{other['rps']:,.0f}", f"{other['p50']:.2f}", f"{other['p99']:.2f}",
                             f"{mine['rps'] / other['rps']:.2f}x", f"{mine['p99'] / other['p99']:.2f}x"])
                measured[n_rows, clients] = (mine, other)
        print(f"MNIST BernoulliNB infer requests, FP64 JSON tensors, wrk one thread, {seconds:g} s each; "
              f"MLServer with {workers} parallel workers (latencies in ms; ratios nbstream / MLServer)")
        table(["rows", "clients", "nbstream req/s", "p50", "p99", "MLServer req/s", "p50", "p99", "req/s ratio",
               "p99 ratio"], rows)
        return api_record(measured)
    finally:
        for process in (ours, theirs):
            process.send_signal(signal.SIGTERM)
        for process in (ours, theirs):
            process.wait(timeout=60)


def api_record(measured: dict[tuple[int, int], tuple[dict[str, float], dict[str, float]]]) -> charts.Record:
    """The figure record of the api table: requests/s and p99 of both servers for each (rows, clients)."""
    servers = {"worker serve-model": 0, "MLServer, scikit-learn runtime": 1}
    return {"title": "The inference API against MLServer, the same model: MNIST infer requests",
            "groups": [f"{n_rows} row{'s' if n_rows > 1 else ''}, {clients} client{'s' if clients > 1 else ''}"
                       for n_rows, clients in measured],
            "panels": [{"title": "requests/s, higher is faster", "unit": "req/s",
                        "series": {name: [round(both[i]["rps"]) for both in measured.values()]
                                   for name, i in servers.items()}},
                       {"title": "p99 latency, lower is faster", "unit": "ms",
                        "series": {name: [round(both[i]["p99"], 2) for both in measured.values()]
                                   for name, i in servers.items()}}],
            "nbstream": ["worker serve-model"], "note": charts.command_line()}


# ---- kafka ----------------------------------------------------------------------------------------
class Asking(threading.Thread):
    """32 connections asking the API at ``port`` from when it is ready until ``stop``; ``answered``
    then holds wrk's figures (requests/s, p50, p99)."""

    def __init__(self, port: int, body: Path):
        super().__init__(daemon=True)
        self.port, self.body = port, body
        self.answered: dict[str, float] = {}
        self._wrk: subprocess.Popen | None = None
        self._stopped = threading.Event()

    def run(self) -> None:
        wait_ready(f"http://127.0.0.1:{self.port}/v2/health/ready")
        if self._stopped.is_set():
            return
        script = str(self.body.with_suffix(".lua"))
        self._wrk = subprocess.Popen(["wrk", "-t1", "-c32", "-d3600s", "--latency", "-s", script,
                                      f"http://127.0.0.1:{self.port}/v2/models/main/infer"],
                                     stdout=subprocess.PIPE, text=True)
        if self._stopped.is_set():  # stopped while wrk started
            self._wrk.send_signal(signal.SIGINT)
        out, _ = self._wrk.communicate()
        self.answered = wrk_figures(out)

    def stop(self) -> None:
        self._stopped.set()
        if self._wrk is not None:
            self._wrk.send_signal(signal.SIGINT)  # wrk prints its figures and ends
        self.join(30)


def kafka(bootstrap: str, n: int, folder: Path) -> None:
    body = folder / "sms-1.json"
    body.write_text(json.dumps({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES",
                                            "data": ["WINNER!! Claim your free prize now"]}]}))
    body.with_suffix(".lua").write_text(lua_posting(body))
    values = sms_messages(n)
    rows, alone = [], None
    for api, loaded, share in ((False, False, None), (True, False, None), (True, True, 0.25), (True, True, 1.0)):
        topic = create_topic(bootstrap, "asked")
        send(bootstrap, topic, values)
        port = free_port()
        run = f"{topic}-{uuid.uuid4().hex[:6]}"
        predictions = Predictions(bootstrap, f"{run}.out")
        extra = ["--text-features", "--model", "multinomial"] + (["--http-port", str(port)] if api else [])
        extra += ["--http-cpu-share", str(share)] if share is not None else []
        process = start_serve(bootstrap, topic, run, "confluent", extra, folder, f"{run}-0")
        asking = Asking(port, body) if loaded else None
        if asking is not None:
            asking.start()
        try:
            predictions.wait(n)
        finally:
            if asking is not None:
                asking.stop()
            stop([process])
        stamps = np.array([stamp for stamp, _ in predictions.seen.values()])
        first = stamps.min()
        rate = (n - int((stamps == first).sum())) / (stamps.max() - first)
        alone = alone or rate
        answered = asking.answered if asking is not None else {}
        load = f"32 clients, --http-cpu-share {share:g}" if loaded else "none" if api else "no --http-port"
        rows.append([load, f"{rate:,.0f}", f"{rate / alone:.2f}x", f"{answered['rps']:,.0f}" if answered else "-",
                     f"{answered['p99']:.1f}" if answered else "-"])
    print(f"worker serve --http-port: SMS text JSON, {n:,} messages, exactly-once, confluent; the API asked "
          f"1-row requests by wrk (one thread) while it serves")
    table(["API load", "predictions/s", "of no API", "API req/s", "API p99 ms"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--only", default="api,kafka")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--mlserver", help="MLServer's program (default: made in .bench/mlserver-venv)")
    parser.add_argument("--mlserver-workers", type=int, default=0,
                        help="MLServer's parallel_workers (0, the default here: inference in its main process; "
                             "MLServer's own default, 1, did not start with MLServer 1.7.1 on Python 3.11: its "
                             "worker process found no event loop)")
    parser.add_argument("--bootstrap")
    charts.add_record_option(parser)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed (Debian: apt install wrk)")
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory() as folder:
        if "api" in only:
            (Path(folder) / "api").mkdir()
            record = api(args.data_dir, args.seconds, args.mlserver, args.mlserver_workers, Path(folder) / "api")
            if args.record:
                charts.publish(record, charts.record_file(args.record, "inference-api"))
        if "kafka" in only:
            with broker(args.bootstrap) as bootstrap:
                kafka(bootstrap, args.messages, Path(folder))


if __name__ == "__main__":
    main()
