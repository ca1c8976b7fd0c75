"""`worker serve` on a real broker against the strongest honest baselines, side by side in one run.

Every contender is its own process, reading the same topics (one partition, --messages each):

  throughput  MNIST JSON messages ({"id", "features": [784 ints], "label"}) and SMS text JSON
              ({"id", "text", "label"}, the SMS training split over and over): with each client, a
              bare reader (+ orjson), a relay (consume + orjson + produce one small JSON per
              message) and `worker serve` (exactly-once, Bernoulli/binarize 127.5 on MNIST,
              multinomial on 2^20 hashed words for SMS). Readers time their first record to their
              last; `worker serve` is timed from its first prediction's timestamp to its last.
  sustained   SMS text JSON topics of each of --sustained message counts (100,000 and 400,000), --rounds
              times: the confluent reader and relay and `worker serve` (no --kafka-client). librdkafka
              fetches ahead of the application, up to 100,000 messages a partition (queued.min.messages),
              so a run of 100,000 short messages reads them from memory, while a longer run reads at
              the rate the broker serves them: the rates, and the service's share of the relay, of each.
  arrow       `--format arrow` messages of 1,000 rows, against the same model's in-memory
              partial_fit + predict_proba over the same rows, in rows/s.
  latency     messages sent at a steady --rate for --seconds; latency is when a read_committed
              consumer receives the prediction minus the input's timestamp: p50, p99.
  replicas    1 and 2 replicas on a 4-partition SMS topic, exactly-once and at-least-once.
  interval    exactly-once commit intervals of 0.1, 0.5, 1 and 5 seconds: messages/s on a backlog
              of --messages SMS messages, and latency (p50, p99) at --rate for --seconds.
  partitions  SMS text JSON sent round-robin over --partitions input partitions (1 to 96), served
              exactly-once (confluent) by each of --replicas replica counts: every replica's
              peak and current resident memory once the last prediction is read (VmHWM, VmRSS
              of /proc/PID/status, the process alive), predictions/s (record timestamps, from
              the end of the first polled batch to the end of the last), state bytes per
              commit and the global model's merges (from /metrics). Then one replica is
              started again on the group: its restore of every partition's state on
              assignment, its first merge (a message to each partition) and its memory.
              --worker-root runs the serve processes of another checkout (an older commit's
              worktree, say: a metric it lacks shows as "-").
  window      SMS text JSON served with no --window, with --window 10000 and with --window 100000:
              predictions/s and the partition state written per commit.
  challengers SMS text JSON served (multinomial) with 0, 1 and 3 --challenger models (complement;
              then multinomials with --window 10000 and with --half-life 10000 too), each judged on
              every message: predictions/s, peak and current resident memory once the last
              prediction is read, and the partition state written per commit.
  labels      MNIST and SMS JSON served exactly-once (confluent) with each label inside its message,
              and with the messages unlabeled and the labels on a labels topic (--labels-topic; both
              topics sent in full first): examples learned per second, from the first prediction to
              the commit that counts the last example learned (/metrics, polled every 50 ms; commits
              every 0.5 s bound how late that is seen).
  registry    MNIST and SMS rows served as JSON messages and as Avro, JSON Schema and Protobuf records of a
              Schema Registry (--schema-registry URL, else a local one from scripts/schema_registry.py;
              records written by nbstream's own writers, as `worker produce` writes them), confluent
              client, against a confluent relay that reads each Avro record with confluent-kafka's
              AvroDeserializer and produces one small JSON per message.
  prequential `worker serve` of --baseline-root (another checkout) and of this one on the same MNIST
              and SMS JSON topics, confluent client, --rounds times in turn: the best messages/s of
              each and their ratio, and the ratio of every round.

    python scripts/bench_kafka.py --data-dir ../shared/data [--bootstrap HOST:PORT] [--only throughput,latency]
    python scripts/bench_kafka.py --only partitions [--partitions 1,8,24,48] [--replicas 1] [--worker-root PATH]
    python scripts/bench_kafka.py --only prequential --baseline-root PATH
    python scripts/bench_kafka.py --only labels --messages 60000
    python scripts/bench_kafka.py --only challengers --messages 50000
    python scripts/bench_kafka.py --only registry [--schema-registry URL]
Without --bootstrap a local broker is started with scripts/kafka_broker.py (and stopped).
--record PATH writes the figure record of each section charted in docs/performance.md (FIGURES) and
draws its chart: --record docs/figures/NAME.json for one section, --record docs/figures for several.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.bench import charts  # noqa: E402
from scripts.bench.contenders import (  # noqa: E402
    AVRO_RELAY,
    CONFLUENT_READER,
    CONFLUENT_RELAY,
    KAFKA_PYTHON_READER,
    KAFKA_PYTHON_RELAY,
)
from scripts.datasets import default_data_dir, load_mnist  # noqa: E402
from scripts.local_process import free_port  # noqa: E402
from worker.io.arrow_messages import read_stream, write_stream  # noqa: E402

SECTIONS = ("throughput", "sustained", "arrow", "latency", "replicas", "interval", "partitions", "prequential",
            "window", "challengers", "labels", "registry")
CHALLENGERS = ("cnb=model=complement", "recent=model=multinomial,window=10000",
               "forget=model=multinomial,half_life=10000")
# the sections charted in docs/performance.md: the name of each one's figure record (--record)
FIGURES = {"throughput": "kafka-service", "prequential": "test-then-train", "labels": "pending-examples",
           "challengers": "challengers", "registry": "schema-registry", "partitions": "partitions"}
MNIST_MODEL = ["--model", "bernoulli", "--binarize", "127.5"]
SMS_MODEL = ["--text-features", "--model", "multinomial"]
MIB = 1 << 20
SESSION_TIMEOUT = 10.0  # worker serve's --session-timeout: a static member that stopped leaves the group then


@contextmanager
def broker(bootstrap: str | None):
    if bootstrap:
        yield bootstrap
        return
    sys.path.insert(0, str(REPO / "scripts"))
    from kafka_broker import Broker

    with tempfile.TemporaryDirectory() as folder:
        started = Broker(Path(folder)).start()
        try:
            yield started.bootstrap
        finally:
            started.stop()


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> str:
    topic = f"{name}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    (future,) = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values()
    future.result(timeout=30)
    return topic


def send(bootstrap: str, topic: str, values: list[bytes], rate: float = 0.0, partitions: int = 1,
         keys: list[bytes] | None = None) -> None:
    """values[i] keyed by its number, to partition i % partitions; or keyed by keys[i], to the
    partition the key gives."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 2_000_000,
                         "message.max.bytes": 16 << 20})
    started = time.monotonic()
    for i, value in enumerate(values):
        if rate:
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        where = {"partition": i % partitions} if keys is None else {}
        while True:
            try:
                producer.produce(topic, value, str(i).encode() if keys is None else keys[i], **where)
                break
            except BufferError:
                producer.poll(0.1)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(120)


