"""`worker serve` on a real broker: throughput against a bare consumer, and latency.

1. 200,000 MNIST training rows are sent as JSON messages ({"id", "features": [784 ints],
   "label"}) to a fresh topic.
2. Throughput: `worker serve` (Bernoulli, binarize 127.5; predict, produce, learn,
   checkpoint) reads the topic; rows/s = messages / (last - first prediction's timestamp).
   The baseline is a bare kafka-python consumer that only reads and json-decodes the same
   topic, timed the same way (first to last record). Both run as their own processes.
3. Latency: a fresh service; messages sent at a steady --rate (default 1,000/s) for
   --seconds; latency = the prediction's timestamp minus its input message's timestamp
   (both set by the producers, same clock), p50 and p99.

    python scripts/bench_kafka.py --data-dir ../shared/data [--bootstrap HOST:PORT]
Without --bootstrap a local broker is started with scripts/kafka_broker.py (and stopped).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import numpy as np
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.datasets import default_data_dir, load_mnist  # noqa: E402

BARE_CONSUMER = """
import json, sys, time
from kafka import KafkaConsumer
bootstrap, topic, expected = sys.argv[1], sys.argv[2], int(sys.argv[3])
consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="bare-" + topic, auto_offset_reset="earliest",
                         enable_auto_commit=False, max_poll_records=2000, fetch_max_bytes=64 * 1024 * 1024)
seen, first = 0, None
while seen < expected:
    for records in consumer.poll(timeout_ms=500).values():
        for record in records:
            json.loads(record.value)
            seen += 1
        first = first or time.perf_counter()
print(json.dumps({"messages": seen, "seconds": time.perf_counter() - first}))
"""


def send_messages(bootstrap: str, topic: str, images: np.ndarray, labels: np.ndarray, rate: float = 0.0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=256 * 1024)
    started = time.monotonic()
    for i, (row, label) in enumerate(zip(images, labels)):
        if rate:
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        producer.send(topic, key=str(i).encode(),
                      value=json.dumps({"id": i, "features": row.tolist(), "label": int(label)}).encode())
    producer.flush()
    producer.close()


def start_service(bootstrap: str, topic: str, output: str, snapshots: Path, log: Path) -> subprocess.Popen:
    """Start `worker serve` and wait until it has its partitions (/readyz)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "worker", "serve", "--bootstrap", bootstrap, "--input", topic,
               "--output", output, "--group", f"serve-{topic}", "--snapshot-dir", str(snapshots),
               "--model", "bernoulli", "--binarize", "127.5", "--checkpoint-every", "50000",
               "--checkpoint-interval", "30", "--instance-id", "bench", "--metrics-port", str(port)]
    process = subprocess.Popen(command, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2):
                return process
        except OSError:
            time.sleep(0.2)
    raise TimeoutError("worker serve did not become ready")


def prediction_times(bootstrap: str, output: str, expected: int, timeout: float) -> dict[tuple[int, int], int]:
    """(input partition, input offset) -> the prediction record's timestamp (ms)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    deadline = time.monotonic() + timeout
    while not consumer.partitions_for_topic(output):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no predictions topic {output}")
        consumer.topics()
        time.sleep(0.2)
    partitions = [TopicPartition(output, p) for p in consumer.partitions_for_topic(output)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    times: dict[tuple[int, int], int] = {}
    while len(times) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            for record in records:
                value = json.loads(record.value)
                times.setdefault((value["partition"], value["offset"]), record.timestamp)
    consumer.close()
    if len(times) < expected:
        raise TimeoutError(f"only {len(times)} of {expected} predictions arrived")
    return times


def input_times(bootstrap: str, topic: str) -> dict[tuple[int, int], int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    ends = consumer.end_offsets(partitions)
    times = {}
    while any(consumer.position(p) < ends[p] for p in partitions):
        for records in consumer.poll(timeout_ms=500).values():
            for record in records:
                times[(record.partition, record.offset)] = record.timestamp
    consumer.close()
    return times


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--bootstrap", help="an existing broker (default: start a local one)")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=1_000.0, help="messages/s for the latency run")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the latency run")
    args = parser.parse_args()
    mnist = load_mnist(args.data_dir / "mnist")
    repeats = -(-args.messages // 60_000)
    images = np.tile(mnist["train_images"], (repeats, 1))[:args.messages]
    labels = np.tile(mnist["train_labels"], repeats)[:args.messages]

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        broker = None
        bootstrap = args.bootstrap
        if not bootstrap:
            broker = subprocess.run([sys.executable, str(REPO / "scripts" / "kafka_broker.py"), "start",
                                     "--dir", str(scratch / "kafka")], check=True, capture_output=True, text=True)
            bootstrap = broker.stdout.strip().splitlines()[-1]
        try:
            run = uuid.uuid4().hex[:8]
            topic = f"bench-mnist-{run}"
            started = time.perf_counter()
            send_messages(bootstrap, topic, images, labels)
            print(f"sent {args.messages:,} messages in {time.perf_counter() - started:.1f}s", flush=True)

            bare = subprocess.run([sys.executable, "-c", BARE_CONSUMER, bootstrap, topic, str(args.messages)],
                                  check=True, capture_output=True, text=True, timeout=900)
            bare_result = json.loads(bare.stdout)
            bare_rate = bare_result["messages"] / bare_result["seconds"]

            service = start_service(bootstrap, topic, f"{topic}.out", scratch / "snapshots", scratch / "serve.log")
            times = prediction_times(bootstrap, f"{topic}.out", args.messages, timeout=1800)
            stop(service)
            stamps = np.array(sorted(times.values()))
            serve_rate = args.messages / ((stamps[-1] - stamps[0]) / 1000)

            latency_topic = f"bench-latency-{run}"
            service = start_service(bootstrap, latency_topic, f"{latency_topic}.out", scratch / "snapshots2",
                                    scratch / "serve2.log")
            n_latency = int(args.rate * args.seconds)
            send_messages(bootstrap, latency_topic, images[:n_latency], labels[:n_latency], rate=args.rate)
            predicted = prediction_times(bootstrap, f"{latency_topic}.out", n_latency, timeout=600)
            stop(service)
            sent = input_times(bootstrap, latency_topic)
            latency = np.array([predicted[key] - sent[key] for key in predicted])
        finally:
            if broker is not None:
                subprocess.run([sys.executable, str(REPO / "scripts" / "kafka_broker.py"), "stop",
                                "--dir", str(scratch / "kafka")], check=False)

    print("| measurement | value |")
    print("|---|---:|")
    print(f"| worker serve (predict + produce + learn), messages/s | {serve_rate:,.0f} |")
    print(f"| bare consumer (read + json.loads), messages/s | {bare_rate:,.0f} |")
    print(f"| ratio | {serve_rate / bare_rate:.2f} |")
    print(f"| latency at {args.rate:,.0f} messages/s for {args.seconds:.0f}s: p50 ms | {np.percentile(latency, 50):.0f} |")
    print(f"| latency p99 ms | {np.percentile(latency, 99):.0f} |")
    print(f"| latency max ms | {latency.max():.0f} |")


if __name__ == "__main__":
    main()
