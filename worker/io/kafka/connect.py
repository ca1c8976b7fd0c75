"""The Kafka client library the settings ask for (the only module that knows both)."""

from __future__ import annotations

from ...errors import UserError
from .client import KafkaClient
from .kafka_python import KafkaPythonClient
from .settings import KafkaSettings


def connect(settings: KafkaSettings) -> KafkaClient:
    """A client of the cluster the settings name, through kafka-python or (``client="confluent"``) librdkafka."""
    if settings.client == "confluent":
        try:
            from .confluent import ConfluentClient  # optional: the confluent extra
        except ModuleNotFoundError:
            raise UserError("--kafka-client confluent needs the confluent-kafka package: "
                            "pip install 'nbstream[confluent]'.") from None
        return ConfluentClient(settings)
    return KafkaPythonClient(settings)
