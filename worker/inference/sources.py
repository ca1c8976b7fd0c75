"""Where the answering models come from: what a request handler asks of them.

``PublishedModels``: the models ``worker serve`` publishes after each commit, read by requests in
another thread (the Kafka loop swaps in a new dict; a reader takes whichever was there).
``SnapshotModel`` (``snapshot_file``): one snapshot file, reloaded when it is replaced.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Protocol

from .answering import AnsweringModel
from .errors import NotReady, RequestError

POLL_SECONDS = 0.005  # how often a request waiting for a position looks again
LONGEST_WAIT_MS = 60_000  # the most a request may ask to wait for a position (timeout_ms)
DEFAULT_WAIT_MS = 5_000


class ModelSource(Protocol):
    """The models a server answers with, by name."""

    def models(self) -> Mapping[str, AnsweringModel]:
        """Every model, current (each immutable)."""

    def ready(self) -> bool:
        """Whether every model can answer."""


class PublishedModels:
    """The latest published state of each model; ``publish`` replaces them all at once, so a
    request reads one consistent set (the same commit for every model)."""

    def __init__(self) -> None:
        self._models: Mapping[str, AnsweringModel] = {}

    def publish(self, models: Mapping[str, AnsweringModel]) -> None:
        self._models = dict(models)  # one reference swap: readers never see a half-made set

    def models(self) -> Mapping[str, AnsweringModel]:
        return self._models

    def ready(self) -> bool:
        return bool(self._models) and all(model.ready for model in self._models.values())


def includes(position: Mapping[str, int], asked: Mapping[str, int]) -> bool:
    """Whether a state at ``position`` includes every offset before ``asked``'s."""
    return all(position.get(key, 0) >= offset for key, offset in asked.items())


def min_position_of(value: object) -> dict[str, int] | None:
    """The parameter min_position, checked: {"TOPIC:PARTITION": next offset} (None: not given)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
            isinstance(key, str) and ":" in key and type(offset) is int and offset >= 0
            for key, offset in value.items()):
        raise RequestError("min_position must map \"TOPIC:PARTITION\" to an offset (an integer >= 0), as a "
                           "response's position does.")
    return value


def wait_ms_of(value: object) -> int:
    """The parameter timeout_ms, checked (the default when not given)."""
    if value is None:
        return DEFAULT_WAIT_MS
    if type(value) is not int or not 0 <= value <= LONGEST_WAIT_MS:
        raise RequestError(f"timeout_ms must be an integer from 0 to {LONGEST_WAIT_MS}; got {str(value)[:40]}.")
    return value


async def model_at(source: ModelSource, name: str, min_position: dict[str, int] | None,
                   wait_ms: int) -> AnsweringModel:
    """The model ``name`` once its state includes min_position, waiting at most wait_ms
    (NotReady beyond; KeyError when there is no such model)."""
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        model = source.models()[name]
        if min_position is None or includes(model.position, min_position):
            return model
        if time.monotonic() >= deadline:
            behind = {key: model.position.get(key, 0) for key in min_position}
            raise NotReady(f"the committed state of model {name!r} has not reached min_position {min_position} "
                           f"within {wait_ms} ms: it is at {behind}.")
        await asyncio.sleep(POLL_SECONDS)
