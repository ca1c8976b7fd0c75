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

from nbstream.features import FeatureSpec

from .checkpoint import CheckpointPolicy
from .config import ConfigError, ServeConfig
from .loop import PrequentialLoop
from .messages import MessageFormat
from .metrics_http import ServiceMetrics, serve_metrics
from .sinks.kafka import KafkaSink
from .sources.kafka import KafkaSource
from .state import SnapshotStore

log = logging.getLogger(__name__)


def restore(config: ServeConfig, store: SnapshotStore):
    """(model, spec, positions) from the newest intact snapshot, or a fresh start."""
    restored = store.latest()
    if restored is None:
        log.info("no snapshot in %s: starting a fresh %s model", config.snapshot_dir, config.model.kind)
        return config.model.build(), config.feature_spec(), {}
    model, meta, path = restored
    source = meta.get("source", {})
    if source.get("topic") != config.input:
        raise ConfigError(f"{path} holds the state of topic {source.get('topic')!r}, not {config.input!r}.")
    positions = {TopicPartition(config.input, int(p)): int(o) for p, o in source["offsets"].items()}
    log.info("restored %s: %d examples, offsets %s", path.name, model.n_examples_seen_, source["offsets"])
    return model, FeatureSpec.from_json(meta["features"]), positions


def serve(config: ServeConfig, stop: threading.Event | None = None) -> None:
    stop = stop or threading.Event()
    store = SnapshotStore(config.snapshot_dir, config.keep_snapshots)
    model, spec, positions = restore(config, store)
    metrics = ServiceMetrics()
    http = serve_metrics(metrics, config.metrics_port, config.metrics_host) if config.metrics_port is not None else None
    if http:
        log.info("metrics on http://%s:%d/metrics", *http.server_address[:2])
    source = KafkaSource(config.bootstrap, config.input, config.group, positions, start=config.start,
                         max_poll_records=config.max_poll_records, instance_id=config.instance_id,
                         session_timeout_ms=int(config.session_timeout * 1000))
    sink = KafkaSink(config.bootstrap, config.output, config.dlq)
    fmt = MessageFormat(config.id_field, config.features_field, config.text_field, config.label_field,
                        config.feature_names, config.max_message_bytes)
    policy = CheckpointPolicy(config.checkpoint_every, config.checkpoint_interval)
    loop = PrequentialLoop(model, spec, fmt, source, sink, store, policy, metrics, config.input,
                           classes=config.classes or None)
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
