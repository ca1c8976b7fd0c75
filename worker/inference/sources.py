"""Where the answering models come from: what a request handler asks of them.

``PublishedModels``: the models ``worker serve`` publishes after each commit, read by requests in
another thread (the Kafka loop swaps in a new dict; a reader takes whichever was there), with the
requests that wait for a position woken at each publication.
``SnapshotModel`` (``snapshot_file``): one snapshot file, reloaded when it is replaced.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Protocol

from .answering import AnsweringModel
from .errors import NotFound, NotReady

MOST_KEYS_ASKED = 10_000  # keys waiting to be looked up at once


class ModelSource(Protocol):
    """The models a server answers with, by name."""

    def models(self) -> Mapping[str, AnsweringModel]:
        """Every model there is now, current (each immutable)."""

    def names(self) -> list[str]:
        """Every name the server answers for, including models not there yet."""

    def ready(self) -> bool:
        """Whether the model served first can answer (the server's readiness)."""

    async def changed(self, timeout_s: float) -> None:
        """Return once the models may have changed, or after timeout_s."""

    def ask_key(self, key: str | int) -> None:
        """Have the next models look up ``key`` (a model per key whose state cannot tell at once)."""


class PublishedModels:
    """The latest published state of each of ``names``; ``publish`` replaces them all at once, so
    a request reads one consistent set (the same commit for every model). Keys asked of a model
    per key (``ask_key``) are looked up by the next publication (``take_keys``)."""

    def __init__(self, names: list[str]) -> None:
        self._names = list(names)
        self._models: Mapping[str, AnsweringModel] = {}
        self._served: str | None = None
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._keys_asked: set[str | int] = set()
        self._lock = threading.Lock()

    def publish(self, models: Mapping[str, AnsweringModel], served: str) -> None:
        """Make ``models`` the ones answering (``served``: the one whose predictions are sent)
        and wake the requests waiting for them; from the Kafka loop's thread."""
        self._models, self._served = dict(models), served  # reference swaps: readers never see a half-made set
        with self._lock:
            waiting, self._waiting = self._waiting, []
        for loop, future in waiting:
            loop.call_soon_threadsafe(_settle, future)

    def models(self) -> Mapping[str, AnsweringModel]:
        return self._models

    def ask_key(self, key: str | int) -> None:
        with self._lock:
            if len(self._keys_asked) >= MOST_KEYS_ASKED:
                raise NotReady(f"over {MOST_KEYS_ASKED:,} keys are being looked up; ask again shortly.")
            self._keys_asked.add(key)

    def take_keys(self) -> set[str | int]:
        """The keys asked since the last publication, for the next one to look up (Kafka loop's thread)."""
        with self._lock:
            asked, self._keys_asked = self._keys_asked, set()
        return asked

    def names(self) -> list[str]:
        return sorted(set(self._names) | set(self._models))

    def ready(self) -> bool:
        served = self._models.get(self._served) if self._served is not None else None
        return served is not None and served.ready

    async def changed(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._waiting.append((loop, future))
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            with self._lock:
                if (loop, future) in self._waiting:
                    self._waiting.remove((loop, future))


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def includes(position: Mapping[str, int], asked: Mapping[str, int]) -> bool:
    """Whether a state at ``position`` includes every offset before ``asked``'s."""
    return all(position.get(key, 0) >= offset for key, offset in asked.items())


def model_named(source: ModelSource, name: str) -> AnsweringModel:
    """The model ``name`` (NotFound: no such model; NotReady: not published yet)."""
    model = source.models().get(name)
    if model is not None:
        return model
    if name in source.names():
        raise NotReady(f"model {name!r} has no committed state yet: the service has not committed since it "
                       f"started.")
    raise NotFound(f"no model is named {name[:80]!r}; the models are {source.names()}.")


async def model_knowing(source: ModelSource, model: AnsweringModel, key: str | int | None,
                        wait_ms: int, deadline: float | None = None) -> AnsweringModel:
    """``model``, or when it cannot tell ``key``'s model yet, the first model published after it that
    can, waiting at most wait_ms for it, or until ``deadline`` (time.monotonic(); NotReady beyond).
    A later model includes ``model``'s position."""
    deadline = time.monotonic() + wait_ms / 1000 if deadline is None else deadline
    while key is not None and model.ready and model.keys is not None and model.keys.model_of(key) is None:
        source.ask_key(key)  # (asked even when there is no time to wait: a request again finds it looked up)
        left = deadline - time.monotonic()
        if left <= 0:
            raise NotReady(f"the key {str(key)[:80]!r} of model {model.name!r} was not looked up within {wait_ms} ms "
                           f"(it is, at the service's next commit).")
        await source.changed(left)
        model = model_named(source, model.name)
    return model


async def model_at(source: ModelSource, name: str, min_position: dict[str, int] | None,
                   wait_ms: int) -> AnsweringModel:
    """The model ``name`` once its state includes min_position, waiting at most wait_ms for it
    (NotReady beyond, with the position reached)."""
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        model = model_named(source, name)
        if min_position is None or includes(model.position, min_position):
            return model
        left = deadline - time.monotonic()
        if left <= 0:
            reached = {key: model.position.get(key, 0) for key in min_position}
            raise NotReady(f"the committed state of model {name!r} has not reached min_position {min_position} "
                           f"within {wait_ms} ms: it is at {reached}.")
        await source.changed(left)
