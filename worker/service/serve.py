"""`worker serve`: the long-lived Kafka service, wired from a ServeConfig.

It runs Kafka sessions (see session.py) one after another. A session that fails on
something a new session recovers from (broker restart, lost group membership, fenced
producer, aborted transaction) is closed with its uncommitted work discarded; after a short,
growing pause the next one resumes from the committed state. Only configuration errors
(settings, refused access) and SIGTERM/SIGINT end the process; a stop commits first.
"""

from __future__ import annotations

import faulthandler
import gc
import logging
import os
import signal
import threading
import uuid
from dataclasses import dataclass

from ..errors import UserError
from ..inference.server import InferenceServer
from ..inference.sources import PublishedModels
from ..io.fields import REGISTRY_FORMATS
from ..io.formats import PredictionEncoder, message_format
from ..io.interfaces import Refusals
from ..io.json_predictions import prediction_values
from ..io.kafka.client import KafkaFailure
from ..io.kafka.connect import connect
from ..io.kafka.reachable import any_listens
from ..io.registry.avro_predictions import AvroPredictions
from ..io.registry.client import RegistryClient, RegistryUnavailable
from ..io.registry.records import RegistryRecords, registry_records
from .config import ServeConfig
from .session import ServiceContext, Session
from .snapshots import SnapshotStore, starting_point
from .telemetry.metrics import ServiceMetrics
from .telemetry.server import serve_metrics

log = logging.getLogger(__name__)
STOP_GRACE_SECONDS = 9.0  # a stop asked for ends within this, whatever a dependency does
LISTENER_CHECK_SECONDS = 1.0  # how often a replica whose broker is gone checks that one listens again


@dataclass
class Backoff:
    """Pauses between sessions: doubling from ``first`` up to ``longest`` seconds; reset by a success."""
    first: float = 0.5
    longest: float = 30.0
    current: float = 0.0

    def next(self) -> float:
        self.current = self.first if not self.current else min(self.longest, self.current * 2)
        return self.current

    def reset(self) -> None:
        self.current = 0.0


