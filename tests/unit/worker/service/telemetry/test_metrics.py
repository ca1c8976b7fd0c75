"""The service's metrics: reasons, batch histograms, prequential quality from the partition states, standard
collectors."""

from __future__ import annotations

import time

import numpy as np
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from nbstream.metrics.quality import PredictionQuality
from worker.io.kafka.dead_letters import reason_of
from worker.service.telemetry.metrics import ServiceMetrics


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


def judged(quality: PredictionQuality, right: int, wrong: int) -> PredictionQuality:
    """quality with ``right`` rows of "a" predicted "a" (p 0.75) and ``wrong`` ones predicted "b" (p 0.25)."""
    classes, y = np.array(["a", "b"]), np.array(["a"] * (right + wrong))
    proba = np.array([[0.75, 0.25]] * right + [[0.25, 0.75]] * wrong)
    quality.judge(y, classes, proba)
    quality.predicted(classes, np.argmax(proba, axis=1))
    return quality


def show(metrics: ServiceMetrics, owned: dict[int, PredictionQuality], known: list[PredictionQuality],
         model: str = "main") -> None:
    """The qualities of one model as the group gives them to the metrics: reports made at each scrape."""
    metrics.quality.show(lambda: ({model: PredictionQuality.merged(known).report()},
                                  {model: {p: quality.report() for p, quality in owned.items()}}))


def sample(text: str, name: str, **labels) -> float | None:
    """The value of one series of the exposition (labels exactly these), None when absent."""
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return found.value
    return None


def test_accuracy_comes_from_the_partition_states_and_is_absent_before_any_judgement():
    metrics = ServiceMetrics()
    assert "nbstream_prequential_accuracy{" not in exposition(metrics)
    a, b = judged(PredictionQuality(), 9, 1), judged(PredictionQuality(), 1, 9)
    show(metrics, {}, [a, b])
    assert 'nbstream_prequential_accuracy{model="main",window="all"} 0.5' in exposition(metrics)
    judged(b, 1000, 0)  # recent: mostly these
    recent = float(next(line.split()[1] for line in exposition(metrics).splitlines()
                        if line.startswith('nbstream_prequential_accuracy{model="main",window="recent"}')))
    assert 0.9 < recent < 1.0


def test_each_owned_partition_has_its_series_beside_the_groups():
    metrics = ServiceMetrics()
    mine, theirs = judged(PredictionQuality(), 3, 1), judged(PredictionQuality(), 0, 4)
    show(metrics, {7: mine}, [theirs, mine])
    text = exposition(metrics)
    for window in ("all", "recent"):  # recent: the last rows weigh a little more (the wrong ones of each)
        assert sample(text, "nbstream_prequential_accuracy", model="main", window=window) == pytest.approx(
            3 / 8, rel=1e-3)
        assert sample(text, "nbstream_prequential_accuracy", model="main", partition="7",
                      window=window) == pytest.approx(3 / 4, rel=1e-3)
    assert sample(text, "nbstream_prequential_accuracy", model="main", window="all") == 3 / 8
    assert sample(text, "nbstream_prequential_log_loss", model="main", partition="7", window="all") == pytest.approx(
        -(3 * np.log(0.75) + np.log(0.25)) / 4)
    assert sample(text, "nbstream_prequential_brier", model="main", window="all") == pytest.approx(
        (3 * 0.25 ** 2 + 5 * 0.75 ** 2) / 8)  # two classes: the binary score, (1 - p(a))^2
    assert sample(text, "nbstream_prequential_recall", model="main", **{"class": "a"}, partition="7",
                  window="all") == 0.75
    assert sample(text, "nbstream_prequential_recall", model="main", **{"class": "b"},
                  window="all") is None  # never a label
    assert sample(text, "nbstream_predicted_class_share", model="main", **{"class": "b"}, window="all") == 5 / 8
    assert sample(text, "nbstream_predicted_class_share", model="main", **{"class": "a"}, partition="7",
                  window="all") == 0.75
    assert sample(text, "nbstream_prequential_accuracy", model="main", partition="0", window="all") is None  # not owned


def test_per_class_series_stop_at_the_first_hundred_classes():
    from worker.service.telemetry.metrics import MOST_CLASS_SERIES

    classes = np.arange(150)
    quality = PredictionQuality()
    quality.predicted(classes, np.arange(150))
    metrics = ServiceMetrics()
    show(metrics, {0: quality}, [quality])
    shares = [s for family in text_string_to_metric_families(exposition(metrics))
              for s in family.samples if s.name == "nbstream_predicted_class_share"]
    assert len(shares) == 2 * 2 * MOST_CLASS_SERIES == 400  # group and partition, two windows
    assert {s.labels["class"] for s in shares} == {str(c) for c in range(MOST_CLASS_SERIES)}


def test_standard_collectors_build_info_lag_and_staleness():
    metrics = ServiceMetrics(kafka_client="confluent")
    metrics.assigned.set(2)
    metrics.lag.update("in", "g", {0: 5, 1: 7, 3: 0})
    metrics.caught_up_at = time.time() - 12
    text = exposition(metrics)
    assert "process_resident_memory_bytes" in text and "python_info" in text
    assert "python_gc_objects_collected_total" in text
    assert 'kafka_client="confluent"' in text and "nbstream_build_info{" in text
    assert 'nbstream_consumer_lag{group="g",partition="0",topic="in"} 5.0' in text
    assert 'nbstream_consumer_lag{group="g",partition="3",topic="in"} 0.0' in text
    assert 'nbstream_consumer_lag_sum{group="g",topic="in"} 12.0' in text and "nbstream_assigned_partitions 2.0" in text
    staleness = float(next(line.split()[1] for line in text.splitlines()
                           if line.startswith("nbstream_global_model_staleness_seconds ")))
    assert 11 < staleness < 20


