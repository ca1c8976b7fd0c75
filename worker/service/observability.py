"""Prometheus metrics and health endpoints of `worker serve`, on one small HTTP server (a daemon thread).

The server is bounded: connections open at once, and the time a client may take to send its
request; it never stops the service.

/metrics  Prometheus text format: the service's metrics (README, "Metrics"), the process and Python ones
/healthz  200 while the service's loop turns (working, or waiting to start a new Kafka session), else 503
/readyz   200 while partitions are assigned and the broker answers, else 503
"""

from __future__ import annotations

import io
import logging
import platform
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

import nbstream

from ..io.files import cannot_because

log = logging.getLogger(__name__)

# The start of a dead letter's error, and the reason it is counted under.
DEAD_LETTER_REASONS = (
    ("empty message", "empty"), ("message of ", "too_large"), ("malformed JSON", "malformed"),
    ("expected a JSON object", "malformed"), ("field ", "malformed"), ("features ", "malformed"),
    ("list has ", "wrong_length"), ("non-numeric value", "wrong_type"), ("not a string", "wrong_type"),
    ("null", "missing_value"), ("NaN", "not_finite"), ("negative value", "negative"), ("label", "label"),
    ("prediction of ", "output_too_large"), ("the broker refused", "output_refused"),
    ("duplicate key", "malformed"), ("not an Arrow IPC stream", "malformed"),
    ("column names appear more than once", "malformed"),
)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Of the process, like the process and GC collectors: the state topic is read where no
# ServiceMetrics is at hand (and by `worker export`, which serves none).
STATE_RECORDS_SKIPPED = Counter("nbstream_state_records_skipped", "State-topic records skipped: not written by "
                                "the service, or unreadable (their partitions keep their last valid state)",
                                registry=None)


def reason_of(error: str) -> str:
    """The reason label of a dead letter's error.

    >>> reason_of("list has 3 values; expected 6"), reason_of("malformed JSON: ..."), reason_of("?")
    ('wrong_length', 'malformed', 'other')
    """
    return next((reason for start, reason in DEAD_LETTER_REASONS if error.startswith(start)), "other")


class BatchHistogram:
    """A Prometheus histogram fed a whole array of observations at once (one numpy call per batch,
    where a library call per message would cost more than predicting it)."""

    def __init__(self, name: str, documentation: str, buckets: tuple, registry: CollectorRegistry):
        self.name, self.documentation = name, documentation
        self.bounds = np.asarray(buckets, dtype=np.float64)
        self.counts = np.zeros(len(buckets) + 1, dtype=np.int64)  # the last: above every bound
        self.total = 0.0
        self._lock = threading.Lock()
        registry.register(self)

    def observe_many(self, values: np.ndarray) -> None:
        if not len(values):
            return
        bins = np.bincount(np.searchsorted(self.bounds, values, side="left"), minlength=len(self.counts))
        with self._lock:
            self.counts += bins
            self.total += float(values.sum())

    def collect(self):
        with self._lock:
            cumulative, total = np.cumsum(self.counts), self.total
        buckets = [(f"{bound:g}", int(count)) for bound, count in zip(self.bounds, cumulative[:-1], strict=True)]
        yield HistogramMetricFamily(self.name, self.documentation, buckets=buckets + [("+Inf", int(cumulative[-1]))],
                                    sum_value=total)


class PrequentialAccuracy:
    """Share of labeled messages predicted right before they were learned, over every partition's
    state (so it survives restarts): recent (decayed) and cumulative. Absent before anything was judged."""

    def __init__(self, registry: CollectorRegistry):
        self.values: dict[str, tuple[float, float]] = {}  # window -> (correct, judged)
        registry.register(self)

    def update(self, states) -> None:
        states = list(states)
        self.values = {"recent": (sum(s.recent_correct for s in states), sum(s.recent_judged for s in states)),
                       "all": (float(sum(s.correct for s in states)), float(sum(s.judged for s in states)))}

    def collect(self):
        family = GaugeMetricFamily("nbstream_prequential_accuracy", "Share of labeled messages predicted right "
                                   "before learning from them (window: recent, decayed over about 1,000 judged "
                                   "messages; or all)", labels=["window"])
        for window, (correct, judged) in self.values.items():
            if judged > 0:
                family.add_metric([window], correct / judged)
        yield family


