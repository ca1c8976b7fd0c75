"""Predictions and dead letters to Kafka topics, through one producer."""

from __future__ import annotations

from kafka import KafkaProducer

from nbstream.arrow import RowProblems


class KafkaSink:
    """The prediction sink and the reject sink of `worker serve`.

    count : messages sent to the dead-letter topic by this process
    """

    def __init__(self, bootstrap: str, predictions_topic: str, dead_letter_topic: str, **settings):
        self.predictions_topic = predictions_topic
        self.dead_letter_topic = dead_letter_topic
        self.count = 0
        # Predictions are small and many: wait up to 20 ms to fill batches of up to 1 MiB.
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, batch_size=1 << 20,
                                      max_request_size=16 * 1024 * 1024, **settings)

    def prediction(self, key: bytes | None, value: bytes) -> None:
        self.producer.send(self.predictions_topic, key=key, value=value)

    def reject(self, records: list, problems: RowProblems) -> None:
        """Each bad record, unchanged, to the dead-letter topic with the error and its origin in headers."""
        for row, column, message in problems:
            record = records[row]
            headers = [("error", message.encode()), ("error.field", column.encode()),
                       ("source.topic", record.topic.encode()), ("source.partition", str(record.partition).encode()),
                       ("source.offset", str(record.offset).encode())]
            self.producer.send(self.dead_letter_topic, key=record.key, value=record.value, headers=headers)
            self.count += 1

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.close()
