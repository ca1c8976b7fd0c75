"""Records on a group's state topic that `worker serve` did not write: each is skipped with a warning
and counted, and the service keeps running, predicting and learning exactly; `worker export` skips
them too. Each of them had crashed the service at every start, or made it restart its session forever."""

from __future__ import annotations

import json
import urllib.request
import zlib

import numpy as np
from kafka import KafkaProducer

import nbstream
from tests.helpers.cli import run_worker
from tests.helpers.kafka import TopicWatcher, new_topic, send
from tests.helpers.service import Service, assert_equal_statistics, free_port, labeled_messages, wait_for
from tests.helpers.state_records import DROP, forged_manifest, forged_state, zstd
from worker.io.kafka.state_topic import state_topic_name

UNREADABLE = "unreadable partition state ("
TEXT_OF_2_40 = {"kind": "text", "columns": ["text"], "hash_bits": 40, "ngram_max": 1, "n_features": 2}
BEFORE_A_START = [  # (the records of one forged state, the start of the problem its warning names)
    ([(b"partition-\xc2\xb2", b'{"generation": "x"}')], "the key names no state"),
    ([(b"partition-" + b"7" * 5_000, b"{}")], "the key names no state"),
    (forged_state("partition-0", {"next_offset": "abc"}), UNREADABLE + "next_offset must be an integer"),
    (forged_state("partition-0", {"next_offset": 10 ** 30}), UNREADABLE + "next_offset must be an integer"),
    (forged_state("partition-0", features_changes=TEXT_OF_2_40), UNREADABLE + "hash_bits must be"),
    (forged_state("base", {"starts": {"0": -7}}), UNREADABLE + "starts[0] must be an integer"),
    (forged_manifest(zstd(b"0123456789"), size=2 ** 40), "manifest: size must be an integer"),
    (forged_manifest(zlib.compress(b"not a state"), codec=DROP, size=DROP), UNREADABLE + "not a partition state"),
]
WHILE_RUNNING = [
    ([(b"partition-\xc2\xb2", b'{"generation": "y"}')], "the key names no state"),
    (forged_manifest(zstd(b"0123456789"), name="partition-3", size=-1), "manifest: size must be an integer"),
    (forged_state("partition-5", {"next_offset": -5}), UNREADABLE + "next_offset must be an integer"),
    (forged_state("partition-6", {"next_offset": [1]}), UNREADABLE + "next_offset must be an integer"),
]
SKIPPED = "skipped a state-topic record the service did not write or cannot read"


def write(bootstrap: str, topic: str, forged: list) -> None:
    """Each forged state's records, as anyone allowed to write the topic can."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for records, _ in forged:
        for key, value in records:
            producer.send(topic, key=key, value=value).get(timeout=30)
    producer.close()


def skipped_total(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return float(next(line.split()[1] for line in text.splitlines()
                      if line.startswith("nbstream_state_records_skipped_total ")))


def test_records_the_service_did_not_write_are_skipped_and_it_keeps_learning_exactly(kafka_bootstrap, kafka_client,
                                                                                     tmp_path):
    rng = np.random.default_rng(29)
    topic = new_topic(kafka_bootstrap, "state-poison")
    port = free_port()
    service = Service(kafka_bootstrap, topic, tmp_path, "--metrics-port", port, client=kafka_client)
    states = state_topic_name(service.group, topic)
    predictions = TopicWatcher(kafka_bootstrap, service.output, committed_only=True)
    batches = [labeled_messages(300, rng, start_id=300 * i) for i in range(3)]
    try:
        send(kafka_bootstrap, topic, batches[0][0])
        service.start()
        assert predictions.wait_until(lambda records: len(records) == 300), service.log_tail()
        assert service.terminate() == 0

        write(kafka_bootstrap, states, BEFORE_A_START)
        send(kafka_bootstrap, topic, batches[1][0], first_key=300)
        service.start()
        assert predictions.wait_until(lambda records: len(records) == 600), service.log_tail()
        assert service.running(), service.log_tail()
        # predicted by the model restored from the last valid state (300 examples), not a fresh one
        assert json.loads(predictions.records[300].value)["model_version"] >= 300
        log = service.log.read_text()
        assert log.count(SKIPPED) == len(BEFORE_A_START), log[-5000:]
        for _, problem in BEFORE_A_START:
            assert f'problem="{problem}' in log, problem
        assert wait_for(lambda: skipped_total(port) == len(BEFORE_A_START), timeout=10)

        write(kafka_bootstrap, states, WHILE_RUNNING)
        everything = len(BEFORE_A_START) + len(WHILE_RUNNING)
        assert wait_for(lambda: service.log.read_text().count(SKIPPED) == everything, timeout=30), service.log_tail()
        send(kafka_bootstrap, topic, batches[2][0], first_key=600)
        assert predictions.wait_until(lambda records: len(records) == 900), service.log_tail()
        assert service.running() and skipped_total(port) == everything
        assert service.terminate() == 0
        log = service.log.read_text()
        assert "Kafka failed" not in log and "Traceback" not in log, log[-5000:]
        X = np.concatenate([X for _, X, _ in batches])
        labels = np.concatenate([labels for _, _, labels in batches])
        model, meta = service.state()
        assert meta["source"]["offsets"] == {"0": 900}
        assert_equal_statistics(model, X, labels)

        out = tmp_path / "exported.nbs"
        exported = run_worker("export", "--bootstrap", kafka_bootstrap, "--kafka-client", kafka_client,
                              "--input", topic, "--group", service.group, "--out", out, timeout=120)
        assert exported.returncode == 0, exported.stderr
        assert SKIPPED in exported.stderr and "Traceback" not in exported.stderr, exported.stderr
        assert_equal_statistics(nbstream.load(out), X, labels)
    finally:
        predictions.close()
        if service.running():
            service.kill()