def test_clients_that_go_away_mid_request_leave_no_traceback_and_the_endpoints_answer(capfd):
    """A scrape that times out closes its connection before the answer is written: socketserver
    would print a traceback on stderr, among the structured log lines."""
    import socket
    import struct
    import urllib.request

    from worker.service.telemetry.server import serve_metrics

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


def _stall(port: int, host: str = "127.0.0.1"):
    """A connection that sends the start of a request and then nothing."""
    import socket

    client = socket.create_connection((host, port))
    client.sendall(b"GET /metrics HTTP/1.1\r\n")
    return client


def _healthz(port: int, host: str = "127.0.0.1") -> int:
    import urllib.request

    return urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=5).status


def test_a_request_trickling_in_a_line_at_a_time_is_cut_off_after_the_deadline(monkeypatch):
    from worker.service.telemetry import server as metrics_server

    monkeypatch.setattr(metrics_server, "REQUEST_SECONDS", 1.5)
    server = metrics_server.serve_metrics(ServiceMetrics(), port=0)
    try:
        client = _stall(server.server_address[1])
        started, cut_off = time.monotonic(), None
        while time.monotonic() - started < 10 and cut_off is None:
            time.sleep(0.25)  # a header line every 0.25 s: a per-read timeout would never expire
            try:
                client.sendall(b"X-Slow: 1\r\n")
                client.settimeout(0.01)
                if client.recv(1024) == b"":
                    cut_off = time.monotonic() - started
            except TimeoutError:
                pass
            except OSError:
                cut_off = time.monotonic() - started
        client.close()
    finally:
        server.shutdown()
    assert cut_off is not None and 1.0 < cut_off < 3.0, cut_off


def test_stalled_connections_are_bounded_and_a_scrape_still_gets_through():
    import threading

    from worker.service.telemetry.server import serve_metrics

    before = threading.active_count()
    server = serve_metrics(ServiceMetrics(), port=0, max_connections=8)
    port = server.server_address[1]
    try:
        stalled = [_stall(port) for _ in range(200)]
        time.sleep(0.5)
        assert threading.active_count() <= before + 1 + 2 * 8
        assert server.connections._open <= 2 * 8
        assert _healthz(port) == 200  # takes the place of the oldest stalled connection
        for client in stalled:
            client.close()
    finally:
        server.shutdown()


def test_an_accept_that_fails_is_one_warning_and_the_endpoint_keeps_answering(caplog):
    import errno
    import os

    from worker.service.telemetry.server import serve_metrics

    class FailingAccepts:
        """The listening socket of a process out of file descriptors, for its first accepts."""

        def __init__(self, listening, failures: int):
            self.listening, self.failures = listening, failures

        def accept(self):
            if self.failures:
                self.failures -= 1
                raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
            return self.listening.accept()

        def __getattr__(self, name):
            return getattr(self.listening, name)

    server = serve_metrics(ServiceMetrics(), port=0)
    server.socket = FailingAccepts(server.socket, failures=5)
    try:
        with caplog.at_level("WARNING", logger="worker.service.telemetry.server"):
            assert _healthz(server.server_address[1]) == 200
    finally:
        server.shutdown()
    warnings = [r for r in caplog.records if r.getMessage() == "the metrics endpoint cannot accept connections"]
    assert len(warnings) == 1 and warnings[0].error == "Too many open files"


def test_the_endpoints_listen_on_ipv6_too():
    import socket

    import pytest

    from worker.service.telemetry.server import serve_metrics

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    server = serve_metrics(ServiceMetrics(), port=0, host="::1")
    try:
        assert _healthz(server.server_address[1], "[::1]") == 200
        assert server.socket.family == socket.AF_INET6
    finally:
        server.shutdown()


@pytest.mark.parametrize("error", ["duplicate key 'label'", "not an Arrow IPC stream: Expected to read 1 bytes",
                                   "column names appear more than once: ['label']"])
def test_messages_that_cannot_be_read_as_one_example_count_as_malformed(error):
    assert reason_of(error) == "malformed"


def test_every_model_has_its_series_labeled_with_its_name():
    metrics = ServiceMetrics()
    served, challenger = judged(PredictionQuality(), 1, 3), judged(PredictionQuality(), 3, 1)
    metrics.quality.show(lambda: ({"main": served.report(), "cnb": challenger.report()},
                                  {"main": {0: served.report()}, "cnb": {0: challenger.report()}}))
    text = exposition(metrics)
    assert sample(text, "nbstream_prequential_accuracy", model="main", window="all") == 0.25
    assert sample(text, "nbstream_prequential_accuracy", model="cnb", window="all") == 0.75
    assert sample(text, "nbstream_prequential_accuracy", model="cnb", partition="0", window="all") == 0.75
    assert sample(text, "nbstream_prequential_accuracy", window="all") is None  # every series names its model