def mnist_messages(data_dir: Path, n: int) -> list[bytes]:
    mnist = load_mnist(data_dir / "mnist")
    images, labels = mnist["train_images"], mnist["train_labels"]
    return [orjson.dumps({"id": i, "features": images[i % 60_000].tolist(), "label": int(labels[i % 60_000])})
            for i in range(n)]


def sms_messages(n: int) -> list[bytes]:
    rows = pq.read_table(REPO / "scripts" / "data" / "sms_spam" / "train.parquet").to_pylist()
    return [orjson.dumps({"id": i, "text": rows[i % len(rows)]["text"], "label": rows[i % len(rows)]["label"]})
            for i in range(n)]


def run_program(program: str, bootstrap: str, topic: str, expected: int, env: dict | None = None) -> float:
    """A baseline's messages/s (``env``: more environment variables)."""
    done = subprocess.run([sys.executable, "-c", program, bootstrap, topic, str(expected)], check=True,
                          capture_output=True, text=True, timeout=1800, env={**os.environ, **(env or {})})
    result = json.loads(done.stdout)
    return result["messages"] / result["seconds"]


class Predictions(threading.Thread):
    """Collects the predictions of an output topic: (input partition, offset) -> (record timestamp s, received s),
    and in ``versions`` the model version each was made with (the examples the model had learned)."""

    def __init__(self, bootstrap: str, topic: str, committed_only: bool = False):
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "isolation.level": "read_committed" if committed_only else "read_uncommitted",
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.subscribe([topic])
        self.seen: dict[tuple[int, int], tuple[float, float]] = {}
        self.versions: dict[tuple[int, int], int] = {}
        self.stop = False
        self.start()

    def run(self):
        while not self.stop:
            # consume() waits its whole timeout unless num_messages arrive: take what is queued,
            # else wait for one message, so that receipt times are not held back.
            messages = self.consumer.consume(num_messages=5000, timeout=0) or \
                self.consumer.consume(num_messages=1, timeout=0.2)
            for message in messages:
                if message.error() is None:
                    received = time.time()
                    for key, version in self._keys(message.value()):
                        self.seen.setdefault(key, (message.timestamp()[1] / 1000, received))
                        self.versions.setdefault(key, version)
        self.consumer.close()

    @staticmethod
    def _keys(value: bytes):
        if value[:1] == b"{":
            prediction = orjson.loads(value)
            yield (prediction["partition"], prediction["offset"]), prediction["model_version"]
        else:  # an Arrow IPC message of many rows
            table = read_stream(value)
            for partition, offset, row, version in zip(table["partition"].to_pylist(), table["offset"].to_pylist(),
                                                       table["row"].to_pylist(), table["model_version"].to_pylist(),
                                                       strict=True):
                yield (partition, offset * 1_000_000 + row), version

    def wait(self, expected: int, timeout: float = 1800) -> None:
        deadline = time.monotonic() + timeout
        while len(self.seen) < expected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(self.seen)} of {expected} predictions arrived")
            time.sleep(0.2)
        self.stop = True
        self.join()


def start_serve(bootstrap: str, topic: str, run: str, client: str | None, extra: list, folder: Path,
                name: str, root: Path = REPO) -> subprocess.Popen:
    """A replica of the group ``run``, writing to ``run``.out, running the code of the checkout ``root``
    with ``client`` (None: no --kafka-client, the default)
    (first on its path: the working directory, then PYTHONPATH). Its predictions are stamped when sent,
    which times it (--output-timestamp now, given in the environment: a version without it ignores it)."""
    command = [sys.executable, "-m", "worker", "serve", "--bootstrap", bootstrap, "--input", topic,
               "--output", f"{run}.out", "--group", run, *(["--kafka-client", client] if client else []),
               "--instance-id", name, *extra]
    return subprocess.Popen(command, stdout=open(folder / f"{name}.log", "ab"), stderr=subprocess.STDOUT,
                            cwd=root, env={**os.environ, "PYTHONPATH": str(root), "NBSTREAM_OUTPUT_TIMESTAMP": "now"})


def stop(processes: list[subprocess.Popen]) -> None:
    """SIGTERM (a replica commits what it holds and leaves), then wait for each to end."""
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait(timeout=120)


def serve_rate(bootstrap, topic, expected, client, extra, folder, replicas=1, root: Path = REPO) -> float:
    """`worker serve`'s messages (or rows) per second, first prediction to last (``root``: the
    checkout whose code it runs)."""
    run = f"{topic}-{uuid.uuid4().hex[:6]}"
    predictions = Predictions(bootstrap, f"{run}.out")
    processes = [start_serve(bootstrap, topic, run, client, extra, folder, f"{run}-{i}", root)
                 for i in range(replicas)]
    try:
        predictions.wait(expected)
    finally:
        stop(processes)
    stamps = np.array([stamp for stamp, _ in predictions.seen.values()])
    first = stamps.min()  # the rows predicted by then were done before the clock started
    return (expected - int((stamps == first).sum())) / (stamps.max() - first)


