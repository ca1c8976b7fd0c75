"""A model per key on a real broker: `worker serve --model-key key` beside the same service without
keys, on SMS texts keyed by users with a few messages each.

    python scripts/bench_keyed.py [--bootstrap HOST:PORT] [--keys 100000] [--per-key 3] [--bounded-keys 10000]

Prints, in one run:

- throughput: predictions/s of the keyed service and of the unkeyed one on the same messages
  (one replica, exactly-once, the default client), and their ratio;
- scale: the keys grow phase by phase (each phase's messages are of new keys), committed every
  2,000 messages; after each phase, the keys held, the mean commit time (nbstream_commit_seconds,
  over that phase's commits), and the replica's resident memory per key beyond its start;
- takeover: the replica killed (-9) once it holds every key, and started again: seconds from its
  start to the prediction of a message sent then (its partition's keys read again from the state
  topic on the way), and the committed predictions counted: one per message sent, none twice;
- bounded: --max-keys at a tenth of the keys against no bound, on the same messages, committed
  every 1,000 messages, keys drawn skewed (Zipf, s=1.1: a few keys are most of the messages) and
  in turn (every message's key the least recently used: each is read back), with predictions/s,
  keys out of memory at the end and resident memory.

Without --bootstrap a broker is started from the Kafka jars (scripts/kafka_broker.py). --record PATH
writes the figure record of the throughput table (PATH, or PATH/model-per-key.json for a folder) and
draws its chart.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_kafka import Predictions, broker, create_topic, send, start_serve, stop, table  # noqa: E402

from scripts.bench import charts  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SMS = ["--text-features", "--model", "multinomial"]
KEYED = [*SMS, "--model-key", "key", "--key-prior-weight", "10"]


def sms_rows() -> list[dict]:
    return pq.read_table(REPO / "scripts" / "data" / "sms_spam" / "train.parquet").to_pylist()


def send_keyed(bootstrap: str, topic: str, rows: list[dict], first: int, n: int, keys: int, key_offset: int) -> None:
    """Messages first..first+n of the SMS texts (cycled), message i keyed by user (i % keys) + key_offset."""
    values = [orjson.dumps({"id": i, "text": rows[i % len(rows)]["text"], "label": rows[i % len(rows)]["label"]})
              for i in range(first, first + n)]
    send(bootstrap, topic, values, keys=[f"user-{key_offset + i % keys}".encode() for i in range(n)])


def metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rate(predictions: Predictions, expected: int) -> float:
    predictions.wait(expected)
    stamps = sorted(stamp for stamp, _ in predictions.seen.values())
    first = stamps[0]
    done = sum(1 for stamp in stamps if stamp == first)
    return (expected - done) / (stamps[-1] - first)


def send_messages(bootstrap: str, topic: str, rows: list[dict], users: list[int]) -> None:
    """One message per user number given, the SMS texts in turn."""
    values = [orjson.dumps({"id": i, "text": rows[i % len(rows)]["text"], "label": rows[i % len(rows)]["label"]})
              for i in range(len(users))]
    send(bootstrap, topic, values, keys=[f"user-{user}".encode() for user in users])


def bounded(bootstrap: str, rows: list[dict], n_keys: int, folder: Path) -> None:
    rng = np.random.default_rng(7)
    patterns = {"skewed (Zipf 1.1)": (rng.zipf(1.1, 5 * n_keys) - 1) % n_keys,
                "in turn (each read back)": np.arange(3 * n_keys) % n_keys}
    lines = []
    for pattern, users in patterns.items():
        topic = create_topic(bootstrap, "keyed-bounded")
        send_messages(bootstrap, topic, rows, users.tolist())
        for bound in (None, n_keys // 10):
            run = f"{topic}-{uuid.uuid4().hex[:6]}"
            port = free_port()
            extra = [*KEYED, "--metrics-port", str(port), "--checkpoint-every", "1000",  # (keys leave at commits)
                     *(["--max-keys", str(bound)] if bound else [])]
            predictions = Predictions(bootstrap, f"{run}.out")
            process = start_serve(bootstrap, topic, run, None, extra, folder, run)
            try:
                value = rate(predictions, len(users))
                time.sleep(2)
                evicted = metrics(port).get('nbstream_keys{state="evicted"}', 0)
                lines.append([pattern, f"{len(set(users.tolist())):,}", "none" if bound is None else f"{bound:,}",
                              f"{value:,.0f}", f"{evicted:,.0f}",
                              f"{rss_bytes(process.pid) / (1 << 20):,.0f}"])
            finally:
                stop([process])
    table(["keys drawn", "keys", "--max-keys", "predictions/s", "out of memory at the end", "resident MiB"], lines)


def throughput(bootstrap: str, rows: list[dict], n: int, per_key: int, folder: Path) -> charts.Record:
    topic = create_topic(bootstrap, "keyed-throughput")
    send_keyed(bootstrap, topic, rows, 0, n, n // per_key, 0)
    results = []
    for name, extra in (("unkeyed", SMS), ("--model-key key", KEYED)):
        run = f"{topic}-{uuid.uuid4().hex[:6]}"
        predictions = Predictions(bootstrap, f"{run}.out")
        process = start_serve(bootstrap, topic, run, None, extra, folder, run)
        try:
            results.append((name, rate(predictions, n)))
        finally:
            stop([process])
    base = results[0][1]
    table(["service", "predictions/s", "of unkeyed"], [[name, f"{value:,.0f}", f"{value / base:.2f}x"]
                                                       for name, value in results])
    return throughput_record(dict(results), n // per_key, per_key)


def throughput_record(rates: dict[str, float], users: int, per_key: int) -> charts.Record:
    """The figure record of the throughput table: predictions/s of the keyed service and the unkeyed one."""
    return {"title": "A model per key against one model: predictions/s", "unit": "predictions/s",
            "groups": [f"SMS text JSON, {users:,} users of {per_key} messages"],
            "series": {"worker serve --model-key key": [round(rates["--model-key key"])],
                       "worker serve, unkeyed": [round(rates["unkeyed"])]},
            "nbstream": ["worker serve --model-key key"], "note": charts.command_line()}


def committed_predictions(bootstrap: str, topic: str) -> tuple[int, int]:
    """(predictions, distinct input (partition, offset) they answer) a read_committed reader finds in
    ``topic``, read until it has been quiet for 5 s."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    total, answered, quiet = 0, set(), time.monotonic()
    while time.monotonic() - quiet < 5:
        for message in consumer.consume(num_messages=10_000, timeout=0.5):
            if message.error() is None:
                prediction = orjson.loads(message.value())
                total += 1
                answered.add((prediction["partition"], prediction["offset"]))
                quiet = time.monotonic()
    consumer.close()
    return total, len(answered)


