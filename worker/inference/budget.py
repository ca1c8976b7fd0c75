"""A share of a CPU for the inference API beside the Kafka loop.

The API and the loop of `worker serve` are threads of one process: however many clients ask, the
API's thread may run only so much Python before the loop, which needs the same interpreter lock,
slows down. ``CpuBudget`` lets the API's thread use ``share`` of a CPU, on average: before each
request it looks at the CPU time its thread has used (``time.thread_time``) against what the share
has earned since, and when it is ahead, waits until it is not (an ``asyncio.sleep``, which leaves
the lock to the loop). Requests past the budget wait in line rather than take the loop's time; a
budget earned while idle is kept up to ``BURST_SECONDS`` of CPU, so a lone request never waits.
"""

from __future__ import annotations

import asyncio
import time

BURST_SECONDS = 0.05


class CpuBudget:
    """At most ``share`` (0 < share <= 1) of a CPU for the thread that awaits ``spend``; None: no bound."""

    def __init__(self, share: float | None):
        self.share = share
        self._balance = BURST_SECONDS  # CPU seconds the thread may still use
        self._seen: tuple[float, float] | None = None  # (wall time, thread CPU time) when last looked
        self._line = asyncio.Lock()  # requests pass one at a time, each once the balance allows

    async def spend(self) -> None:
        """Return once the thread is within its share (at once without a bound); requests that
        wait go on one by one, in the order they came."""
        if self.share is None:
            return
        async with self._line:
            self._account(self.share)
            while self._balance < 0:
                await asyncio.sleep(-self._balance / self.share)
                self._account(self.share)

    def _account(self, share: float) -> None:
        now, used = time.monotonic(), time.thread_time()
        if self._seen is not None:
            wall, cpu = self._seen
            self._balance = min(BURST_SECONDS, self._balance + (now - wall) * share - (used - cpu))
        self._seen = (now, used)
