"""`worker produce`: load Parquet rows into a topic as JSON messages (for demos and benchmarks).

Each row becomes {"id": ..., "features": [...] or "text": ..., "label": ...}, keyed by its id.
"""

from __future__ import annotations

import json
import time

from kafka import KafkaProducer

from ..errors import ConfigError
from ..io.parquet.source import expand_paths, read_batches


def produce(paths: list[str], bootstrap: str, topic: str, *, features: str | None = None, text: str | None = None,
            label: str | None = None, id_column: str | None = None, rate: float = 0.0, limit: int | None = None,
            stamp: bool = False) -> int:
    """Send rows as messages; ``rate`` messages/s (0: as fast as possible). Returns the count.

    stamp: add "sent_at" (Unix seconds) to each message, for latency measurements.
    """
    if bool(features) == bool(text):
        raise ConfigError("give exactly one of features (a list column) or text (a string column).")
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_request_size=16 * 1024 * 1024)
    columns = [c for c in (features, text, label, id_column) if c]
    sent, started = 0, time.monotonic()
    try:
        for batch in read_batches(expand_paths(paths), columns, 10_000):
            data = {name: batch.data.column(name).to_pylist() for name in columns}
            for i in range(batch.data.num_rows):
                if limit is not None and sent >= limit:
                    return sent
                message = {"features": data[features][i]} if features else {"text": data[text][i]}
                if label:
                    message["label"] = data[label][i]
                key = None
                if id_column:
                    message["id"] = data[id_column][i]
                    key = str(message["id"]).encode()
                if rate:
                    delay = started + sent / rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                if stamp:
                    message["sent_at"] = time.time()
                producer.send(topic, key=key, value=json.dumps(message).encode())
                sent += 1
        return sent
    finally:
        producer.flush()
        producer.close()