class Stop:
    """A stop asked for by SIGTERM or SIGINT: the service ends through its orderly path (a last
    commit), and should that path wait on a dependency that does not answer (a broker gone while
    a session opens, say), the process ends after ``grace`` seconds all the same. Nothing is lost
    then: what was not committed is read again by the next run (an open transaction is aborted
    by the broker)."""

    def __init__(self, event: threading.Event, grace: float = STOP_GRACE_SECONDS):
        self.event, self.grace = event, grace
        self._watchdog: threading.Timer | None = None

    def __call__(self, signum: int, frame: object) -> None:
        self.event.set()
        if self._watchdog is None:
            self._watchdog = threading.Timer(self.grace, self._give_up)
            self._watchdog.daemon = True
            self._watchdog.start()

    def _give_up(self) -> None:
        log.warning(f"the orderly stop did not end within {self.grace:g} s (a dependency does not answer): "
                    "stopping now; what was not committed is read again by the next run")
        logging.shutdown()
        os._exit(0)

    def cancel(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()


def serve(config: ServeConfig, stop: threading.Event | None = None) -> None:
    stop = stop or threading.Event()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID` prints every thread's stack
    # Installed first, so a stop asked for while starting (say, reading a large snapshot) ends the
    # process through the same orderly path as one asked for while serving.
    stopping = Stop(stop)
    previous = {sig: signal.signal(sig, stopping) for sig in (signal.SIGTERM, signal.SIGINT)}
    http = None
    api: InferenceServer | None = None
    try:
        client = connect(config.kafka)
        messages = message_format(config.fields, _registry_records(config), _prediction_encoder(config))
        snapshots = config.snapshots
        store = SnapshotStore(snapshots.snapshot_dir, snapshots.keep_snapshots) if snapshots.snapshot_dir else None
        start = starting_point(config, store)
        metrics = ServiceMetrics(kafka_client=config.kafka.client)
        if config.telemetry.metrics_port is not None:
            http = serve_metrics(metrics, config.telemetry.metrics_port, config.telemetry.metrics_host)
            host, port = http.server_address[:2]
            host = host.decode() if isinstance(host, bytes) else host
            address = f"[{host}]" if ":" in host else host  # an IPv6 address is bracketed in a URL
            log.info("metrics endpoint up", extra={"url": f"http://{address}:{port}/metrics"})
        published = None
        if config.inference.http_port is not None:
            published = PublishedModels([config.models.name, *(c.name for c in config.models.challengers)])
            api = InferenceServer(config.inference, published, config.beside_the_loop.http_cpu_share)
            api.start()
        models = config.models
        named = {"model": models.name, "challengers": [c.name for c in models.challengers],
                 "promote": models.promote} if models.named else {}
        log.info("serving", extra={"input": config.topics.input, "output": config.topics.output,
                                   "group": config.topics.group,
                                   "guarantee": config.commit.guarantee, "kafka": config.kafka.describe(), **named})
        # A poll makes thousands of short-lived objects, which set off garbage collections; the
        # start-up's own objects (modules, the starting model) are never garbage, and leaving them
        # out of every later collection saves much of the JSON text path's time (docs/performance.md).
        gc.freeze()
        replica = f"{config.consumer.instance_id or uuid.uuid4().hex[:12]}"
        _run_sessions(ServiceContext(client, config, metrics, start, f"nbstream.{config.topics.group}.{replica}",
                                     Refusals(), store, messages, published), stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if http:
            http.shutdown()
        if api is not None:
            api.stop()
        stopping.cancel()


def _prediction_encoder(config: ServeConfig) -> PredictionEncoder:
    """How predictions are written: JSON objects, or Avro records by the schema registered now
    under OUTPUT-value (a registry that does not answer, or refuses it, ends the command)."""
    if config.output.output_format != "avro":
        return prediction_values
    assert config.schema_registry is not None, "ServeConfig requires a registry for Avro predictions"
    subject = f"{config.topics.output}-value"
    try:
        predictions = AvroPredictions.registered(RegistryClient(config.schema_registry), subject)
    except RegistryUnavailable as failure:
        raise UserError(f"{failure}: the predictions' schema could not be registered under {subject}.") from None
    log.info("the predictions' schema is registered", extra={"subject": subject, "schema_id": predictions.schema_id})
    return predictions.values


def _registry_records(config: ServeConfig) -> RegistryRecords | None:
    """How a registry format's records are read (None for the others). The registry is asked once
    now: refused credentials or an untrusted certificate end the command (a UserError); a registry
    that does not answer yet is waited for when the first record needs it."""
    if config.fields.format not in REGISTRY_FORMATS:
        return None
    assert config.schema_registry is not None, "ServeConfig requires a registry for a registry format"
    client = RegistryClient(config.schema_registry)
    records = registry_records(config.fields, client)
    try:
        client.check()
    except RegistryUnavailable as failure:
        log.warning("the Schema Registry does not answer yet: records wait for it", extra={"cause": str(failure)})
    return records


def _run_sessions(context: ServiceContext, stop: threading.Event) -> None:
    """Sessions one after another until ``stop`` is set; a Kafka failure ends a session, not the loop."""
    metrics = context.metrics
    backoff, last_failure, started = Backoff(), None, False
    while not stop.is_set():
        session = None
        try:
            session = Session(context)
            metrics.sessions.inc()
            started = True
            if last_failure is not None:
                log.info("Kafka session started again", extra={"after": str(last_failure)})
                last_failure = None
            backoff.reset()
            session.run(stop.is_set)
        except KafkaFailure as failure:
            metrics.not_ready()
            pause = backoff.next()
            if str(failure) != str(last_failure):
                log.warning("Kafka failed: starting a new session", extra={
                    "cause": str(failure), "retry_in_seconds": pause, "longest_pause_seconds": backoff.longest})
            last_failure = failure
            if session is not None:
                session.close()
                session = None
            _wait(stop, pause, metrics)
            _wait_for_listener(stop, context.config.kafka.bootstrap, metrics)
        finally:
            if session is not None:
                session.close()
    if not started:
        log.info("stopped before a Kafka session started")


def _wait_for_listener(stop: threading.Event, bootstrap: str, metrics: ServiceMetrics) -> None:
    """Wait until a bootstrap server accepts a TCP connection (asked every LISTENER_CHECK_SECONDS),
    building no Kafka client meanwhile."""
    while not stop.is_set() and not any_listens(bootstrap):
        _wait(stop, LISTENER_CHECK_SECONDS, metrics)


def _wait(stop: threading.Event, seconds: float, metrics: ServiceMetrics) -> None:
    """Pause, staying alive for /healthz and ready to stop."""
    import time

    deadline = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < deadline:
        metrics.beat()
        stop.wait(min(0.5, max(0.0, deadline - time.monotonic())))
