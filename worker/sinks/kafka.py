"""Predictions and dead letters to Kafka topics."""

from __future__ import annotations

from kafka import KafkaProducer


class KafkaSink:
    def __init__(self, bootstrap: str, predictions_topic: str, dead_letter_topic: str, **settings):
        self.predictions_topic = predictions_topic
        self.dead_letter_topic = dead_letter_topic
        # Predictions are small and many: wait up to 20 ms to fill batches of up to 1 MiB.
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, batch_size=1 << 20,
                                      max_request_size=16 * 1024 * 1024, **settings)

    def prediction(self, key: bytes | None, value: bytes) -> None:
        self.producer.send(self.predictions_topic, key=key, value=value)

    def dead_letter(self, record, error: str, column: str) -> None:
        """The original message, unchanged, with the error and its origin in headers."""
        headers = [("error", error.encode()), ("error.field", column.encode()),
                   ("source.topic", record.topic.encode()), ("source.partition", str(record.partition).encode()),
                   ("source.offset", str(record.offset).encode())]
        self.producer.send(self.dead_letter_topic, key=record.key, value=record.value, headers=headers)

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.close()
