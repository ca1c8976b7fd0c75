"""How far the group is behind on every partition of its input, for the lag metrics.

The lag of a partition is its end (the last stable offset, what read_committed consumers can
read) less the group's committed offset: the same for every replica, for the partitions of a
replica that died too, whose lag then grows until another replica takes them over. A
partition the group never committed is behind by all it holds when the service starts at the
earliest offset, and by nothing when it starts at the latest.

It is measured every LAG_SECONDS on a thread of its own, through an admin client of its own, so
the loop never waits for it; a measure that fails keeps the last one.
"""

from __future__ import annotations

import logging
import threading

from ...errors import UserError
from ...io.kafka.client import Admin, KafkaClient, KafkaFailure
from .metrics import ServiceMetrics

log = logging.getLogger(__name__)
LAG_SECONDS = 5.0


def partition_lags(ends: dict[int, int], committed: dict[int, int | None], firsts: dict[int, int],
                   start: str) -> dict[int, int]:
    """Messages not yet committed by the group, per partition.

    ends : each partition's end; committed : the group's next offset (None: never committed);
    firsts : the first offset of the partitions never committed; start : "earliest" or "latest".

    >>> partition_lags({0: 10, 1: 7, 2: 5}, {0: 4, 1: None, 2: None}, {1: 2, 2: 0}, "earliest")
    {0: 6, 1: 5, 2: 5}
    >>> partition_lags({0: 10, 1: 7}, {0: 12, 1: None}, {1: 2}, "latest")
    {0: 0, 1: 0}
    """
    lags = {}
    for partition, end in ends.items():
        done = committed.get(partition)
        if done is None:
            done = firsts[partition] if start == "earliest" else end
        lags[partition] = max(0, end - done)
    return lags


class GroupLag:
    """Measures the group's lag on its input every ``every_s`` seconds and reports it to the metrics,
    from ``start()`` until ``stop()``."""

    def __init__(self, client: KafkaClient, topic: str, group: str, start: str, metrics: ServiceMetrics,
                 every_s: float = LAG_SECONDS):
        self.client, self.topic, self.group, self.start_from = client, topic, group, start
        self.metrics, self.every_s = metrics, every_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="consumer-lag", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end (a measure under way is not waited for)."""
        self._stopped.set()

    def measure(self, admin: Admin) -> dict[int, int] | None:
        """The lag of every partition of the input; None while the topic does not exist."""
        info = admin.topic(self.topic)
        if info is None:
            return None
        partitions = list(range(info.partitions))
        committed = admin.group_offsets(self.group, self.topic, partitions)
        ends = admin.end_offsets(self.topic, partitions)
        never = [p for p in partitions if committed[p] is None]
        firsts = admin.start_offsets(self.topic, never) if never and self.start_from == "earliest" else {}
        return partition_lags(ends, committed, firsts, self.start_from)

    def _run(self) -> None:
        admin: Admin | None = None
        try:
            while not self._stopped.is_set():
                try:
                    admin = admin or self.client.admin()
                    lags = self.measure(admin)
                    if lags is not None:
                        self.metrics.lag.update(self.topic, self.group, lags)
                except (KafkaFailure, UserError) as failure:  # the loop meets these too, and reports them
                    log.debug("the consumer lag was not measured", extra={"cause": str(failure)})
                self._stopped.wait(self.every_s)
        except Exception:  # a bug: said once, with its traceback; the service goes on without the lag
            log.exception("the consumer lag is no longer measured")
        finally:
            if admin is not None:
                admin.close()
