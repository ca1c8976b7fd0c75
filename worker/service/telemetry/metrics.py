"""The metrics of `worker serve` (docs/metrics.md), with its liveness and readiness; served by
``server.py``."""

from __future__ import annotations

import logging
import platform
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric

import nbstream

from ...io.kafka.dead_letters import reason_of

log = logging.getLogger(__name__)

MOST_CLASS_SERIES = 100  # classes with per-class quality series; the others have none
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# A label comes a second to weeks after its message (negative: before it, counted in the first bucket)
LABEL_DELAY_BUCKETS = (0.0, 1.0, 10.0, 60.0, 600.0, 3600.0, 6 * 3600.0, 86400.0, 7 * 86400.0, 30 * 86400.0)
# What became of delayed labels and pending examples: the counter of each outcome, and its help
LABEL_OUTCOMES = {
    "joined": ("nbstream_labels_joined", "Labels joined to their message, which was then learned"),
    "duplicate": ("nbstream_labels_duplicate", "Labels for an id that had one already (the first wins)"),
    "unmatched": ("nbstream_labels_unmatched", "Labels whose message never came within --label-ttl, or that "
                  "gave way for --max-pending"),
    "expired": ("nbstream_pending_expired", "Messages whose label did not come within --label-ttl"),
    "evicted": ("nbstream_pending_evicted", "Messages that gave way to newer ones for --max-pending"),
}
# Of the process, like the process and GC collectors: the state topic is read where no
# ServiceMetrics is at hand (and by `worker export`, which serves none).
STATE_RECORDS_SKIPPED = Counter("nbstream_state_records_skipped", "State-topic records skipped: not written by "
                                "the service, or unreadable (their partitions keep their last valid state)",
                                registry=None)
# Of the process too: the global model is merged where no ServiceMetrics is at hand.
GLOBAL_MODEL_MERGE_SECONDS = Histogram("nbstream_global_model_merge_seconds", "Time to merge the partition states "
                                       "into the global model (after partitions move, or another replica's state "
                                       "arrives)", buckets=LATENCY_BUCKETS, registry=None)
# Of the process too: each partition's drift watch counts its own detections.
DRIFT_DETECTED = Counter("nbstream_drift_detected", "Drifts detected in a partition's prequential errors "
                         "(--drift-detector)", ["partition"], registry=None)


class BatchHistogram:
    """A Prometheus histogram fed a whole array of observations at once (one numpy call per batch,
    where a library call per message would cost more than predicting it)."""

    def __init__(self, name: str, documentation: str, buckets: tuple[Any, ...], registry: CollectorRegistry):
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

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            cumulative, total = np.cumsum(self.counts), self.total
        buckets = [(f"{bound:g}", int(count)) for bound, count in zip(self.bounds, cumulative[:-1], strict=True)]
        yield HistogramMetricFamily(self.name, self.documentation, buckets=buckets + [("+Inf", int(cumulative[-1]))],
                                    sum_value=total)


# By model name: the group's report, and each owned partition's (window -> metric -> value)
QualityReports = tuple[dict[str, dict[str, Any]], dict[str, dict[int, dict[str, Any]]]]