def sustained(bootstrap: str, counts: list[int], rounds: int, folder: Path) -> None:
    """The confluent reader, relay and `worker serve` on SMS topics of each of ``counts`` messages."""
    topics = {n: create_topic(bootstrap, "bench-sustained") for n in counts}
    for n, topic in topics.items():
        send(bootstrap, topic, sms_messages(n))
    rows = []
    for round_ in range(1, rounds + 1):
        for n, topic in topics.items():
            reader, relay = (run_program(program, bootstrap, topic, n)
                             for program in (CONFLUENT_READER, CONFLUENT_RELAY))
            serve = serve_rate(bootstrap, topic, n, None, SMS_MODEL, folder)
            rows.append([str(round_), f"{n:,}", f"{reader:,.0f}", f"{relay:,.0f}", f"{serve:,.0f}",
                         f"{serve / relay:.2f}x"])
    table(["round", "messages", "confluent read + orjson", "confluent relay", "worker serve", "serve ÷ relay"], rows)


def batch_rate(predictions: Predictions) -> float:
    """Predictions per second from the end of the first polled batch's to the end of the last's, by
    their record timestamps (the first batch is the predictions made with the first one's model version:
    a batch of 10,000 is a large share of a short stream, and its start is not seen)."""
    keys = list(predictions.seen)
    stamps = np.array([predictions.seen[key][0] for key in keys])
    versions = np.array([predictions.versions[key] for key in keys])
    first = versions == versions[np.argmin(stamps)]
    return int((~first).sum()) / (stamps.max() - stamps[first].max())


def latency(bootstrap, client, values, rate, extra, folder) -> tuple[float, float]:
    """(p50, p99) milliseconds from the input's timestamp to a read_committed consumer's receipt."""
    topic = create_topic(bootstrap, "bench-latency")
    predictions = Predictions(bootstrap, f"{topic}.out", committed_only=True)
    process = start_serve(bootstrap, topic, topic, client, extra, folder, topic)
    try:
        time.sleep(8)  # started and assigned
        send(bootstrap, topic, values, rate=rate)
        predictions.wait(len(values), timeout=600)
    finally:
        process.terminate()
        process.wait(timeout=120)
    inputs = input_times(bootstrap, topic, len(values))
    delays = np.array([(received - inputs[key]) * 1000 for key, (_, received) in predictions.seen.items()])
    return float(np.percentile(delays, 50)), float(np.percentile(delays, 99))


def input_times(bootstrap: str, topic: str, expected: int) -> dict[tuple[int, int], float]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    times = {}
    while len(times) < expected:
        for message in consumer.consume(num_messages=5000, timeout=0.5):
            if message.error() is None:
                times[(message.partition(), message.offset())] = message.timestamp()[1] / 1000
    consumer.close()
    return times


