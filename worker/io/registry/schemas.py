"""Writer schemas by id: each fetched from the registry once, parsed once, and kept.

A schema's id never changes meaning in a registry, so what it parses to (or why it does not) is
kept for good. An id the registry does not know is not kept: asked again in the next poll.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from .client import RegisteredSchema, RegistryClient, SchemaNotFound

log = logging.getLogger(__name__)
Parsed = TypeVar("Parsed")


class SchemaProblem(ValueError):
    """A schema no record can be read by (of another format, or not valid): every record written
    with it is a dead letter."""


class SchemaCache(Generic[Parsed]):
    """parse : a RegisteredSchema to what a decoder reads records with (raises SchemaProblem)."""

    def __init__(self, client: RegistryClient, parse: Callable[[RegisteredSchema], Parsed]):
        self.client, self.parse = client, parse
        self._known: dict[int, Parsed | str] = {}

    def resolve(self, schema_ids: Iterable[int]) -> dict[int, Parsed | str]:
        """Each id's parsed schema, or the problem every record with that id has. Raises
        RegistryUnavailable when the registry cannot answer for an id it has not fetched yet."""
        found: dict[int, Parsed | str] = {}
        for schema_id in schema_ids:
            if schema_id not in self._known:
                try:
                    registered = self.client.schema(schema_id)
                except SchemaNotFound as missing:
                    found[schema_id] = str(missing)
                    continue
                self._known[schema_id] = self._parsed(registered)
                log.info("a writer schema was fetched", extra={"schema_id": schema_id,
                                                              "schema_type": registered.schema_type})
            found[schema_id] = self._known[schema_id]
        return found

    def _parsed(self, registered: RegisteredSchema) -> Parsed | str:
        try:
            return self.parse(registered)
        except SchemaProblem as problem:
            return f"schema {registered.schema_id} {problem}"
