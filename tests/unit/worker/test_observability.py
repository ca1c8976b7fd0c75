"""The service's metrics: reasons, batch histograms, accuracy from the partition states, standard collectors."""

from __future__ import annotations

import time

import numpy as np
from prometheus_client import generate_latest

from worker.service.observability import ServiceMetrics
from worker.service.partition_state import PartitionState


def exposition(metrics: ServiceMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_dead_letters_are_counted_by_reason():
    metrics = ServiceMetrics()
    for error in ("malformed JSON: x", "malformed JSON: y", "list has 3 values; expected 6",
                  "prediction of 900 bytes exceeds the limit of 600 of topic out"):
        metrics.dead_lettered(error)
    text = exposition(metrics)
    assert 'nbstream_dead_letters_total{reason="malformed"} 2.0' in text
    assert 'nbstream_dead_letters_total{reason="wrong_length"} 1.0' in text
    assert 'nbstream_dead_letters_total{reason="output_too_large"} 1.0' in text


def test_a_batch_of_latencies_lands_in_cumulative_buckets():
    metrics = ServiceMetrics()
    metrics.end_to_end.observe_many(np.array([0.003, 0.02, 0.02, 7.0]))
    text = exposition(metrics)
    assert 'nbstream_end_to_end_latency_seconds_bucket{le="0.005"} 1.0' in text
    assert 'nbstream_end_to_end_latency_seconds_bucket{le="0.025"} 3.0' in text
    assert 'nbstream_end_to_end_latency_seconds_bucket{le="+Inf"} 4.0' in text
    assert "nbstream_end_to_end_latency_seconds_count 4.0" in text
    assert "nbstream_end_to_end_latency_seconds_sum 7.043" in text


def test_accuracy_comes_from_the_partition_states_and_is_absent_before_any_judgement():
    metrics = ServiceMetrics()
    assert "nbstream_prequential_accuracy{" not in exposition(metrics)
    a, b = PartitionState(model=None), PartitionState(model=None)
    a.judge(correct=9, total=10)
    b.judge(correct=1, total=10)
    metrics.accuracy.update([a, b])
    assert 'nbstream_prequential_accuracy{window="all"} 0.5' in exposition(metrics)
    b.judge(correct=1000, total=1000)  # recent: mostly these
    metrics.accuracy.update([a, b])
    recent = float(next(line.split()[1] for line in exposition(metrics).splitlines()
                        if line.startswith('nbstream_prequential_accuracy{window="recent"}')))
    assert 0.9 < recent < 1.0


def test_standard_collectors_build_info_lag_and_staleness():
    metrics = ServiceMetrics(kafka_client="confluent")
    metrics.owned({0: 5, 3: 0})
    metrics.caught_up_at = time.time() - 12
    text = exposition(metrics)
    assert "process_resident_memory_bytes" in text and "python_info" in text and "python_gc_objects_collected_total" in text
    assert 'kafka_client="confluent"' in text and "nbstream_build_info{" in text
    assert 'nbstream_consumer_lag{partition="0"} 5.0' in text and "nbstream_assigned_partitions 2.0" in text
    staleness = float(next(line.split()[1] for line in text.splitlines()
                           if line.startswith("nbstream_global_model_staleness_seconds ")))
    assert 11 < staleness < 20


def test_clients_that_go_away_mid_request_leave_no_traceback_and_the_endpoints_answer(capfd):
    """A scrape that times out closes its connection before the answer is written: socketserver
    would print a traceback on stderr, among the structured log lines."""
    import socket
    import struct
    import urllib.request

    from worker.service.observability import serve_metrics

    server = serve_metrics(ServiceMetrics(), port=0)
    port = server.server_address[1]
    try:
        for _ in range(20):
            client = socket.create_connection(("127.0.0.1", port))
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
            client.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            client.close()
        stalled = socket.create_connection(("127.0.0.1", port))
        stalled.sendall(b"GET /metrics HTTP/1.1\r\n")  # and never the rest
        time.sleep(0.5)
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).status == 200
        stalled.close()
        time.sleep(0.5)
    finally:
        server.shutdown()
    assert "Traceback" not in capfd.readouterr().err