def scale(bootstrap: str, rows: list[dict], phases: list[int], per_key: int, folder: Path) -> None:
    topic = create_topic(bootstrap, "keyed-scale")
    run = f"{topic}-{uuid.uuid4().hex[:6]}"
    port = free_port()
    extra = [*KEYED, "--metrics-port", str(port), "--checkpoint-every", "2000"]  # commits of a few thousand keys
    predictions = Predictions(bootstrap, f"{run}.out")
    process = start_serve(bootstrap, topic, run, None, extra, folder, run)
    time.sleep(8)
    baseline = rss_bytes(process.pid)
    sent, keys, lines = 0, 0, []
    try:
        for target in phases:
            new = target - keys
            before = metrics(port)
            send_keyed(bootstrap, topic, rows, sent, new * per_key, new, keys)
            sent, keys = sent + new * per_key, target
            while len(predictions.seen) < sent:
                time.sleep(0.5)
            time.sleep(2)  # the last commit of the phase
            after = metrics(port)
            commits = after["nbstream_commit_seconds_count"] - before.get("nbstream_commit_seconds_count", 0)
            seconds = after["nbstream_commit_seconds_sum"] - before.get("nbstream_commit_seconds_sum", 0)
            memory = rss_bytes(process.pid) - baseline
            lines.append([f"{target:,}", f"{int(commits):,}", f"{1000 * seconds / max(commits, 1):.1f}",
                          f"{memory / (1 << 20):,.0f}", f"{memory / target:,.0f}"])
        process.kill()
        process.wait()
        started = time.monotonic()
        process = start_serve(bootstrap, topic, run, None, extra, folder, run)
        send_keyed(bootstrap, topic, rows, sent, 1, 1, 0)
        while len(predictions.seen) < sent + 1:
            time.sleep(0.05)
        takeover = time.monotonic() - started
    finally:
        predictions.stop = True
        stop([process])
    total, answered = committed_predictions(bootstrap, f"{run}.out")
    table(["keys", "commits", "commit ms (mean)", "memory MiB beyond no key", "bytes per key"], lines)
    print(f"\ntakeover: {takeover:.1f} s from a start to the first prediction, with {phases[-1]:,} keys to read again")
    print(f"committed predictions: {total:,} of {answered:,} distinct messages; {sent + 1:,} sent "
          f"({'none lost, none twice' if total == answered == sent + 1 else 'LOST OR DOUBLED'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap")
    parser.add_argument("--messages", type=int, default=200_000, help="for the throughput table")
    parser.add_argument("--per-key", type=int, default=3)
    parser.add_argument("--keys", type=int, default=100_000, help="the most keys of the scale table")
    parser.add_argument("--bounded-keys", type=int, default=10_000, help="the keys of the bounded table")
    parser.add_argument("--only", choices=("throughput", "scale", "bounded"))
    charts.add_record_option(parser)
    args = parser.parse_args()
    rows = sms_rows()
    phases = [k for k in (1_000, 10_000, 100_000, 1_000_000) if k <= args.keys]
    with broker(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory() as folder:
        os.environ.setdefault("NBSTREAM_LOG_LEVEL", "warning")
        if args.only in (None, "throughput"):
            record = throughput(bootstrap, rows, args.messages, args.per_key, Path(folder))
            if args.record:
                charts.publish(record, charts.record_file(args.record, "model-per-key"))
        if args.only in (None, "scale"):
            scale(bootstrap, rows, phases, args.per_key, Path(folder))
        if args.only in (None, "bounded"):
            bounded(bootstrap, rows, args.bounded_keys, Path(folder))


if __name__ == "__main__":
    main()
