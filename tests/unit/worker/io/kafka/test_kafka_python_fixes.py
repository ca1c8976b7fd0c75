"""The fixes applied to kafka-python: its client's connection delay is in the unit its
producer's sender waits in (milliseconds)."""

from __future__ import annotations

from types import SimpleNamespace

import kafka
import pytest
from kafka.net import compat

from worker.io.kafka import kafka_python_fixes


@pytest.mark.skipif(kafka.__version__ != kafka_python_fixes.FIXED_VERSION, reason="fixes one kafka-python release")
def test_the_client_tells_its_sender_the_reconnection_delay_in_milliseconds():
    manager = SimpleNamespace(connection_delay=lambda node: 0.75)  # the manager's seconds
    client = SimpleNamespace(_manager=manager)
    assert compat.KafkaNetClient.connection_delay(client, 1) == 750.0