class PrequentialQuality:
    """How each model's predictions fared (``nbstream/quality.py``), labeled ``model`` (the served
    model's and every challenger's, judged on the same messages), in the windows recent (decayed)
    and all: the group's series over every partition state this replica knows (so they survive
    restarts), and each owned partition's, labeled ``partition``. Per-class series go to the first
    ``MOST_CLASS_SERIES`` labels in sorted order. A series is absent before anything was judged
    (predicted, for the predicted-class share)."""

    LABELS = ("model: the model that predicted; window: recent, decayed over about 1,000 messages, or all; "
              "partition: one input partition's, else the group's")
    GAUGES = {  # name -> (report key, help)
        "nbstream_prequential_accuracy": ("accuracy", "Share of labeled messages predicted right before learning "
                                          "from them"),
        "nbstream_prequential_log_loss": ("log_loss", "Mean log-loss of the predictions served for labeled "
                                          "messages"),
        "nbstream_prequential_brier": ("brier", "Mean Brier score of the predictions served for labeled messages "
                                       "(scikit-learn's: halved for two classes)"),
    }
    PER_CLASS = {
        "nbstream_prequential_recall": ("recall", "Share of a class's labeled messages predicted as it"),
        "nbstream_predicted_class_share": ("predicted_share", "Share of the predictions served that were the "
                                           "class, labeled messages or not"),
    }

    def __init__(self, registry: CollectorRegistry):
        self.reports: Callable[[], QualityReports] = lambda: ({}, {})
        registry.register(self)

    def show(self, reports: Callable[[], QualityReports]) -> None:
        """reports() : by model name, the group's report and each owned partition's (window ->
        metric -> value), made when scraped, on the metrics server's thread."""
        self.reports = reports  # one assignment: a scrape sees the old or the new, whole

    def collect(self) -> Iterator[Metric]:
        group, owned = self.reports()
        families = {name: GaugeMetricFamily(name, f"{documentation} ({self.LABELS})")
                    for name, (_, documentation) in (self.GAUGES | self.PER_CLASS).items()}
        for model, report in group.items():
            self._add(families, report, {"model": model})
        for model, partitions in owned.items():
            for partition, report in sorted(partitions.items()):
                self._add(families, report, {"model": model, "partition": str(partition)})
        yield from families.values()

    def _add(self, families: dict[str, GaugeMetricFamily], report: dict[str, Any], labels: dict[str, str]) -> None:
        for window, metrics in report.items():
            at = labels | {"window": window}
            for name, (key, _) in self.GAUGES.items():
                if metrics[key] is not None:
                    families[name].add_sample(name, at, metrics[key])
            for name, (key, _) in self.PER_CLASS.items():
                values = metrics[key]
                for label in sorted(values, key=_sort_key)[:MOST_CLASS_SERIES]:
                    families[name].add_sample(name, {"class": str(label)} | at, values[label])


def _sort_key(label: object) -> tuple[bool, object]:
    """Numbers before strings, each in order (a group's labels are of one kind)."""
    return isinstance(label, str), label


class ModelLineup:
    """The models the group learns: each one's settings and role (served or challenger), and with
    --promote auto its mean log-loss over the examples the promotion compares."""

    def __init__(self, registry: CollectorRegistry):
        self.lineup: Callable[[], tuple[str, dict[str, str], dict[str, float]]] = lambda: ("", {}, {})
        registry.register(self)

    def show(self, lineup: Callable[[], tuple[str, dict[str, str], dict[str, float]]]) -> None:
        """lineup() : (the served model's name, each model's settings by name, each model's mean
        log-loss over the promotion's window by name), made when scraped."""
        self.lineup = lineup

    def collect(self) -> Iterator[Metric]:
        served, settings, log_losses = self.lineup()
        info = GaugeMetricFamily("nbstream_model_info", "The models the group learns: 1 for each, with its settings "
                                 "and role (served: its predictions are sent; challenger: judged beside it)",
                                 labels=["model", "role", "settings"])
        window = GaugeMetricFamily("nbstream_promotion_log_loss", "Mean log-loss of each model over the last "
                                   "examples judged that a promotion compares (--promote auto)", labels=["model"])
        for name, described in settings.items():
            info.add_metric([name, "served" if name == served else "challenger", described], 1)
        for name, loss in log_losses.items():
            window.add_metric([name], loss)
        yield info
        yield window


class ConsumerLag:
    """How far the group is behind on every partition of its input (and of its labels topic, with
    --labels-topic; see ``lag.py``), and in all. Every replica reports the whole group's: a
    dashboard takes the largest across replicas, not the sum."""

    def __init__(self, registry: CollectorRegistry):
        self.measured: dict[str, tuple[str, dict[int, int]]] = {}  # topic -> (group, lag by partition)
        registry.register(self)

    def update(self, topic: str, group: str, lags: dict[int, int]) -> None:
        self.measured = {**self.measured, topic: (group, dict(lags))}  # one assignment: a scrape sees it whole

    def collect(self) -> Iterator[Metric]:
        each = GaugeMetricFamily("nbstream_consumer_lag", "Messages of an input partition the group has not "
                                 "committed yet (every partition, owned by this replica or not)",
                                 labels=["topic", "group", "partition"])
        total = GaugeMetricFamily("nbstream_consumer_lag_sum", "Messages of the input the group has not committed "
                                  "yet, all partitions", labels=["topic", "group"])
        for topic, (group, lags) in self.measured.items():
            for partition, lag in sorted(lags.items()):
                each.add_metric([topic, group, str(partition)], lag)
            total.add_metric([topic, group], sum(lags.values()))
        yield each
        yield total