class ServiceMetrics:
    def __init__(self, kafka_client: str = ""):
        self.registry = registry = CollectorRegistry()
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR, STATE_RECORDS_SKIPPED):
            registry.register(collector)
        Gauge("nbstream_build_info", "Version of nbstream, Python and the Kafka client in use",
              ["version", "python", "kafka_client"], registry=registry).labels(
            nbstream.__version__, platform.python_version(), kafka_client).set(1)
        self.messages = Counter("nbstream_messages", "Messages consumed", registry=registry)
        self.predictions = Counter("nbstream_predictions", "Predictions produced", registry=registry)
        self.learned = Counter("nbstream_examples_learned", "Labeled examples learned", registry=registry)
        self.dead_letters = Counter("nbstream_dead_letters", "Messages sent to the dead-letter topic, by reason",
                                    ["reason"], registry=registry)
        self.checkpoints = Counter("nbstream_checkpoints", "Commits that wrote state", registry=registry)
        self.sessions = Counter("nbstream_kafka_sessions", "Kafka sessions started (a new one after each "
                                "recovered failure)", registry=registry)
        self.state_bytes = Counter("nbstream_state_written_bytes", "Compressed partition-state bytes written to "
                                   "the state topic", registry=registry)
        self.end_to_end = BatchHistogram("nbstream_end_to_end_latency_seconds", "From an input message's timestamp "
                                         "to its prediction being sent (visible at the next commit under "
                                         "exactly-once)", LATENCY_BUCKETS, registry)
        self.batch_seconds = Histogram("nbstream_batch_seconds", "Time to decode, predict, send and learn one polled "
                                       "batch", buckets=LATENCY_BUCKETS, registry=registry)
        self.commit_seconds = Histogram("nbstream_commit_seconds", "Time of a commit: flush, state, offsets and "
                                        "transaction", buckets=LATENCY_BUCKETS, registry=registry)
        self.examples_seen = Gauge("nbstream_examples_seen", "Examples in the group's model", registry=registry)
        self.last_checkpoint = Gauge("nbstream_last_checkpoint_timestamp_seconds", "Time of the last commit that "
                                     "wrote state", registry=registry)
        self.assigned = Gauge("nbstream_assigned_partitions", "Input partitions this replica owns", registry=registry)
        self.lag = Gauge("nbstream_consumer_lag", "Messages of an owned input partition not processed yet "
                         "(checked every 5 s)", ["partition"], registry=registry)
        self.restore_seconds = Gauge("nbstream_restore_seconds", "Time the last assignment took to restore partition "
                                     "states", registry=registry)
        self.state_read_bytes = Gauge("nbstream_state_read_bytes", "State-topic bytes read by this Kafka session",
                                      registry=registry)
        self.kafka_up = Gauge("nbstream_kafka_connected", "1 while the broker answers, else 0", registry=registry)
        self.caught_up_at = time.time()
        Gauge("nbstream_global_model_staleness_seconds", "Time since this replica last had every committed "
              "partition state of the group (checked every 5 s)", registry=registry).set_function(
            lambda: max(0.0, time.time() - self.caught_up_at))
        self.accuracy = PrequentialAccuracy(registry)
        self.ready = False
        self.connected: bool | None = None  # unknown until the first contact
        self.heartbeat = time.monotonic()

    def broker_answers(self, answers: bool) -> bool:
        """Record whether the broker answers; True when that changed (not for the first contact)."""
        changed = self.connected is not None and answers != self.connected
        self.connected = answers
        self.kafka_up.set(1 if answers else 0)
        return changed

    def dead_lettered(self, error: str, count: int = 1) -> None:
        self.dead_letters.labels(reason_of(error)).inc(count)

    def owned(self, lags: dict[int, int]) -> None:
        """The owned partitions and how far behind each is."""
        self.lag.clear()
        for partition, lag in lags.items():
            self.lag.labels(str(partition)).set(lag)
        self.assigned.set(len(lags))


REQUEST_SECONDS = 5.0  # a client has this long to send its whole request, however it trickles in
MAX_CONNECTIONS = 64  # open at once; each holds a thread and a file descriptor
ACCEPT_WARNING_SECONDS = 60.0  # between two warnings that connections cannot be accepted