def table(header: list[str], rows: list[list]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(flush=True)


def throughput(bootstrap, data_dir, n, folder) -> charts.Record:
    rows, measured = [], {}
    for name, values, model in (("MNIST JSON (784 ints)", mnist_messages(data_dir, n), MNIST_MODEL),
                                ("SMS text JSON", sms_messages(n), SMS_MODEL)):
        topic = create_topic(bootstrap, "bench-json")
        send(bootstrap, topic, values)
        rates = {label: run_program(program, bootstrap, topic, n) for label, program in (
            ("kafka-python", KAFKA_PYTHON_READER), ("kafka-python relay", KAFKA_PYTHON_RELAY),
            ("confluent", CONFLUENT_READER), ("relay", CONFLUENT_RELAY))}
        for client in ("kafka-python", "confluent", None):
            rates[f"serve {client or 'default'}"] = serve_rate(bootstrap, topic, n, client, model, folder)
        kafka_python = rates["serve kafka-python"]
        rows.append([name, *(f"{rates[k]:,.0f}" for k in ("kafka-python", "kafka-python relay", "confluent", "relay")),
                     f"{kafka_python:,.0f} ({kafka_python / rates['kafka-python']:.2f}x its reader, "
                     f"{kafka_python / rates['kafka-python relay']:.2f}x its relay)",
                     f"{rates['serve confluent']:,.0f} ({rates['serve confluent'] / rates['relay']:.2f}x relay)",
                     f"{rates['serve default']:,.0f} ({rates['serve default'] / rates['serve confluent']:.2f}x "
                     f"confluent's)"])
        measured[name] = rates
    print(f"Throughput, messages/s ({n:,} messages per topic, one partition):\n")
    table(["topic", "kafka-python read + orjson", "kafka-python relay", "confluent read + orjson", "confluent relay",
           "worker serve, kafka-python", "worker serve, confluent", "worker serve, no --kafka-client"], rows)
    return throughput_record(measured)


def prequential(bootstrap, data_dir, n, baseline: Path, folder, rounds: int) -> charts.Record:
    """`worker serve` (confluent) of this checkout against the one at ``baseline``, on the same topics,
    ``rounds`` times in turn (baseline, this checkout, baseline, ...): the best of each, and the
    ratio of every round."""
    rows, bests = [], {}
    for name, values, model in (("MNIST JSON (784 ints)", mnist_messages(data_dir, n), MNIST_MODEL),
                                ("SMS text JSON", sms_messages(n), SMS_MODEL)):
        topic = create_topic(bootstrap, "bench-prequential")
        send(bootstrap, topic, values)
        extra = [*model, "--checkpoint-interval", "0.5"]  # today's default, which older versions did not have
        rates = [(serve_rate(bootstrap, topic, len(values), "confluent", extra, folder, root=baseline),
                  serve_rate(bootstrap, topic, len(values), "confluent", extra, folder)) for _ in range(rounds)]
        before, after = max(old for old, _ in rates), max(new for _, new in rates)
        each = ", ".join(f"{new / old:.2f}" for old, new in rates)
        rows.append([name, f"{before:,.0f}", f"{after:,.0f}", f"{after / before:.2f}x", each])
        bests[name] = (before, after)
    print(f"Test-then-train: `worker serve` (confluent, exactly-once) of {baseline} and of this checkout, "
          f"{n:,} messages per topic, one partition, commits every 0.5 s, best of {rounds} rounds:\n")
    table(["topic", "baseline, messages/s", "this checkout, messages/s", "ratio of bests", "ratio per round"], rows)
    return prequential_record(bests, baseline, rounds)


def arrow_messages(data_dir: Path, n: int, rows_per_message: int = 1_000) -> dict[str, list[bytes]]:
    """The MNIST and SMS rows as Arrow IPC messages of ``rows_per_message`` rows (pixels stay uint8)."""
    mnist = load_mnist(data_dir / "mnist")
    images, labels = mnist["train_images"], mnist["train_labels"]
    sms = pq.read_table(REPO / "scripts" / "data" / "sms_spam" / "train.parquet")
    messages = {"MNIST": [], "SMS": []}
    for start in range(0, n, rows_per_message):
        index = np.arange(start, min(n, start + rows_per_message))
        flat = pa.array(images[index % 60_000].reshape(-1))
        pixels = pa.table({"features": pa.FixedSizeListArray.from_arrays(flat, 784), "label": labels[index % 60_000],
                           "id": index})
        messages["MNIST"].append(write_stream(pixels, compression="lz4"))  # as `worker produce --format arrow`
        rows = sms.take(pa.array(index % sms.num_rows))
        messages["SMS"].append(write_stream(pa.table({"text": rows["text"], "label": rows["label"], "id": index}),
                                            compression="lz4"))
    return messages


def in_memory_rate(values: list[bytes], spec, model, rows_per_call: int = 10_000) -> float:
    """Rows/s of the same model in one process: encode, predict_proba, partial_fit, ``rows_per_call``
    rows at a time (the service's poll takes many messages together, too)."""
    rows = pa.concat_tables([read_stream(value) for value in values])
    tables = [rows.slice(start, rows_per_call) for start in range(0, rows.num_rows, rows_per_call)]
    classes = np.unique(np.concatenate([t.column("label").to_numpy() for t in tables]))
    best = float("inf")
    for _ in range(3):  # best of three: a short run in a shared process is noisy
        encoder, fresh = spec.encoder(), copy.deepcopy(model)
        started = time.perf_counter()
        for table in tables:
            batch = table.combine_chunks().to_batches()[0]
            X, _ = encoder.encode(batch, learn=True, counts_only=fresh.requires_non_negative)
            y = table.column("label").to_numpy()
            if fresh.is_fitted:
                fresh.predict_proba(X)
            fresh.partial_fit(X, y, classes=classes)
        best = min(best, time.perf_counter() - started)
    return rows.num_rows / best


def arrow(bootstrap, data_dir, n, folder) -> None:
    import nbstream
    from nbstream.arrow import FeatureSpec

    rows = []
    messages = arrow_messages(data_dir, n)
    for name, spec, model, options in (
            ("MNIST", FeatureSpec.vector("features"), nbstream.BernoulliNB(binarize=127.5), MNIST_MODEL),
            ("SMS", FeatureSpec.text("text"), nbstream.MultinomialNB(), SMS_MODEL)):
        memory = in_memory_rate(messages[name], spec, model)
        topic = create_topic(bootstrap, "bench-arrow")
        send(bootstrap, topic, messages[name])
        # 10 messages (10,000 rows) per poll, as many rows as a JSON poll takes: the predictions
        # then leave in many steps and their timestamps can time the run.
        rates = [serve_rate(bootstrap, topic, n, client, [*options, "--format", "arrow", "--max-poll-records", "10"],
                            folder) for client in ("kafka-python", "confluent")]
        rows.append([f"{name} ({len(messages[name][0]) / 1000:,.0f} KB per message)", f"{memory:,.0f}",
                     *(f"{rate:,.0f} ({rate / memory:.2f}x)" for rate in rates)])
    print(f"--format arrow, rows/s ({n:,} rows per topic in messages of 1,000 rows, one partition, "
          f"--max-poll-records 10):\n")
    table(["rows", "in memory: encode + predict_proba + partial_fit", "worker serve, kafka-python",
           "worker serve, confluent"], rows)


def latencies(bootstrap, data_dir, n_seconds, rate, folder) -> None:
    """At-least-once (predictions visible when sent) with each client, on both models."""
    n = int(n_seconds * rate)
    rows = []
    for name, values, model in (("MNIST JSON, bernoulli (784 features)", mnist_messages(data_dir, n), MNIST_MODEL),
                                ("SMS text JSON, multinomial (2^20 features)", sms_messages(n), SMS_MODEL)):
        for client in ("kafka-python", "confluent"):
            p50, p99 = latency(bootstrap, client, values, rate, [*model, "--guarantee", "at-least-once"], folder)
            rows.append([name, client, f"{p50:,.1f}", f"{p99:,.1f}"])
    print(f"Latency at {rate:,.0f} messages/s for {n_seconds:.0f} s, at-least-once, from the input's timestamp to "
          f"a consumer's receipt of the prediction, ms:\n")
    table(["topic", "client", "p50", "p99"], rows)


def intervals(bootstrap, n, n_seconds, rate, folder) -> None:
    """Exactly-once: predictions become visible at the commit, so the commit interval bounds the
    latency; each commit costs a state record and a transaction, which a short interval pays often."""
    backlog = sms_messages(n)
    topic = create_topic(bootstrap, "bench-interval")
    send(bootstrap, topic, backlog)
    steady = sms_messages(int(n_seconds * rate))
    rows = []
    for interval in (0.1, 0.5, 1.0, 5.0):
        extra = [*SMS_MODEL, "--checkpoint-interval", str(interval)]
        throughput = serve_rate(bootstrap, topic, n, "confluent", extra, folder)
        p50, p99 = latency(bootstrap, "confluent", steady, rate, extra, folder)
        rows.append([f"{interval:g} s", f"{throughput:,.0f}", f"{p50:,.0f}", f"{p99:,.0f}"])
    print(f"Exactly-once commit interval (SMS text JSON, confluent): messages/s on a backlog of {n:,}, and "
          f"latency in ms at {rate:,.0f} messages/s to a read_committed consumer:\n")
    table(["commit interval", "backlog, messages/s", "p50", "p99"], rows)


def replicas(bootstrap, n, folder) -> None:
    values = sms_messages(n)
    topic = create_topic(bootstrap, "bench-replicas", partitions=4)
    send(bootstrap, topic, values, partitions=4)
    rows = []
    for guarantee in ("exactly-once", "at-least-once"):
        rates = [serve_rate(bootstrap, topic, n, "confluent", [*SMS_MODEL, "--guarantee", guarantee], folder,
                            replicas=count) for count in (1, 2)]
        rows.append([guarantee, f"{rates[0]:,.0f}", f"{rates[1]:,.0f} ({rates[1] / rates[0]:.2f}x)"])
    print(f"Replicas, SMS text JSON messages/s ({n:,} messages, 4 partitions, confluent client, "
          f"each replica its own process on the same machine):\n")
    table(["guarantee", "1 replica", "2 replicas"], rows)


class Replica:
    """A `worker serve` process with its /metrics endpoint."""

    def __init__(self, bootstrap: str, topic: str, run: str, folder: Path, name: str, root: Path = REPO,
                 extra: tuple[str, ...] = (), model: tuple[str, ...] = tuple(SMS_MODEL)):
        self.port = free_port()
        self.process = start_serve(bootstrap, topic, run, "confluent",
                                   [*model, *extra, "--metrics-port", str(self.port)], folder, name, root)

    def memory(self) -> tuple[float, float]:
        """(peak, current) resident MiB: VmHWM and VmRSS of /proc/PID/status."""
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines())
        return tuple(int(fields[name].split()[0]) * 1024 / MIB for name in ("VmHWM", "VmRSS"))

    def metrics(self) -> dict[str, float]:
        """Every unlabeled sample of /metrics by name (nbstream_checkpoints_total, say); {} until it answers."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as reply:
                text = reply.read().decode()
        except OSError:
            return {}
        return {sample.name: sample.value for family in text_string_to_metric_families(text)
                for sample in family.samples if not sample.labels}


def wait_for(condition, what: str, timeout: float = 120, step: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(step)


def summed(replicas: list[Replica], name: str) -> float:
    return sum(replica.metrics().get(name, 0.0) for replica in replicas)


def merge_ms(samples: list[dict[str, float]]) -> str:
    """The mean merge of the global model in ms and the number of merges, over some replicas' metrics;
    "-" for code without the metric."""
    if not all("nbstream_global_model_merge_seconds_count" in sample for sample in samples):
        return "-"
    count = sum(sample["nbstream_global_model_merge_seconds_count"] for sample in samples)
    total = sum(sample["nbstream_global_model_merge_seconds_sum"] for sample in samples)
    return f"{total / count * 1000:,.1f} ({count:.0f})" if count else "none"


def shared(replicas: list[Replica], partitions: int) -> bool:
    """Whether every replica has joined the group and the partitions are shared among as many as can own one."""
    samples = [replica.metrics() for replica in replicas]
    if not all(sample.get("nbstream_kafka_sessions_total", 0) >= 1 for sample in samples):
        return False
    owned = [sample.get("nbstream_assigned_partitions", 0) for sample in samples]
    return sum(owned) == partitions and sum(count > 0 for count in owned) == min(len(replicas), partitions)


def partitions_run(bootstrap, values, partitions, replicas, root, folder) -> tuple[list[str], tuple[float, float]]:
    """One row of the partitions table, and its (largest peak RSS MiB, predictions/s): ``replicas``
    replicas, once they share the ``partitions`` partitions, serve ``values`` sent round-robin over
    them; then one replica restores them all."""
    topic = create_topic(bootstrap, "bench-partitions", partitions)
    run = f"{topic}-{uuid.uuid4().hex[:6]}"
    predictions = Predictions(bootstrap, f"{run}.out")
    serving = [Replica(bootstrap, topic, run, folder, f"{run}-{i}", root) for i in range(replicas)]
    try:
        wait_for(lambda: shared(serving, partitions), "the assignment")
        send(bootstrap, topic, values, partitions=partitions)
        predictions.wait(len(values))
        memory = [replica.memory() for replica in serving]
        wait_for(lambda: summed(serving, "nbstream_predictions_total") >= len(values), "the last commit")
        samples = [replica.metrics() for replica in serving]
    finally:
        stop([replica.process for replica in serving])
    rate = batch_rate(predictions)
    commits = sum(sample["nbstream_checkpoints_total"] for sample in samples)
    state_bytes = sum(sample["nbstream_state_written_bytes_total"] for sample in samples)
    if replicas > 1:
        time.sleep(SESSION_TIMEOUT + 1)  # the others' static memberships end: the group is empty
    restart = restored(bootstrap, topic, run, values[:partitions], len(values), root, folder)
    return ([f"{partitions}", f"{replicas}", " / ".join(f"{peak:,.0f}" for peak, _ in memory),
             " / ".join(f"{current:,.0f}" for _, current in memory), f"{rate:,.0f}",
             f"{state_bytes / commits / 1024:,.0f} ({commits:.0f})", merge_ms(samples), *restart],
            (max(peak for peak, _ in memory), rate))


def sms_served(bootstrap, topic, n, extra, folder) -> tuple[float, tuple[float, float], str]:
    """One replica serving the ``n`` SMS messages of ``topic`` with the ``extra`` options: its
    predictions/s, its (peak, current) resident MiB once the last prediction is read, and the
    state KiB it wrote per commit (commits)."""
    run = f"{topic}-{uuid.uuid4().hex[:6]}"
    predictions = Predictions(bootstrap, f"{run}.out")
    replica = Replica(bootstrap, topic, run, folder, run, extra=extra)
    try:
        predictions.wait(n)
        memory = replica.memory()
        wait_for(lambda: replica.metrics().get("nbstream_predictions_total", 0) >= n, "the last commit")
        sample = replica.metrics()
    finally:
        stop([replica.process])
    commits = sample["nbstream_checkpoints_total"]
    return (batch_rate(predictions), memory,
            f"{sample['nbstream_state_written_bytes_total'] / commits / 1024:,.0f} ({commits:.0f})")


def windows(bootstrap, n, folder) -> None:
    """SMS served with no window and with two windows: predictions/s and the state written per commit."""
    topic = create_topic(bootstrap, "bench-window")
    send(bootstrap, topic, sms_messages(n))
    rows = []
    for extra in ((), ("--window", "10000"), ("--window", "100000")):
        rate, _, state = sms_served(bootstrap, topic, n, extra, folder)
        rows.append([" ".join(extra) or "none", f"{rate:,.0f}", state])
    print(f"Windows: SMS text JSON served exactly-once (confluent, multinomial on 2^20 hashed words, "
          f"window_buckets 10), {n:,} messages, one partition:\n")
    table(["window", "predictions/s", "state KiB per commit (commits)"], rows)


def challengers(bootstrap, n, folder) -> charts.Record:
    """SMS served with 0, 1 and 3 challengers: predictions/s, memory and the state written per commit."""
    topic = create_topic(bootstrap, "bench-challengers")
    send(bootstrap, topic, sms_messages(n))
    rows, served = [], {}
    for count in (0, 1, 3):
        extra = tuple(option for spec in CHALLENGERS[:count] for option in ("--challenger", spec))
        rate, (peak, current), state = sms_served(bootstrap, topic, n, extra, folder)
        rows.append([f"{count}", ", ".join(spec.split("=")[0] for spec in CHALLENGERS[:count]) or "-",
                     f"{rate:,.0f}", f"{peak:,.0f}", f"{current:,.0f}", state])
        served[count] = (rate, peak)
    print(f"Challengers: SMS text JSON served exactly-once (confluent, multinomial on 2^20 hashed words) with "
          f"challengers {', '.join(CHALLENGERS)}, {n:,} messages, one partition:\n")
    table(["challengers", "names", "predictions/s", "peak MiB", "current MiB", "state KiB per commit (commits)"], rows)
    return challengers_record(served)


def restored(bootstrap, topic, run, probes, sent, root, folder) -> list[str]:
    """One replica started on the group ``run`` after its stream, in the place of its first one: the
    seconds from its launch until it owns every partition, its nbstream_restore_seconds, its first merge
    of their states (the ``probes``, one message for each partition, make it predict) and its peak and
    current MiB then."""
    predictions = Predictions(bootstrap, f"{run}.out")
    launched = time.monotonic()
    replica = Replica(bootstrap, topic, run, folder, f"{run}-0", root)  # the first replica's static membership
    try:
        wait_for(lambda: replica.metrics().get("nbstream_assigned_partitions") == len(probes), "the assignment",
                 step=0.1)
        assigned = time.monotonic() - launched
        send(bootstrap, topic, probes, partitions=len(probes))
        predictions.wait(sent + len(probes))
        sample, (peak, current) = replica.metrics(), replica.memory()
    finally:
        stop([replica.process])
    return [f"{assigned:.1f}", f"{sample['nbstream_restore_seconds']:.2f}", merge_ms([sample]),
            f"{peak:,.0f} / {current:,.0f}"]


def partitions(bootstrap, n, counts, replica_counts, root, folder) -> charts.Record:
    values = sms_messages(n)
    runs = {(count, replicas): partitions_run(bootstrap, values, count, replicas, root, folder)
            for replicas in replica_counts for count in counts}
    rows = [row for row, _ in runs.values()]
    print(f"Partitions: SMS text JSON, {n:,} messages round-robin over the input's partitions, `worker serve "
          f"{' '.join(SMS_MODEL)}` (2^20 hashed features, 2 classes), exactly-once, confluent client, the code of "
          f"{root}. Memory of each replica once the last prediction is read; merge: mean ms (merges); "
          "restart: one replica started again on the group, restoring every partition:\n")
    table(["partitions", "replicas", "peak RSS, MiB", "RSS, MiB", "predictions/s", "state KiB per commit (commits)",
           "merge in the stream, ms", "restart: launch to owning all, s", "restart: restore, s", "restart: merge, ms",
           "restart: peak / RSS, MiB"], rows)
    return partitions_record({shape: figures for shape, (_, figures) in runs.items()}, root)


def learned_rate(bootstrap: str, topic: str, n: int, model: list[str], extra: list[str], folder: Path) -> float:
    """Examples learned per second by one replica: first prediction to the last example's commit."""
    run = f"{topic}-{uuid.uuid4().hex[:6]}"
    predictions = Predictions(bootstrap, f"{run}.out")
    replica = Replica(bootstrap, topic, run, folder, run, extra=tuple(extra), model=tuple(model))
    try:
        wait_for(lambda: replica.metrics().get("nbstream_examples_learned_total", 0) >= n, "the last example learned",
                 timeout=900, step=0.05)
        finished = time.time()
        predictions.wait(n)
    finally:
        stop([replica.process])
    return n / (finished - min(stamp for stamp, _ in predictions.seen.values()))