class ServiceMetrics:
    def __init__(self, kafka_client: str = ""):
        self.registry = registry = CollectorRegistry()
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR, STATE_RECORDS_SKIPPED,
                          GLOBAL_MODEL_MERGE_SECONDS, DRIFT_DETECTED):
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
        self.commit_failures = Counter("nbstream_commit_failures", "Commits that failed: the session ended with "
                                       "nothing of the commit done, and a new one resumes from the last commit",
                                       registry=registry)
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
        self.lag = ConsumerLag(registry)
        self.restore_seconds = Gauge("nbstream_restore_seconds", "Time the last assignment took to restore partition "
                                     "states", registry=registry)
        self.state_read_bytes = Gauge("nbstream_state_read_bytes", "State-topic bytes read by this Kafka session",
                                      registry=registry)
        self.kafka_up = Gauge("nbstream_kafka_connected", "1 while the broker answers, else 0", registry=registry)
        self.caught_up_at = time.time()
        Gauge("nbstream_global_model_staleness_seconds", "Time since this replica last had every committed "
              "partition state of the group (checked every 5 s)", registry=registry).set_function(
            lambda: max(0.0, time.time() - self.caught_up_at))
        self.quality = PrequentialQuality(registry)
        self.pending = Gauge("nbstream_pending_examples", "Messages of the owned partitions waiting for their label "
                             "(--labels-topic)", registry=registry)
        self.keys = Gauge("nbstream_keys", "Keys (--model-key), by state: in_memory, those whose counts the owned "
                          "partitions hold in memory; evicted, those out of memory for --max-keys (in the keys "
                          "topic); dropped, those this replica dropped for --key-ttl since it started",
                          ["state"], registry=registry)
        self.delayed_labels = {outcome: Counter(name, documentation, registry=registry)
                               for outcome, (name, documentation) in LABEL_OUTCOMES.items()}
        self.label_delay = BatchHistogram("nbstream_label_delay_seconds", "From a message's timestamp to its label's, "
                                          "for the pairs joined", LABEL_DELAY_BUCKETS, registry)
        self.promotions = Counter("nbstream_promotions", "Challengers this replica promoted to serve in place of the "
                                  "served model (--promote auto)", ["from_model", "to_model"], registry=registry)
        self.models = ModelLineup(registry)
        self.ready = False
        Gauge("nbstream_ready", "1 while /readyz answers 200 (partitions assigned, the broker and a Schema Registry "
              "in use answering), else 0", registry=registry).set_function(lambda: 1.0 if self.ready else 0.0)
        self.connected: bool | None = None  # unknown until the first contact
        self.registry_connected: bool | None = None  # the Schema Registry's, with --format avro: the same
        self.heartbeat = time.monotonic()

    def beat(self) -> float:
        """The service's loop turned (liveness); the time it did, monotonic."""
        self.heartbeat = time.monotonic()
        return self.heartbeat

    def caught_up(self) -> None:
        """This replica has every committed partition state of the group now."""
        self.caught_up_at = time.time()

    def not_ready(self) -> None:
        self.ready = False

    def serving(self, assigned: bool, broker_answers: bool) -> None:
        """Readiness: partitions assigned, the broker answering, and the Schema Registry not known to fail."""
        self.ready = assigned and broker_answers and self.registry_connected is not False

    def registry_answers(self, answers: bool) -> bool:
        """Record whether the Schema Registry answers; True when that changed (a first failure too).
        A registry that does not answer makes the replica not ready."""
        changed = (self.registry_connected is False) == answers
        self.registry_connected = answers
        if not answers:
            self.ready = False
        return changed

    def broker_answers(self, answers: bool) -> bool:
        """Record whether the broker answers; True when that changed (not for the first contact)."""
        changed = self.connected is not None and answers != self.connected
        self.connected = answers
        self.kafka_up.set(1 if answers else 0)
        return changed

    def dead_lettered(self, error: str, count: int = 1) -> None:
        self.dead_letters.labels(reason_of(error)).inc(count)