class _DeadlineReader(io.RawIOBase):
    """The reading side of a connection, every read within one deadline: a client sending a
    header line every few seconds would reset a per-read timeout forever."""

    def __init__(self, connection: socket.socket, seconds: float):
        self.connection, self.deadline = connection, time.monotonic() + seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self.connection.settimeout(left)
        return self.connection.recv_into(buffer)


class _Connections:
    """The endpoint's open connections, about ``limit`` at most.

    A connection beyond the limit takes the place of the one that has waited longest for its
    request to arrive, which is hung up: however many clients stall, a scrape gets through.
    Connections hung up count until their thread has closed them; beyond twice the limit, or
    when every connection is being answered, a new one is refused."""

    def __init__(self, limit: int):
        self.limit = limit
        self._lock = threading.Lock()
        self._open = 0
        self._waiting: dict[socket.socket, None] = {}  # still sending their request, oldest first

    def admit(self, connection: socket.socket) -> bool:
        with self._lock:
            if self._open >= self.limit:
                if not self._waiting or self._open >= 2 * self.limit:
                    return False
                oldest = next(iter(self._waiting))
                del self._waiting[oldest]
                try:
                    oldest.shutdown(socket.SHUT_RDWR)  # its thread's read ends, and it closes the connection
                except OSError:
                    pass
            self._open += 1
            self._waiting[connection] = None
            return True

    def answering(self, connection: socket.socket) -> None:
        """The request has arrived: no longer one to hang up."""
        with self._lock:
            self._waiting.pop(connection, None)

    def closed(self, connection: socket.socket) -> None:
        with self._lock:
            self._open -= 1
            self._waiting.pop(connection, None)


class _MetricsServer(ThreadingHTTPServer):
    """A thread per connection, for a bounded number of connections (see _Connections); IPv4 or
    IPv6. It never stops the service: a failed accept (out of file descriptors) is a warning and
    a short pause, and a client that goes away mid-request (a scrape that timed out) is a debug
    line, not a traceback on stderr among the structured logs."""

    daemon_threads = True
    request_queue_size = 64  # connections waiting to be accepted (the default 5 makes a burst wait for SYN retries)

    def __init__(self, address: tuple[str, int], handler, family: int, max_connections: int):
        self.address_family = family
        self.connections = _Connections(max_connections)
        self._next_accept_warning = 0.0
        super().__init__(address, handler)

    def get_request(self):
        try:
            return super().get_request()
        except OSError as error:  # socketserver passes over it, and would try again at once
            now = time.monotonic()
            if now >= self._next_accept_warning:
                log.warning("the metrics endpoint cannot accept connections",
                            extra={"error": cannot_because(error)})
                self._next_accept_warning = now + ACCEPT_WARNING_SECONDS
            time.sleep(0.1)
            raise

    def process_request(self, request, client_address) -> None:
        if not self.connections.admit(request):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)  # starts its thread
        except BaseException:
            self.connections.closed(request)
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.closed(request)

    def handle_error(self, request, client_address) -> None:
        log.debug("a metrics request failed", extra={"client": f"{client_address[0]}:{client_address[1]}",
                                                     "error": repr(sys.exc_info()[1])})


def serve_metrics(metrics: ServiceMetrics, port: int, host: str = "127.0.0.1", stall_seconds: float = 60.0,
                  max_connections: int = MAX_CONNECTIONS) -> ThreadingHTTPServer:
    """Start the endpoints on host:port (an IPv4 or IPv6 address or a name; port 0 picks a free
    one) in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        timeout = 10  # seconds each write of an answer may take

        def setup(self) -> None:
            super().setup()
            self.rfile.close()
            self.rfile = io.BufferedReader(_DeadlineReader(self.connection, REQUEST_SECONDS))

        def parse_request(self) -> bool:
            parsed = super().parse_request()
            if parsed:
                server.connections.answering(self.connection)
                self.connection.settimeout(self.timeout)
            return parsed

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

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        server = _MetricsServer((host, port), Handler, family, max_connections)
    except (OSError, OverflowError) as error:
        from ..errors import ConfigError

        raise ConfigError(f"--metrics-host {host} --metrics-port {port}: cannot listen there "
                          f"({getattr(error, 'strerror', None) or error}).") from None
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
