"""Prometheus metrics and health endpoints on one small HTTP server (a daemon thread).

/metrics  Prometheus text format
/healthz  200 while the run loop has turned within the last --stall-seconds, else 503
/readyz   200 once the state is loaded and partitions are assigned, else 503
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest


class ServiceMetrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        self.messages = Counter("nbstream_messages", "Messages consumed", registry=self.registry)
        self.predictions = Counter("nbstream_predictions", "Predictions produced", registry=self.registry)
        self.learned = Counter("nbstream_examples_learned", "Labeled examples learned", registry=self.registry)
        self.dead_letters = Counter("nbstream_dead_letters", "Messages sent to the dead-letter topic",
                                    registry=self.registry)
        self.checkpoints = Counter("nbstream_checkpoints", "Checkpoints written", registry=self.registry)
        self.accuracy = Gauge("nbstream_prequential_accuracy",
                              "Share of labeled messages predicted right before learning from them",
                              registry=self.registry)
        self.examples_seen = Gauge("nbstream_examples_seen", "Examples in the model", registry=self.registry)
        self.last_checkpoint = Gauge("nbstream_last_checkpoint_timestamp_seconds", "Time of the last checkpoint",
                                     registry=self.registry)
        self.assigned = Gauge("nbstream_assigned_partitions", "Input partitions this replica owns",
                              registry=self.registry)
        self.restore_seconds = Gauge("nbstream_restore_seconds", "Time the last assignment took to restore "
                                     "partition states", registry=self.registry)
        self.state_bytes = Gauge("nbstream_state_bytes_per_commit", "Compressed state bytes written by the last "
                                 "checkpoint", registry=self.registry)
        self.commit_seconds = Gauge("nbstream_commit_seconds", "Duration of the last checkpoint (flush, state, "
                                    "commit)", registry=self.registry)
        self.kafka_up = Gauge("nbstream_kafka_connected", "1 while the broker answers, else 0", registry=self.registry)
        self.sessions = Counter("nbstream_kafka_sessions", "Kafka sessions started (a new one after each "
                                "recovered failure)", registry=self.registry)
        self._correct = 0
        self._judged = 0
        self.ready = False
        self.connected: bool | None = None  # unknown until the first contact
        self.heartbeat = time.monotonic()

    def broker_answers(self, answers: bool) -> bool:
        """Record whether the broker answers; True when that changed (not for the first contact)."""
        changed = self.connected is not None and answers != self.connected
        self.connected = answers
        self.kafka_up.set(1 if answers else 0)
        return changed

    def judged(self, correct: int, total: int) -> None:
        self._correct += correct
        self._judged += total
        if self._judged:
            self.accuracy.set(self._correct / self._judged)


def serve_metrics(metrics: ServiceMetrics, port: int, host: str = "127.0.0.1",
                  stall_seconds: float = 60.0) -> ThreadingHTTPServer:
    """Start the endpoints on host:port (port 0 picks a free one) in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/metrics":
                self._reply(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                alive = time.monotonic() - metrics.heartbeat < stall_seconds
                self._reply(200 if alive else 503, b"ok\n" if alive else b"stalled\n")
            elif self.path == "/readyz":
                self._reply(200 if metrics.ready else 503, b"ready\n" if metrics.ready else b"not ready\n")
            else:
                self._reply(404, b"not found\n")

        def _reply(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # requests are not worth a log line each
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
