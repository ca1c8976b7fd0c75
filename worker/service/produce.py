"""`worker produce`: load Parquet rows into a topic as JSON messages (for demos and benchmarks).

Each row becomes {"id": ..., "features": [...] or "text": ..., "label": ...}, keyed by its id.
Every record is confirmed by the broker; the count of those that were not is reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import orjson

from ..errors import ConfigError
from ..io.kafka.client import DeliveryFailed, KafkaClient, KafkaFailure
from ..io.kafka.sink import record_bytes
from ..io.parquet.source import expand_paths, read_batches

CONFIRM_EVERY = 10_000  # records between confirmations: bounds what a failure leaves unconfirmed


@dataclass
class Produced:
    sent: int
    failed: int
    error: str | None = None  # the first failure, if any


def _topic_limit(client: KafkaClient, topic: str) -> int:
    """The topic's record size limit; the topic is created (one partition) when missing."""
    admin = client.admin()
    try:
        info = admin.topic(topic)
        if info is None:
            admin.create_topic(topic, 1, {})
            info = admin.topic(topic)
        return info.max_message_bytes if info else 1_048_588
    finally:
        admin.close()


def produce(client: KafkaClient, paths: list[str], topic: str, *, features: str | None = None,
            text: str | None = None, label: str | None = None, id_column: str | None = None, rate: float = 0.0,
            limit: int | None = None, stamp: bool = False, timeout_s: float = 60.0) -> Produced:
    """Send rows as messages; ``rate`` messages/s (0: as fast as possible).

    stamp: add "sent_at" (Unix seconds) to each message, for latency measurements.
    """
    if bool(features) == bool(text):
        raise ConfigError("give exactly one of --features (a list column) or --text (a string column).")
    limit_bytes = _topic_limit(client, topic)
    producer = client.producer(linger_ms=5, batch_bytes=limit_bytes)
    columns = [c for c in (features, text, label, id_column) if c]
    result, started = Produced(0, 0), time.monotonic()

    def confirm() -> None:
        try:
            producer.flush(timeout_s)
        except DeliveryFailed as failed:
            result.failed += len(failed.failures)
            result.error = result.error or failed.failures[0].error
        except KafkaFailure as failure:
            raise KafkaFailure(f"{failure} ({result.sent:,} sent, the last {CONFIRM_EVERY:,} at most unconfirmed)")

    try:
        for batch in read_batches(expand_paths(paths), columns, CONFIRM_EVERY):
            data = {name: batch.data.column(name).to_pylist() for name in columns}
            for i in range(batch.data.num_rows):
                if limit is not None and result.sent >= limit:
                    break
                message = {"features": data[features][i]} if features else {"text": data[text][i]}
                if label:
                    message["label"] = data[label][i]
                key = None
                if id_column:
                    message["id"] = data[id_column][i]
                    key = str(message["id"]).encode()
                if rate:
                    delay = started + result.sent / rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                if stamp:
                    message["sent_at"] = time.time()
                value = orjson.dumps(message)
                result.sent += 1
                if record_bytes(key, value, []) > limit_bytes:  # the broker would refuse it (and its batch)
                    result.failed += 1
                    result.error = result.error or (f"a message of {len(value):,} bytes exceeds the topic's limit "
                                                    f"of {limit_bytes:,}")
                    continue
                producer.send(topic, value, key=key)
            confirm()
            if limit is not None and result.sent >= limit:
                break
        confirm()
        return result
    finally:
        producer.close(timeout_s=5.0)
