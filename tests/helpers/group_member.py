"""A consumer group member in a process of its own, so a test can pause it past its session timeout.

    python -m tests.helpers.group_member BOOTSTRAP CLIENT TOPIC GROUP

It joins the group, prints "joined", then answers each line on stdin with "member" when it may
hand out its group metadata (to commit a transaction) or "lapsed" when the client refuses.
"""

from __future__ import annotations

import sys

from worker.io.kafka.client import ConsumerOptions, KafkaFailure
from worker.io.kafka.connect import connect
from worker.io.kafka.settings import KafkaSettings

SESSION_TIMEOUT_S = 6


def main(bootstrap: str, client: str, topic: str, group: str) -> None:
    consumer = connect(KafkaSettings(bootstrap, client=client)).consumer(
        topic, group, ConsumerOptions(session_timeout_s=SESSION_TIMEOUT_S))
    consumer.subscribe(lambda partitions: None, lambda partitions: None, lambda partitions: None)
    while not consumer.assignment():
        consumer.poll(0.5, 10)
    print("joined", flush=True)
    for _ in sys.stdin:
        try:
            consumer.group_metadata()
            print("member", flush=True)
        except KafkaFailure:
            print("lapsed", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
