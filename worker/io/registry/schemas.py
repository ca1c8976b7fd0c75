"""Writer schemas by id: each fetched from the registry once, parsed once, and kept.

A schema's id never changes meaning in a registry, so what it parses to (or why it does not) is
kept for good. An id the registry gives no schema for (it knows none such, refuses to give it, or
answers with what is not a schema) is asked again after ``NOT_FOUND_SECONDS``, and never twice in
one poll: a schema registered a moment later is found, and a flood of records with unknown ids
costs one request per id in that time.

One poll asks the registry for at most ``MOST_FETCHES_PER_POLL`` ids, those with the most records
first; the records of the ids left over are dead letters of that poll (their ids are asked for in
a later poll). With the client's deadline of 5 s per request, a poll waits for the registry 160 s
at most, within the consumer's ``max.poll.interval.ms`` (five minutes by default): a slow registry
cannot make the group hand the partitions over and the poll be read again without end.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from ..excerpts import excerpt
from .client import RegisteredSchema, RegistryClient, SchemaNotFound

log = logging.getLogger(__name__)
Parsed = TypeVar("Parsed")
NOT_FOUND_SECONDS = 10.0
MOST_MISSING = 10_000  # unknown ids remembered at most (records may name any of 2**32)
MOST_FETCHES_PER_POLL = 32


class SchemaProblem(ValueError):
    """A schema no record can be read by (of another format, or not valid): every record written
    with it is a dead letter."""


class SchemaCache(Generic[Parsed]):
    """parse : a RegisteredSchema to what a decoder reads records with (raises SchemaProblem).

    A poll's lookups go inside ``poll()``; a lookup outside it is a poll of its own."""

    def __init__(self, client: RegistryClient, parse: Callable[[RegisteredSchema], Parsed],
                 clock: Callable[[], float] = time.monotonic):
        self.client, self.parse, self.clock = client, parse, clock
        self._known: dict[int, Parsed | str] = {}
        self._missing: dict[int, tuple[float, str]] = {}  # id -> (when the registry said so, what it said)
        self._polling = False
        self._fetches_left = 0  # in the current poll
        self._this_poll: dict[int, str] = {}  # id -> its problem, decided in the current poll

    @contextmanager
    def poll(self) -> Iterator[None]:
        """The lookups of one poll: at most MOST_FETCHES_PER_POLL fetches, and an id the registry
        gives no schema for asked once."""
        self._polling, self._fetches_left, self._this_poll = True, MOST_FETCHES_PER_POLL, {}
        try:
            yield
        finally:
            self._polling, self._this_poll = False, {}

    def resolve(self, schema_ids: Iterable[int]) -> dict[int, Parsed | str]:
        """Each id's parsed schema, or the problem every record with that id has. schema_ids : the
        id of each record (an id repeated: the ids of the most records are fetched first). Raises
        RegistryUnavailable when the registry cannot answer for an id it has not fetched yet."""
        if not self._polling:
            with self.poll():
                return self.resolve(schema_ids)
        ids = list(schema_ids)
        distinct = set(ids)
        found = {schema_id: self._known[schema_id] for schema_id in distinct if schema_id in self._known}
        unknown = [schema_id for schema_id in distinct if schema_id not in found]
        if len(unknown) > 1:
            records = Counter(ids)
            unknown.sort(key=lambda schema_id: -records[schema_id])
        for schema_id in unknown:
            found[schema_id] = self._looked_up(schema_id)
        return found

    def _looked_up(self, schema_id: int) -> Parsed | str:
        """An id not known yet: its problem if it was decided in this poll or lately, else fetched."""
        if schema_id in self._this_poll:
            return self._this_poll[schema_id]
        missing = self._missing.get(schema_id)
        if missing is not None and self.clock() - missing[0] < NOT_FOUND_SECONDS:
            return missing[1]
        if self._fetches_left <= 0:
            self._this_poll[schema_id] = (f"schema id {schema_id} was not fetched: the records of this poll name more "
                                          f"schema ids new to the worker than the {MOST_FETCHES_PER_POLL} it asks "
                                          f"the Schema Registry for in one poll")
            return self._this_poll[schema_id]
        self._fetches_left -= 1
        try:
            registered = self.client.schema(schema_id)
        except SchemaNotFound as not_found:
            self._remember_missing(schema_id, str(not_found))
            self._this_poll[schema_id] = str(not_found)
            return str(not_found)
        self._missing.pop(schema_id, None)
        self._known[schema_id] = self._parsed(registered)
        log.info("a writer schema was fetched", extra={"schema_id": schema_id,
                                                      "schema_type": excerpt(registered.schema_type, 100)})
        return self._known[schema_id]

    def _remember_missing(self, schema_id: int, problem: str) -> None:
        now = self.clock()
        if len(self._missing) >= MOST_MISSING:
            self._missing = {i: m for i, m in self._missing.items() if now - m[0] < NOT_FOUND_SECONDS}
            if len(self._missing) >= MOST_MISSING:
                self._missing.clear()
        self._missing[schema_id] = (now, problem)

    def _parsed(self, registered: RegisteredSchema) -> Parsed | str:
        try:
            return self.parse(registered)
        except SchemaProblem as problem:
            return f"schema {registered.schema_id} {problem}"
