"""The partition states of a group as this replica sees them: its own, live; the others', as committed.

The state topic is read from the beginning when a session starts and followed from then on
(read_committed). When partitions are assigned, each one's latest committed state is taken
over (or a fresh one made) and reading resumes at its next offset; revoked partitions are
committed by the caller first, then released. The base state, when there is one, is a model
the group started from (--init-model, or a snapshot folder of an earlier version).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import nbstream
from nbstream.arrow import CategoricalEncoder, FeatureEncoder

from ..errors import ConfigError
from ..io.kafka.client import KafkaFailure, Reader
from ..io.kafka.state_topic import StateAssembler
from .global_model import GlobalModel
from .partition_state import PartitionState

log = logging.getLogger(__name__)
BASE = "base"


def state_name(partition: int) -> str:
    return f"partition-{partition}"


def partition_of(name: str) -> int | None:
    prefix, _, number = name.partition("-")
    return int(number) if prefix == "partition" and number.isdigit() else None


class StateFollower:
    """Reads the state topic from its beginning and keeps following it."""

    def __init__(self, reader: Reader, topic: str):
        self.reader, self.topic = reader, topic
        self.assembler = StateAssembler()
        self.bytes_read = 0
        reader.assign(topic)

    def poll(self, timeout_s: float = 0.0) -> list[str]:
        """Names whose newest state became complete in what was read now."""
        completed = []
        for record in self.reader.poll(timeout_s):
            self.bytes_read += len(record.value or b"")
            name = self.assembler.add(record.key, record.value)
            if name is not None:
                completed.append(name)
        return completed

    def catch_up(self, timeout_s: float) -> list[str]:
        """Read to the end of the topic (its last stable offset); names completed on the way."""
        deadline = time.monotonic() + timeout_s
        completed = self.poll(0.2)
        while not self.reader.caught_up():
            if time.monotonic() > deadline:
                raise KafkaFailure(f"the state topic {self.topic} could not be read to its end within {timeout_s:.0f}s")
            completed += self.poll(0.2)
        return completed


class GroupState:
    """fresh() : an unfitted model with the configured parameters; encoder : the configured encoder."""

    def __init__(self, fresh: Callable[[], nbstream.base.NaiveBayes], global_model: GlobalModel,
                 follower: StateFollower, start: str = "earliest"):
        self.fresh, self.global_model, self.follower, self.start = fresh, global_model, follower, start
        self.owned: dict[int, PartitionState] = {}
        self.latest: dict[int, PartitionState] = {}  # newest committed state of partitions not owned
        self.base: PartitionState | None = None
        self.chunk_keys: dict[str, frozenset[bytes]] = {}

    # ---- reading ----------------------------------------------------------------------------
    def take_updates(self, names: list[str]) -> None:
        """Decode the newly completed states of partitions this replica does not own."""
        for name in names:
            payload = self.follower.assembler.take(name)
            partition = partition_of(name)
            if payload is None or partition in self.owned:
                continue  # an owned partition's live state is newer than anything committed
            state = self._decode(name, payload)
            if partition is None and name == BASE:
                self.base = state
            elif partition is not None:
                self.latest[partition] = state
            self.global_model.invalidate()

    def _decode(self, name: str, payload: bytes) -> PartitionState:
        source = f"state topic {self.follower.topic}, {name}"
        fresh = self.fresh()
        try:
            state, features = PartitionState.from_payload(payload, fresh, source)
        except nbstream.SnapshotError as error:
            raise ConfigError(f"{error} Delete the state topic (or use a new --group) to start over.") from None
        if state.model.is_fitted and (type(state.model) is not type(fresh) or state.model.differing_params(fresh)):
            raise ConfigError(f"{source} holds a {state.model!r}; this service is configured for {fresh!r}. "
                              "Serve with the same model options, or use a new --group.")
        encoder = FeatureEncoder.from_json(features)
        configured = self.global_model.encoder
        if isinstance(configured, CategoricalEncoder):
            state.encoder = encoder
        elif configured.n_features is None and encoder.n_features is not None:
            self.global_model.encoder = encoder  # a list width learned by another replica
        elif not configured.same_layout(encoder) and encoder.n_features is not None:
            raise ConfigError(f"{source} was learned with features {encoder.describe()}; this service is "
                              f"configured for {configured.describe()}. Use the same feature options, or a new --group.")
        return state

    def states(self) -> list[PartitionState]:
        """Every state the global model merges: the base, the others' committed ones, the owned ones."""
        others = [state for p, state in self.latest.items() if p not in self.owned]
        return ([self.base] if self.base else []) + others + list(self.owned.values())

    # ---- assignment -----------------------------------------------------------------------
    def assign(self, partitions: list[int], committed: dict[int, int | None], *, wait_s: float,
               strict: bool) -> dict[int, object]:
        """Take over these partitions; returns where each starts reading.

        committed : the group's committed offsets. Under exactly-once they were committed in the
            same transaction as the state, so a state behind its committed offset, or missing, is
            one not visible yet: hidden by an open transaction on the state topic (a replica that
            died mid-commit; the broker aborts it within the transaction timeout), or committed a
            moment ago (the group's offsets can become visible before the state topic's commit
            marker is written). Wait up to ``wait_s`` for it.
        strict : never continue from a state behind its committed offset (exactly-once: that would
            repeat predictions); raise KafkaFailure instead, for a new session to try again. A
            partition with a committed offset and still no state at all starts afresh, with a
            warning (its state topic was deleted, say).
        """
        self.take_updates(self.follower.catch_up(timeout_s=max(wait_s, 30.0)))
        deadline, waited = time.monotonic() + wait_s, False
        while any(self._behind(p, committed.get(p)) for p in partitions) and time.monotonic() < deadline:
            if not waited:
                log.info("waiting for an open transaction on the state topic to end: a replica that died "
                         "mid-commit; the broker aborts it within the transaction timeout",
                         extra={"partitions": [p for p in partitions if self._behind(p, committed.get(p))]})
                waited = True
            self.take_updates(self.follower.poll(0.5))
        behind = [p for p in partitions if self._behind(p, committed.get(p)) and p in self.latest]
        if behind and strict:
            raise KafkaFailure(f"the states of partitions {behind} are still behind their committed offsets after "
                               f"{wait_s:.0f}s (an open transaction on the state topic)")
        starts = {}
        for partition in partitions:
            state = self.latest.pop(partition, None)
            if partition in behind:
                log.warning("a partition's state is behind its committed offset: continuing from the state, so "
                            "some predictions may repeat", extra={"partition": partition, "committed":
                                                                  committed.get(partition),
                                                                  "state_offset": state and state.next_offset})
            if state is None:
                state = PartitionState(self.fresh(), self._own_encoder())
                if committed.get(partition) is not None:
                    log.warning("a partition has a committed offset but no state: starting it afresh",
                                extra={"partition": partition, "committed": committed[partition],
                                       "start": self._default_start(partition)})
            self.chunk_keys[state_name(partition)] = self.follower.assembler.chunk_keys(state_name(partition))
            self.owned[partition] = state
            starts[partition] = state.next_offset if state.next_offset is not None else self._default_start(partition)
        self.global_model.invalidate()
        return starts

    def _behind(self, partition: int, committed: int | None) -> bool:
        """Whether the partition has a committed offset its known state (if any) has not reached."""
        state = self.latest.get(partition)
        offset = None if state is None else state.next_offset
        return committed is not None and (offset is None or offset < committed)

    def _default_start(self, partition: int):
        if self.base is not None and partition in self.base.starts:
            return self.base.starts[partition]
        return self.start

    def _own_encoder(self) -> FeatureEncoder | None:
        encoder = self.global_model.encoder
        return encoder.spec.encoder() if isinstance(encoder, CategoricalEncoder) else None

    def start_from(self, base: PartitionState) -> None:
        """A new group's starting model, once it is committed to the state topic."""
        self.base = base
        self.global_model.invalidate()

    def release(self, partitions: list[int]) -> None:
        """Stop owning these partitions (after committing them); their states become the latest known."""
        for partition in partitions:
            state = self.owned.pop(partition, None)
            if state is not None:
                self.latest[partition] = state
        self.global_model.invalidate()

    def offsets(self) -> dict[int, int]:
        """The next offset of every owned partition that has processed something."""
        return {p: s.next_offset for p, s in self.owned.items() if s.next_offset is not None}
