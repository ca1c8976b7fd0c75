"""Writer schemas by id: each fetched from the registry once, parsed once, and kept.

A schema's id never changes meaning in a registry, so what it parses to (or why it does not) is
kept for good. An id the registry does not know (or refuses to give) is asked again after
``NOT_FOUND_SECONDS``: a schema registered a moment later is found, and a flood of records with
unknown ids costs one request per id in that time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from .client import RegisteredSchema, RegistryClient, SchemaNotFound

log = logging.getLogger(__name__)
Parsed = TypeVar("Parsed")
NOT_FOUND_SECONDS = 10.0
MOST_MISSING = 10_000  # unknown ids remembered at most (records may name any of 2**32)


class SchemaProblem(ValueError):
    """A schema no record can be read by (of another format, or not valid): every record written
    with it is a dead letter."""


class SchemaCache(Generic[Parsed]):
    """parse : a RegisteredSchema to what a decoder reads records with (raises SchemaProblem)."""

    def __init__(self, client: RegistryClient, parse: Callable[[RegisteredSchema], Parsed],
                 clock: Callable[[], float] = time.monotonic):
        self.client, self.parse, self.clock = client, parse, clock
        self._known: dict[int, Parsed | str] = {}
        self._missing: dict[int, tuple[float, str]] = {}  # id -> (when the registry said so, what it said)

    def resolve(self, schema_ids: Iterable[int]) -> dict[int, Parsed | str]:
        """Each id's parsed schema, or the problem every record with that id has. Raises
        RegistryUnavailable when the registry cannot answer for an id it has not fetched yet."""
        found: dict[int, Parsed | str] = {}
        for schema_id in schema_ids:
            if schema_id not in self._known:
                missing = self._missing.get(schema_id)
                if missing is not None and self.clock() - missing[0] < NOT_FOUND_SECONDS:
                    found[schema_id] = missing[1]
                    continue
                try:
                    registered = self.client.schema(schema_id)
                except SchemaNotFound as not_found:
                    self._remember_missing(schema_id, str(not_found))
                    found[schema_id] = str(not_found)
                    continue
                self._missing.pop(schema_id, None)
                self._known[schema_id] = self._parsed(registered)
                log.info("a writer schema was fetched", extra={"schema_id": schema_id,
                                                              "schema_type": registered.schema_type})
            found[schema_id] = self._known[schema_id]
        return found

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