def delayed_labels(bootstrap, data_dir, n, folder) -> charts.Record:
    """The same rows served with their labels inline and on a labels topic: examples learned per second."""
    rows, learned = [], {}
    for name, values, model in (("MNIST JSON, Bernoulli", mnist_messages(data_dir, n), MNIST_MODEL),
                                ("SMS text JSON, multinomial", sms_messages(n), SMS_MODEL)):
        inline, unlabeled, labels = (create_topic(bootstrap, f"bench-labels-{kind}")
                                     for kind in ("inline", "unlabeled", "events"))
        messages = [orjson.loads(value) for value in values]
        send(bootstrap, inline, values)
        send(bootstrap, unlabeled, [orjson.dumps({k: v for k, v in m.items() if k != "label"}) for m in messages])
        send(bootstrap, labels, [orjson.dumps({"id": m["id"], "label": m["label"]}) for m in messages])
        del messages
        together = learned_rate(bootstrap, inline, n, model, [], folder)
        apart = learned_rate(bootstrap, unlabeled, n, model, ["--labels-topic", labels, "--max-pending", str(n)],
                             folder)
        rows.append([name, f"{together:,.0f}", f"{apart:,.0f}", f"{apart / together:.2f}x"])
        learned[name] = (together, apart)
    print(f"Labels inline and on a labels topic, examples learned/s ({n:,} messages, one partition, "
          f"exactly-once, confluent):\n")
    table(["topic", "labels inline", "labels on a labels topic", "ratio"], rows)
    return labels_record(learned)


