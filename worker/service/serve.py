"""`worker serve`: the long-lived Kafka service, wired from a ServeConfig.

Start: load the newest intact snapshot in --snapshot-dir (model, features, offsets) or
build a fresh model; seek every assigned partition to the snapshot's offset. Stop on
SIGTERM or SIGINT: finish the batch in hand, write a final checkpoint, close, exit 0.
"""

from __future__ import annotations

import logging
import signal
import threading

from kafka import TopicPartition

from ..checkpoint import CheckpointPolicy, Checkpointer
from ..config import ServeConfig
from ..errors import ConfigError
from ..io.kafka.sink import KafkaSink
from ..io.kafka.source import KafkaSource
from ..snapshot_meta import KafkaOffsets
from .loop import PrequentialLoop
from .observability import ServiceMetrics, serve_metrics
from .state import ServiceState, SnapshotStore

log = logging.getLogger(__name__)


def restore(config: ServeConfig, store: SnapshotStore):
    """(model, features, positions) from the newest intact snapshot, or a fresh start."""
    restored = store.latest()
    if restored is None:
        log.info("no snapshot in %s: starting a fresh %s model", config.snapshot_dir, config.model.kind)
        return config.model.build(), config.feature_spec().encoder(), {}
    model, meta, path = restored
    source = meta.source
    if not isinstance(source, KafkaOffsets) or source.topic != config.input:
        topic = source.topic if isinstance(source, KafkaOffsets) else None
        raise ConfigError(f"{path} holds the state of topic {topic!r}, not {config.input!r}.")
    positions = {TopicPartition(config.input, p): o for p, o in source.offsets.items()}
    log.info("restored %s: %d examples, offsets %s", path.name, model.n_examples_seen_, source.offsets)
    return model, meta.features, positions


def serve(config: ServeConfig, stop: threading.Event | None = None) -> None:
    stop = stop or threading.Event()
    store = SnapshotStore(config.snapshot_dir, config.keep_snapshots)
    model, features, positions = restore(config, store)
    metrics = ServiceMetrics()
    http = serve_metrics(metrics, config.metrics_port, config.metrics_host) if config.metrics_port is not None else None
    if http:
        log.info("metrics on http://%s:%d/metrics", *http.server_address[:2])
    source = KafkaSource(config.bootstrap, config.input, config.group, positions, start=config.start,
                         max_poll_records=config.max_poll_records, instance_id=config.instance_id,
                         session_timeout_ms=int(config.session_timeout * 1000))
    sink = KafkaSink(config.bootstrap, config.output, config.dlq)
    checkpointer = Checkpointer(CheckpointPolicy(config.checkpoint_every, config.checkpoint_interval),
                                outputs=[sink], state=ServiceState(store, model, features, source, config.input),
                                upstream=source)
    loop = PrequentialLoop(model, features, config.fields, source, predictions=sink, rejects=sink,
                           checkpointer=checkpointer, metrics=metrics, classes=config.classes or None)
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        loop.run(stop.is_set)
        log.info("stopped after a final checkpoint")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        source.close()
        sink.close()
        if http:
            http.shutdown()
