"""One Kafka session of `worker serve`: its clients, its group membership, and the loop running on them.

A session starts by making sure its topics exist and reading the state topic to its end;
then it joins the group. Partitions assigned are restored from their committed states;
partitions about to be revoked are committed first. Any ``KafkaFailure`` ends the session
with its uncommitted work discarded (under exactly-once the open transaction is aborted);
the next session resumes from what was committed, so nothing is lost or counted twice.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from nbstream.arrow import FeatureEncoder

from ..checkpoint import CheckpointPolicy
from ..errors import ConfigError
from ..inference.sources import PublishedModels
from ..io.formats import MessageFormat, message_format
from ..io.interfaces import Refusals
from ..io.kafka.client import Consumer, ConsumerOptions, KafkaClient, KafkaFailure, Producer, Start, TopicInfo
from ..io.kafka.sink import Destination, KafkaSink
from ..io.kafka.state_topic import TOPIC_CONFIG as STATE_TOPIC_CONFIG
from ..io.records import Polled
from ..io.registry.client import RegistryAccessError, RegistryUnavailable
from ..snapshot_meta import KafkaOffsets, ModelsListing, SnapshotMeta
from .commit import ServeCheckpoint, StateTopics, TransactionalProducer
from .config import ServeConfig
from .follower import StateFollower
from .group_state import GroupState, PartitionSettings
from .keys.records import keys_topic_name
from .loop import LoopOutputs, LoopSettings, PrequentialLoop
from .models.lineup import Lineup
from .models.promotion import PromotionWatch
from .publisher import ModelPublisher
from .snapshots import SnapshotStore, StartingPoint
from .telemetry.counts import UncommittedCounts
from .telemetry.lag import GroupLag
from .telemetry.metrics import ServiceMetrics

log = logging.getLogger(__name__)
PROBE_SECONDS = 5.0  # how often an idle session checks that the broker answers
COMMIT_STEP_SECONDS = 20.0  # the longest one step of a commit may wait for Kafka before the session gives up
# Pauses before a poll is tried again while the Schema Registry does not answer: doubling up to the longest.
REGISTRY_RETRY_FIRST, REGISTRY_RETRY_LONGEST = 0.5, 5.0


@dataclass(frozen=True)
class ServiceContext:
    """What every Kafka session of one `worker serve` process shares.

    start : the model and features a new group starts from; transactional_id : this replica's
    (stable with --instance-id); refusals : what the broker refused, kept across sessions (see
    KafkaSink); store : where local copies go (--snapshot-dir); messages : the message format
    (default: the one config.fields names, without a registry); published : where each commit's
    models go for the inference API (None: no API)."""
    client: KafkaClient
    config: ServeConfig
    metrics: ServiceMetrics
    start: StartingPoint
    transactional_id: str
    refusals: Refusals = field(default_factory=Refusals)
    store: SnapshotStore | None = None
    messages: MessageFormat | None = None
    published: PublishedModels | None = None  # where the inference API reads the committed models (--http-port)


class Session:
    """One Kafka session on what ``context`` gives (see the module docstring)."""

    # the clients, set while the session opens (a session that fails to open closes those it made)
    producer: Producer
    follower: StateFollower
    consumer: Consumer

    def __init__(self, context: ServiceContext):
        self.config, self.metrics, self.store = context.config, context.metrics, context.store
        self.messages = context.messages or message_format(context.config.fields)
        self.closing = False  # once set, nothing more is committed (a failed session's work is discarded)
        self.lags: list[GroupLag] = []  # measure the group's lag on its topics, with --metrics-port
        self._copied = -math.inf  # when the last local copy was written: the first commit writes one
        self._copy_due = False  # whether a commit since that copy changed what a copy would hold
        try:
            self._open(context)
        except BaseException:
            self.close()
            raise

    def _open(self, context: ServiceContext) -> None:
        config, metrics, client, start = self.config, self.metrics, context.client, context.start
        fresh, encoder = start.fresh, FeatureEncoder.from_json(start.features)
        timeout = config.commit.transaction_timeout
        limits = self._ensure_topics(client)
        batch_limit = min(limits.values())  # a batch of the state topic's records (chunks of 512 KiB) too
        # Under at-least-once a prediction is visible once sent, so the producer waits little to
        # fill a batch; under exactly-once it becomes visible at the commit anyway.
        raw = client.producer(transactional_id=context.transactional_id if config.commit.exactly_once else None,
                              transaction_timeout_s=timeout, max_request_bytes=max(limits.values()),
                              batch_bytes=batch_limit, linger_ms=20 if config.commit.exactly_once else 2,
                              report_offsets=config.keys.max_keys is not None)
        if config.commit.exactly_once:
            # Before reading the state topic: this aborts what an earlier run of this replica left
            # open, which would otherwise hold back everything after it for read_committed readers.
            raw.init_transactions(timeout)
            self.producer = TransactionalProducer(raw)
        else:
            self.producer = raw
        keys_topic = keys_topic_name(config.topics.states) if config.keys.keyed else None
        self.follower = StateFollower(client.reader(read_committed=True), config.topics.states,
                                      reopen=lambda: client.reader(read_committed=True), keys_topic=keys_topic)
        models = lineup(config)
        watch = PromotionWatch(models.names, config.models.promote_window, config.models.promote_margin) \
            if config.models.promote == "auto" else None
        self.group = GroupState(fresh, encoder, self.follower, start=config.consumer.start,
                                settings=partition_settings(config), lineup=models, referee=watch)
        metrics.models.show(_lineup_shown(self.group, watch))
        self.group.take_updates(self.follower.catch_up(timeout_s=timeout + 30))
        self.counts = UncommittedCounts()  # published at each commit: a failed session's work is not counted
        topics = config.topics
        self.sink = KafkaSink(self.producer, Destination(topics.output, limits[topics.output]),
                              Destination(topics.dlq, limits[topics.dlq]), context.refusals, COMMIT_STEP_SECONDS,
                              on_dead_letter=self.counts.dead_lettered,
                              input_timestamps=config.output.output_timestamp == "input")
        self.consumer = client.consumer(config.topics.input, config.topics.group, ConsumerOptions(
            instance_id=config.consumer.instance_id, session_timeout_s=config.consumer.session_timeout,
            start=config.consumer.start, read_committed=True, labels_topic=config.labels_topic))
        self.checkpoint = ServeCheckpoint(CheckpointPolicy(config.commit.checkpoint_every, config.commit.interval),
                                          self.producer, self.consumer, self.group, self.sink,
                                          StateTopics(config.topics.states, keys_topic), config.fields.label,
                                          COMMIT_STEP_SECONDS)
        self.publisher = ModelPublisher(context.published, self.group, topics.input, config.fields.label) \
            if context.published is not None else None
        base = start.base
        if base is not None and self.group.base is None and not self.group.latest:
            self.checkpoint.start_group_from(base)
            log.info("the group starts from a model", extra={"examples": base.model.n_examples_seen_
                                                               if base.model.is_fitted else 0})
        outputs = LoopOutputs(self.sink, self.sink, context.refusals)
        self.loop = PrequentialLoop(self.messages, self.group, outputs, metrics, self.counts, loop_settings(config),
                                    watch)
        self.consumer.subscribe(self._assigned, self._revoked, self._lost, label_starts=self.group.label_starts)
        self._probed = time.monotonic()
        if config.telemetry.metrics_port is not None:  # measured only to be shown
            self.lags = [GroupLag(client, topic, config.topics.group, config.consumer.start, metrics)
                         for topic in (config.topics.input, config.labels_topic) if topic is not None]
            for lag in self.lags:
                lag.start()

    def _ensure_topics(self, client: KafkaClient) -> dict[str, int]:
        """Create the output, dead-letter and state topics (and the keys topic) when missing; each one's
        record size limit."""
        config = self.config
        admin = client.admin()
        try:
            source = admin.topic(config.topics.input)
            partitions = source.partitions if source else 1
            if source is None:
                log.info("the input topic does not exist yet: waiting for it", extra={"topic": config.topics.input})
            dead_letter_bytes = max(2 << 20, config.fields.max_bytes + (64 << 10))
            wanted = {config.topics.output: (partitions, {"max.message.bytes": str(2 << 20)}),
                      config.topics.dlq: (partitions, {"max.message.bytes": str(dead_letter_bytes)}),
                      config.topics.states: (1, STATE_TOPIC_CONFIG)}
            if config.keys.keyed:  # each partition's keys in the partition of the same number
                wanted[keys_topic_name(config.topics.states)] = (partitions, STATE_TOPIC_CONFIG)
            if config.labels_topic is not None:
                _check_labels_topic(admin.topic(config.labels_topic), config.labels_topic, config.topics.input, source)
            limits = {}
            for name, (count, topic_config) in wanted.items():
                info = admin.topic(name)
                if info is None:
                    admin.create_topic(name, count, topic_config)
                    log.info("created a topic", extra={"topic": name, "partitions": count, "config": topic_config})
                    info = admin.topic(name)
                limits[name] = info.max_message_bytes if info else int(topic_config["max.message.bytes"])
            return limits
        finally:
            admin.close()

    # ---- group membership -------------------------------------------------------------------
    def _assigned(self, partitions: list[int]) -> dict[int, Start]:
        started = time.monotonic()
        committed = self.consumer.committed(partitions) if partitions else {}
        wait = self.config.commit.transaction_timeout + 10 if self.config.commit.exactly_once else 0.0
        starts = self.group.assign(partitions, committed, wait_s=wait, strict=self.config.commit.exactly_once)
        seconds = time.monotonic() - started
        self.metrics.assigned.set(len(self.group.owned))
        self.metrics.restore_seconds.set(seconds)
        self.metrics.state_read_bytes.set(self.follower.bytes_read)
        self.metrics.quality.show(self.group.quality_reports())
        restored = [p for p in partitions if self.group.owned[p].next_offset is not None]
        log.info("partitions assigned", extra={
            "partitions": partitions, "restored": restored, "state_topic": self.config.topics.states,
            "state_bytes_read": self.follower.bytes_read, "seconds": round(seconds, 3),
            "starts": {str(p): starts[p] for p in partitions}})
        return starts

    def _revoked(self, partitions: list[int]) -> None:
        if partitions and not self.closing:
            log.info("partitions being revoked: committing first", extra={"partitions": partitions})
            self.commit()
        self.group.release(partitions)
        self.metrics.assigned.set(len(self.group.owned))

    def _lost(self, partitions: list[int]) -> None:
        raise KafkaFailure(f"partitions {partitions} were lost: the group moved on without this member")

    # ---- running ----------------------------------------------------------------------------
    def run(self, should_stop: Callable[[], bool]) -> None:
        """Poll and process until should_stop() is true, then commit what is left."""
        config = self.config
        while not should_stop():
            polled = self.consumer.poll(0.5, config.consumer.max_poll_records)
            labels = self.consumer.polled_labels()
            self.group.take_updates(self.follower.poll(0.0))
            if (len(polled) or len(labels)) and self._process(polled, labels, should_stop):
                self.metrics.quality.show(self.group.quality_reports())
            if self.checkpoint.due(len(polled) + len(labels)) and self._broker_may_answer():
                self.commit()
            self._heartbeat(len(polled) + len(labels) > 0)
        if self._broker_may_answer():
            self.commit(last=True)
            log.info("stopped after a final commit")
        else:
            log.warning("stopping while the broker does not answer: what was not committed is left to the "
                        "partitions' next owner, which reads it again from the last commit")

    def _broker_may_answer(self) -> bool:
        """False while the last probe found the broker silent: a commit then waits for it to answer
        (building the state records only to fail would cost as much at every try; the work since
        the last commit is kept in memory, or read again by the next owner)."""
        return self.metrics.connected is not False

    def _process(self, polled: Polled, labels: Polled, should_stop: Callable[[], bool]) -> bool:
        """Process a poll; False when stopped first. While the Schema Registry cannot answer for its
        records (unreachable, overloaded, or refusing the credentials it took at start: they may
        have been rotated or their rights withdrawn), nothing of the poll is used: what came before
        is committed, the service is not ready, and the same poll is tried again after a growing
        pause (no dead letter: it is no record's fault)."""
        pause = REGISTRY_RETRY_FIRST
        while True:
            try:
                self.loop.process(polled, labels)
            except (RegistryUnavailable, RegistryAccessError) as failure:
                if self.metrics.registry_answers(False):
                    what = "refuses access" if isinstance(failure, RegistryAccessError) else "does not answer"
                    log.warning(f"the Schema Registry {what}: records wait for it",
                                extra={"cause": str(failure), "retry_in_seconds": pause})
                self.commit()
                if _wait_or_stop(pause, should_stop, self.metrics):
                    return False
                pause = min(REGISTRY_RETRY_LONGEST, pause * 2)
                continue
            if self.metrics.registry_answers(True):
                log.info("the Schema Registry answers again")
            return True

    def commit(self, last: bool = False) -> None:
        """Commit what changed; with --snapshot-dir, write a local copy of what was committed when
        --snapshot-interval has passed since the last copy, or at the session's ``last`` commit."""
        started = time.monotonic()
        try:
            committed = self.checkpoint.commit()
        except KafkaFailure:
            self.metrics.commit_failures.inc()  # (the session ends; nothing of this commit counts)
            raise
        if self.group.keys_committed():  # (committed or not, every key in memory is as its record is)
            self.metrics.keys.labels("in_memory").set(self.group.keys_held())
            self.metrics.keys.labels("evicted").set(self.group.keys_evicted())
        if committed:
            self.counts.publish(self.metrics)
            self.metrics.checkpoints.inc()
            self.metrics.last_checkpoint.set(time.time())
            self.metrics.commit_seconds.observe(time.monotonic() - started)
            self.metrics.state_bytes.inc(self.checkpoint.last_bytes)
            self._copy_due = self.store is not None
        if self.publisher is not None:
            self.publisher.publish()  # nothing learned is uncommitted now
        if self._copy_due and (last or time.monotonic() - self._copied >= self.config.snapshots.snapshot_interval):
            self._keep_local_copy()

    def _keep_local_copy(self) -> None:
        """The global model of the model the serve options describe (a group starts from it) as a
        snapshot file in --snapshot-dir, with every partition's next offset."""
        assert self.store is not None
        self._copied, self._copy_due = time.monotonic(), False
        lineup = self.group.lineup
        model = self.group.models[lineup.primary]
        if not model.model.is_fitted:
            return
        offsets = {p: s.next_offset for p, s in self.group.latest.items() if s.next_offset is not None}
        offsets.update(self.group.offsets())
        listing = ModelsListing(lineup.primary, self.group.models.served, _settings(self.group)) \
            if lineup.named else None
        path = self.store.save(model.model, SnapshotMeta(model.encoder, label=self.config.fields.label,
                                                         source=KafkaOffsets(self.config.topics.input, offsets),
                                                         models=listing))
        log.info("local copy written", extra={"snapshot": path.name,
                                              "offsets": {str(p): o for p, o in sorted(offsets.items())}})

    def _heartbeat(self, busy: bool) -> None:
        """Liveness and readiness; every PROBE_SECONDS, ask the broker where the owned partitions end
        (only to hear it answer) and whether the group's states are all read."""
        metrics = self.metrics
        now = metrics.beat()
        # between probes: what the last one found; before the first: yes (opening the session just talked to it)
        answers = busy or metrics.connected is not False
        if now - self._probed > PROBE_SECONDS:
            self._probed = now
            try:
                owned = sorted(self.group.owned)
                metrics.assigned.set(len(owned))
                # while records flow, the ends the fetches report: asking the broker would stall the loop;
                # else one partition's, which is enough to hear it answer
                if owned:
                    self.consumer.end_offsets(owned if busy else owned[:1], cached=busy)
                else:
                    self.consumer.committed([0])
                if self.follower.reader.caught_up(cached=busy):
                    metrics.caught_up()
                answers = True
            except KafkaFailure as failure:
                answers, reason = busy, failure
        if metrics.broker_answers(answers):
            if answers:
                log.info("the broker answers again")
            else:
                log.warning("the broker does not answer", extra={"cause": str(reason)})
        metrics.serving(bool(self.group.owned), answers)

    def close(self) -> None:
        """Leave the group and close the clients, committing nothing more; an open transaction is aborted."""
        self.closing = True
        for lag in self.lags:
            lag.stop()
        producer: Producer | None = getattr(self, "producer", None)
        consumer: Consumer | None = getattr(self, "consumer", None)
        follower: StateFollower | None = getattr(self, "follower", None)
        steps: list[Callable[[], None]] = []
        # With the broker silent, an abort could only wait: the broker aborts the transaction
        # itself (its timeout, or the next owner's fencing), and nothing is left to flush.
        answers = self._broker_may_answer()
        if isinstance(producer, TransactionalProducer) and producer.open and answers:
            steps.append(lambda: producer.abort_transaction(5.0))
        if consumer is not None:
            steps.append(consumer.close)
        if producer is not None:
            steps.append(partial(producer.close, 5.0 if answers else 0.0))
        if follower is not None:
            steps.append(follower.close)
        for step in steps:
            try:
                step()
            except Exception as error:  # closing must go on whatever one client says
                log.debug("an error while closing", extra={"error": str(error)})



def partition_settings(config: ServeConfig) -> PartitionSettings:
    """What every owned partition is given, of a ServeConfig."""
    return PartitionSettings(classes=config.model.classes or None, labels=config.labels, drift=config.drift,
                             key_prior_weight=config.keys.key_prior_weight if config.keys.keyed else None,
                             max_keys=config.keys.max_keys)


def loop_settings(config: ServeConfig) -> LoopSettings:
    """What the loop is told, of a ServeConfig."""
    return LoopSettings(learn=config.model.learn, max_classes=config.model.max_classes, fields=config.fields,
                        labels=config.labels, output_challengers=config.models.output_challengers,
                        explain=config.output.explain,
                        key_prior_weight=config.keys.key_prior_weight if config.keys.keyed else None,
                        key_ttl_ms=None if config.keys.key_ttl is None else int(config.keys.key_ttl * 1000))


def lineup(config: ServeConfig) -> Lineup:
    """The models learned beside the one the serve options describe, of a ServeConfig."""
    models = config.models
    return Lineup(models.name, {name: options.build for name, options in
                                models.challenger_models(config.model.kind).items()}, models.named)


def _settings(group: GroupState) -> dict[str, str]:
    """Each of the group's models' settings, by name."""
    return {name: repr(group.lineup.maker(name, group.fresh)()) for name in group.lineup.names}


def _lineup_shown(group: GroupState, watch: PromotionWatch | None
                  ) -> Callable[[], tuple[str, dict[str, str], dict[str, float]]]:
    """What /metrics shows of the group's models, when scraped: the served one's name, each one's
    settings and its log-loss over the promotion's window."""
    settings = _settings(group)

    def shown() -> tuple[str, dict[str, str], dict[str, float]]:
        return group.models.served, settings, {} if watch is None else watch.log_losses()
    return shown


def _check_labels_topic(labels: TopicInfo | None, name: str, input_topic: str, source: TopicInfo | None) -> None:
    """A labels topic is read beside the input by partition number: it must have as many partitions."""
    if labels is None:
        raise ConfigError(f"the labels topic {name} does not exist: create it with as many partitions as "
                          f"{input_topic}, and write each label keyed like the message it labels.")
    if source is not None and labels.partitions != source.partitions:
        raise ConfigError(f"the labels topic {name} has {labels.partitions} partitions and {input_topic} "
                          f"{source.partitions}: a label is read by partition number, beside the message it "
                          f"labels, so both topics need as many (and each label keyed like its message).")


def _wait_or_stop(seconds: float, should_stop: Callable[[], bool], metrics: ServiceMetrics) -> bool:
    """Pause, staying alive for /healthz; True when asked to stop meanwhile."""
    deadline = time.monotonic() + seconds
    while not should_stop():
        now = metrics.beat()
        if now >= deadline:
            return False
        time.sleep(min(0.1, deadline - now))
    return True