def mnist_table(data_dir: Path, n: int) -> pa.Table:
    """The rows of mnist_messages as columns: id, features (784 ints), label."""
    mnist = load_mnist(data_dir / "mnist")
    rows = np.arange(n) % 60_000
    pixels = pa.array(mnist["train_images"][rows].reshape(-1).astype(np.int32))
    features = pa.ListArray.from_arrays(pa.array(np.arange(0, (n + 1) * 784, 784, dtype=np.int32)), pixels)
    return pa.table({"id": np.arange(n), "features": features, "label": mnist["train_labels"][rows].astype(np.int64)})


def sms_table(n: int) -> pa.Table:
    """The rows of sms_messages as columns: id, text, label."""
    return pa.Table.from_pylist([orjson.loads(value) for value in sms_messages(n)])


def framed_records(url: str, message_format: str, topic: str, rows: pa.Table) -> list[bytes]:
    """The rows as records of ``message_format`` in the wire format, as `worker produce` writes them."""
    from worker.io.registry.client import RegistryClient
    from worker.io.registry.settings import RegistrySettings
    from worker.tools.produce import writer_class

    writer = writer_class(message_format).registered(RegistryClient(RegistrySettings(url=url)), f"{topic}-value",
                                                     rows.schema)
    return [value for batch in rows.to_batches(10_000) for value in writer.values(pa.Table.from_batches([batch]))]


