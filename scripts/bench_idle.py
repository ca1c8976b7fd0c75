"""What a replica costs while it waits: CPU of `worker serve` with its broker gone, and of one whose
dependencies stall, and how long a stop then takes.

For each Kafka client: a local broker (scripts/kafka_broker.py), a topic of --partitions
partitions, `worker serve` started and ready; with --learn N, N labeled SMS messages (text,
multinomial) spread over the partitions and learned, the broker killed (-9) as soon as they are,
with a commit still to come (the replica as it runs: a trained model and state to write), else
the broker killed at once. After --settle seconds the replica's CPU time (user + system,
/proc/PID/stat) is measured over --seconds, and its /readyz read (503 expected: alive, not
ready). Then SIGTERM, and the seconds until it exits.

    python scripts/bench_idle.py [--partitions 24] [--learn 2000] [--seconds 60] [--clients kafka-python,confluent]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.kafka_broker import Broker  # noqa: E402
from scripts.local_process import free_port  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def status(url: str) -> int:
    try:
        return urllib.request.urlopen(url, timeout=5).status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def learned(url: str) -> float:
    """The examples the replica has learned (nbstream_examples_seen), 0 before it says."""
    try:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
    except OSError:
        return 0.0
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith("nbstream_examples_seen ")),
                0.0)


def send_sms(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    """n labeled SMS messages of the training split, round-robin over the partitions."""
    import orjson
    import pyarrow.parquet as pq
    from kafka import KafkaProducer

    rows = pq.read_table(REPO / "scripts" / "data" / "sms_spam" / "train.parquet").to_pylist()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(n):
        row = rows[i % len(rows)]
        producer.send(topic, orjson.dumps({"id": i, "text": row["text"], "label": row["label"]}),
                      partition=i % partitions)
    producer.flush()
    producer.close()


def measure(client: str, partitions: int, learn: int, settle: float, seconds: float,
            folder: Path) -> dict[str, float]:
    broker = Broker(folder / f"broker-{client}").start()
    topic = f"idle-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions)
    port = free_port()
    command = [sys.executable, "-m", "worker", "serve", "--bootstrap", broker.bootstrap, "--kafka-client", client,
               "--input", topic, "--output", f"{topic}.out", "--group", f"g-{topic}", "--metrics-port", str(port)]
    if learn:
        command += ["--text-features", "--model", "multinomial", "--checkpoint-interval", "30"]
    with open(folder / f"serve-{client}.log", "wb") as log:
        serve = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 120
        while status(f"http://127.0.0.1:{port}/readyz") != 200:
            if time.monotonic() > deadline or serve.poll() is not None:
                raise RuntimeError(f"{client}: the replica did not become ready (see {folder})")
            time.sleep(0.5)
        if learn:
            send_sms(broker.bootstrap, topic, learn, partitions)
            while learned(f"http://127.0.0.1:{port}/metrics") < learn:
                if time.monotonic() > deadline + 120 or serve.poll() is not None:
                    raise RuntimeError(f"{client}: the replica did not learn the messages (see {folder})")
                time.sleep(0.2)
        broker.kill()
        time.sleep(settle)
        before, started = cpu_seconds(serve.pid), time.monotonic()
        time.sleep(seconds)
        share = (cpu_seconds(serve.pid) - before) / (time.monotonic() - started)
        ready = status(f"http://127.0.0.1:{port}/readyz")
        alive = status(f"http://127.0.0.1:{port}/healthz")
        stopping = time.monotonic()
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
        return {"cpu_share": share, "readyz": ready, "healthz": alive, "stop_seconds": time.monotonic() - stopping}
    finally:
        if serve.poll() is None:
            serve.kill()
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--learn", type=int, default=2_000,
                        help="labeled SMS messages learned before the broker goes (0: none)")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds after the kill before measuring")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds measured")
    parser.add_argument("--clients", default="kafka-python,confluent")
    args = parser.parse_args()
    print("| client | partitions | learned | CPU (share of one core) | /readyz | /healthz | stop after SIGTERM |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for client in args.clients.split(","):
            found = measure(client, args.partitions, args.learn, args.settle, args.seconds, Path(folder))
            print(f"| {client} | {args.partitions} | {args.learn:,} | {found['cpu_share']:.1%} | {found['readyz']} "
                  f"| {found['healthz']} "
                  f"| {found['stop_seconds']:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