@contextmanager
def schema_registry(url: str | None, folder: Path):
    """The registry at ``url``, else a local one (scripts/schema_registry.py), stopped at the end."""
    if url:
        yield url
        return
    from scripts.schema_registry import Registry

    registry = Registry(folder / "registry").start()
    try:
        yield registry.url
    finally:
        registry.stop()


def registry_formats(bootstrap, data_dir, n, folder, registry_url) -> charts.Record:
    """The same rows served as JSON and as records of each registry format, and relayed through AvroDeserializer."""
    rows, measured = [], {}
    with schema_registry(registry_url, folder) as url:
        for name, values, columns, model in (("MNIST, Bernoulli", mnist_messages(data_dir, n), mnist_table(data_dir, n),
                                              MNIST_MODEL),
                                             ("SMS text, multinomial", sms_messages(n), sms_table(n), SMS_MODEL)):
            rates = {}
            topic = create_topic(bootstrap, "bench-registry-json")
            send(bootstrap, topic, values)
            rates["json"] = serve_rate(bootstrap, topic, n, "confluent", model, folder)
            for message_format in ("avro", "json-schema", "protobuf"):
                topic = create_topic(bootstrap, f"bench-registry-{message_format}")
                send(bootstrap, topic, framed_records(url, message_format, topic, columns))
                rates[message_format] = serve_rate(bootstrap, topic, n, "confluent", [
                    *model, "--format", message_format, "--schema-registry", url], folder)
                if message_format == "avro":
                    rates["relay"] = run_program(AVRO_RELAY, bootstrap, topic, n, {"NBSTREAM_BENCH_REGISTRY": url})
            rows.append([name, f"{rates['json']:,.0f}",
                         *(f"{rates[f]:,.0f} ({rates[f] / rates['json']:.2f}x)" for f in ("avro", "json-schema",
                                                                                        "protobuf")),
                         f"{rates['relay']:,.0f}", f"{rates['avro'] / rates['relay']:.2f}x"])
            measured[name] = rates
    print(f"Schema Registry formats, worker serve messages/s ({n:,} messages per topic, one partition, exactly-once, "
          f"confluent; ratios to JSON):\n")
    table(["rows", "JSON", "Avro", "JSON Schema", "Protobuf", "AvroDeserializer relay", "serve Avro / relay"], rows)
    return registry_record(measured)


# ---- figure records (--record): the numbers of the tables above, for scripts/bench/charts.py --------------
def throughput_record(measured: dict[str, dict[str, float]]) -> charts.Record:
    """messages/s of `worker serve` with each client and of each reader and relay, on each topic."""
    series = {"worker serve, confluent": "serve confluent", "worker serve, kafka-python": "serve kafka-python",
              "worker serve, no --kafka-client": "serve default", "confluent relay": "relay",
              "confluent read + orjson": "confluent", "kafka-python relay": "kafka-python relay",
              "kafka-python read + orjson": "kafka-python"}
    return {"title": "worker serve against bare readers and relays: messages/s, one partition", "unit": "msg/s",
            "groups": list(measured),
            "series": {name: [round(rates[key]) for rates in measured.values()] for name, key in series.items()},
            "nbstream": [name for name in series if name.startswith("worker serve")], "note": charts.command_line()}


def prequential_record(bests: dict[str, tuple[float, float]], baseline: Path, rounds: int) -> charts.Record:
    """The best messages/s of this checkout's `worker serve` and of the baseline's, on each topic."""
    before = f"{checkout_name(baseline)} (--baseline-root)"
    return {"title": f"worker serve, test-then-train, against {before}: messages/s, best of {rounds} rounds",
            "unit": "msg/s", "groups": list(bests),
            "series": {"nbstream": [round(after) for _, after in bests.values()],
                       before: [round(old) for old, _ in bests.values()]},
            "previous": [before], "note": charts.command_line()}


def labels_record(learned: dict[str, tuple[float, float]]) -> charts.Record:
    """Examples learned per second with the labels on a labels topic and inline, on each topic."""
    return {"title": "Labels inline and on a labels topic: examples learned per second", "unit": "examples/s",
            "groups": list(learned),
            "series": {"labels on a labels topic": [round(apart) for _, apart in learned.values()],
                       "labels inline": [round(together) for together, _ in learned.values()]},
            "nbstream": ["labels on a labels topic"], "note": charts.command_line()}


def challengers_record(served: dict[int, tuple[float, float]]) -> charts.Record:
    """predictions/s and peak resident memory with each number of challengers."""
    def group(count: int) -> str:
        names = ", ".join(spec.split("=")[0] for spec in CHALLENGERS[:count])
        return f"{count} challenger{'s' if count > 1 else ''} ({names})" if count else "no challenger"

    return {"title": "Challengers judged on every message", "groups": [group(count) for count in served],
            "panels": [{"title": "predictions/s", "unit": "predictions/s",
                        "series": {"worker serve": [round(rate) for rate, _ in served.values()]}},
                       {"title": "peak RSS, MiB", "unit": "MiB",
                        "series": {"worker serve": [round(peak) for _, peak in served.values()]}}],
            "nbstream": ["worker serve"], "note": charts.command_line()}


def registry_record(measured: dict[str, dict[str, float]]) -> charts.Record:
    """messages/s of `worker serve` on each format and of the AvroDeserializer relay, on each topic."""
    series = {"JSON": "json", "Avro": "avro", "JSON Schema": "json-schema", "Protobuf": "protobuf",
              "relay through AvroDeserializer (learns nothing)": "relay"}
    return {"title": "worker serve on Schema Registry records: messages/s, one partition", "unit": "msg/s",
            "groups": list(measured),
            "series": {name: [round(rates[key]) for rates in measured.values()] for name, key in series.items()},
            "nbstream": ["JSON", "Avro", "JSON Schema", "Protobuf"], "note": charts.command_line()}


def partitions_record(figures: dict[tuple[int, int], tuple[float, float]], root: Path) -> charts.Record:
    """The largest replica's peak RSS and the predictions/s of each (partitions, replicas) run of the
    checkout ``root``: nbstream's own, or an earlier version's (--worker-root)."""
    name, role = ("nbstream", "nbstream") if root == REPO else (f"{checkout_name(root)} (--worker-root)", "previous")
    return {"title": "Partitions served: peak memory and predictions/s",
            "groups": [f"{count} partition{'s' if count > 1 else ''}, {replicas} replica{'s' if replicas > 1 else ''}"
                       for count, replicas in figures],
            "panels": [{"title": "peak RSS of the largest replica, MiB", "unit": "MiB",
                        "series": {name: [round(peak) for peak, _ in figures.values()]}},
                       {"title": "predictions/s", "unit": "predictions/s",
                        "series": {name: [round(rate) for _, rate in figures.values()]}}],
            role: [name], "note": charts.command_line()}


def recorder(parser: argparse.ArgumentParser, given: Path | None, sections: list[str]) -> Callable:
    """recorded(section, record): the section's figure record written, and its chart drawn, where
    ``--record given`` says (nothing without it); one NAME.json for several charted sections is refused."""
    if given and given.suffix == ".json" and len(set(sections) & set(FIGURES)) > 1:
        parser.error(f"--record {given} takes one section's figure (--only); a folder takes several")

    def recorded(section: str, record: charts.Record) -> None:
        if given:
            charts.publish(record, charts.record_file(given, FIGURES[section]))

    return recorded


def checkout_name(root: Path) -> str:
    """The short commit of the checkout at ``root`` (its folder's name where git cannot tell)."""
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else root.name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--bootstrap", help="an existing broker (default: start a local one)")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--sustained", default="100000,400000", help="SMS message counts (sustained section)")
    parser.add_argument("--rate", type=float, default=1_000.0, help="messages/s for the latency runs")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each latency run")
    parser.add_argument("--partitions", default="1,8,24,48,96", help="input partition counts (partitions section)")
    parser.add_argument("--replicas", default="1,3", help="replica counts (partitions section)")
    parser.add_argument("--worker-root", type=Path, default=REPO,
                        help="the checkout whose code the serve processes run (partitions section)")
    parser.add_argument("--baseline-root", type=Path,
                        help="the checkout `worker serve` is compared with (prequential section)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of the prequential (best of each kept) and sustained sections")
    parser.add_argument("--schema-registry", help="an existing registry's URL (registry section; default: start one)")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"some of {','.join(SECTIONS)}")
    charts.add_record_option(parser)
    args = parser.parse_args()
    sections = args.only.split(",")
    recorded = recorder(parser, args.record, sections)
    with broker(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory() as folder:
        run_sections(args, sections, recorded, bootstrap, Path(folder))


def run_sections(args: argparse.Namespace, sections: list[str], recorded: Callable, bootstrap: str,
                 folder: Path) -> None:
    """Each of ``sections`` on the broker at ``bootstrap``, in this order."""
    n = args.messages
    runs: dict[str, Callable[[], object]] = {
        "throughput": lambda: recorded("throughput", throughput(bootstrap, args.data_dir, n, folder)),
        "sustained": lambda: sustained(bootstrap, numbers(args.sustained), args.rounds, folder),
        "arrow": lambda: arrow(bootstrap, args.data_dir, n, folder),
        "latency": lambda: latencies(bootstrap, args.data_dir, args.seconds, args.rate, folder),
        "replicas": lambda: replicas(bootstrap, n, folder),
        "interval": lambda: intervals(bootstrap, n, args.seconds, args.rate, folder),
        "prequential": lambda: args.baseline_root and recorded("prequential", prequential(
            bootstrap, args.data_dir, n, args.baseline_root.resolve(), folder, args.rounds)),
        "window": lambda: windows(bootstrap, n, folder),
        "challengers": lambda: recorded("challengers", challengers(bootstrap, n, folder)),
        "labels": lambda: recorded("labels", delayed_labels(bootstrap, args.data_dir, n, folder)),
        "registry": lambda: recorded("registry", registry_formats(bootstrap, args.data_dir, n, folder,
                                                                  args.schema_registry)),
        "partitions": lambda: recorded("partitions", partitions(bootstrap, n, numbers(args.partitions),
                                                                numbers(args.replicas), args.worker_root.resolve(),
                                                                folder)),
    }
    for name, run in runs.items():
        if name in sections:
            run()


def numbers(text: str) -> list[int]:
    """1,8,24 -> [1, 8, 24]"""
    return [int(part) for part in text.split(",")]


if __name__ == "__main__":
    main()
