"""How the registry client sorts the answers to a schema fetch: found; a refusal of this request
(404, another 4xx) or an answer that is not a schema is the record's problem, kept a while; an
outage (5xx, 408, 429, no answer by the deadline) is waited out; refused credentials and redirects
to another origin end the command. Against local HTTP servers answering with each status, and
hostile ones (tests/helpers/hostile_http.py)."""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nbstream.arrow import FeatureSpec
from tests.helpers.hostile_http import HostileServer, json_answer, padded_json, redirect, trickle
from worker.io.fields import MessageFields
from worker.io.kafka.dead_letters import reason_of
from worker.io.kafka.settings import Secret
from worker.io.registry.client import (
    MAX_ANSWER_BYTES,
    RegistryAccessError,
    RegistryClient,
    RegistryUnavailable,
    SchemaNotFound,
)
from worker.io.registry.records import registry_records
from worker.io.registry.settings import RegistrySettings
from worker.io.registry.wire import frame


@pytest.fixture
def answering():
    """A server on 127.0.0.1 answering every request with the status set in ``state["status"]``."""
    state = {"status": 200}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            status = state["status"]
            body = json.dumps({"schema": '"string"'} if status == 200 else {"message": "nope"}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = RegistryClient(RegistrySettings(f"http://127.0.0.1:{server.server_address[1]}"))
    yield state, client
    server.shutdown()


@pytest.mark.parametrize("status, raised, reason", [
    (404, SchemaNotFound, "unknown_schema"),
    (400, SchemaNotFound, "schema"),
    (422, SchemaNotFound, "schema"),
    (500, RegistryUnavailable, None),
    (503, RegistryUnavailable, None),
    (408, RegistryUnavailable, None),
    (429, RegistryUnavailable, None),
    (401, RegistryAccessError, None),
    (403, RegistryAccessError, None),
])
def test_each_status_of_a_schema_fetch_is_sorted(answering, status, raised, reason):
    state, client = answering
    state["status"] = status
    with pytest.raises(raised) as error:
        client.schema(7)
    if reason is not None:
        assert reason_of(str(error.value)) == reason, str(error.value)


def test_a_schema_found(answering):
    _, client = answering
    found = client.schema(7)
    assert (found.schema_id, found.text, found.schema_type) == (7, '"string"', "AVRO")


# ---- answers of a hostile registry, each alone ----------------------------------------------

AVRO_TEXT = json.dumps({"type": "record", "name": "R", "fields": [
    {"name": "features", "type": {"type": "array", "items": "int"}}]})


@pytest.fixture
def hostile():
    with HostileServer() as server:
        yield server


@pytest.fixture
def elsewhere():
    """Another origin, which records what reaches it."""
    with HostileServer(json_answer({"schema": AVRO_TEXT})) as server:
        yield server


def client_of(server, timeout_s=5.0) -> RegistryClient:
    return RegistryClient(RegistrySettings(server.url, "alice", Secret("registry-password-1"), timeout_s=timeout_s))


WRONG_TYPES = [  # (the registry's answer, the problem named)
    ({"schema": AVRO_TEXT, "schemaType": 5}, "its schemaType is 5, not a string"),
    ({"schema": AVRO_TEXT, "schemaType": ["AVRO"]}, 'its schemaType is ["AVRO"], not a string'),
    ({"schema": AVRO_TEXT, "schemaType": "PROTOBUF", "references": ["x"]},
     'its references are ["x"], not a list of objects each with a name'),
    ({"schema": AVRO_TEXT, "schemaType": "PROTOBUF", "references": {"name": "a"}},
     'its references are {"name": "a"}, not a list of objects each with a name'),
    ({"schema": AVRO_TEXT, "references": [{"name": 5, "subject": "s", "version": 1}]},
     'its references are [{"name": 5, "subject": "s", "version": 1}], not a list of objects each with a name'),
    ({"schema": 5}, "its schema is 5, not a string"),
    ({"schemaType": "AVRO"}, "its schema is null, not a string"),
    (["AVRO"], 'it is ["AVRO"], not an object'),
]


@pytest.mark.parametrize("found, problem", WRONG_TYPES)
def test_an_answer_with_a_field_of_the_wrong_type_is_that_schemas_problem(hostile, found, problem):
    hostile.behaviour = json_answer(found)
    with pytest.raises(SchemaNotFound) as error:
        client_of(hostile).schema(7)
    assert str(error.value) == f"schema 7 cannot be read from the Schema Registry's answer: {problem}"
    assert reason_of(str(error.value)) == "schema"


@pytest.mark.parametrize("message_format", ["avro", "protobuf", "json-schema"])
@pytest.mark.parametrize("found, problem", WRONG_TYPES[:4])
def test_records_of_such_a_schema_are_dead_letters_of_every_format(hostile, message_format, found, problem):
    """schemaType 5 had stopped --format avro, references ["x"] --format protobuf: a crash, not a dead letter."""
    hostile.behaviour = json_answer(found)
    fields = MessageFields(format=message_format)
    records, problems = registry_records(fields, client_of(hostile)).read([frame(7, b"\x00")],
                                                                           FeatureSpec.vector("features"), fields)
    assert records == [None] and problems[0].endswith(problem) and reason_of(problems[0]) == "schema"


def test_a_trickling_registry_is_unavailable_at_its_deadline(hostile):
    hostile.behaviour = trickle(json.dumps({"schema": AVRO_TEXT}).encode(), every_s=0.3)
    started = time.monotonic()
    with pytest.raises(RegistryUnavailable, match=rf"^the Schema Registry at {hostile.url} did not answer within 1 s$"):
        client_of(hostile, timeout_s=1.0).schema(7)
    assert time.monotonic() - started < 1.5


@pytest.mark.parametrize("status", [302, 307])
def test_a_redirect_to_another_origin_sends_it_no_credentials_and_is_refused_access(hostile, elsewhere, status):
    hostile.behaviour = redirect(status, elsewhere.url + "/schemas/ids/7")
    for call in (lambda client: client.schema(7), lambda client: client.check()):
        with pytest.raises(RegistryAccessError) as refused:
            call(client_of(hostile))
        assert str(refused.value) == (
            f"the Schema Registry at {hostile.url} redirects to another origin ({elsewhere.url}), where requests (and "
            f"their credentials) are never sent; give --schema-registry the URL it redirects to.")
    assert elsewhere.requests == []
    assert [r.headers["Authorization"] for r in hostile.requests] == ["Basic " + base64.b64encode(
        b"alice:registry-password-1").decode()] * 2


def test_an_oversized_schema_is_that_schemas_problem_and_an_oversized_error_still_an_outage(hostile):
    hostile.behaviour = padded_json(200, {}, "schema", MAX_ANSWER_BYTES)
    with pytest.raises(SchemaNotFound) as error:
        client_of(hostile).schema(7)
    assert str(error.value) == (f"schema 7 cannot be fetched: the Schema Registry at {hostile.url} answered HTTP 200 "
                                f"with more than 16,777,216 bytes, the most read")
    assert reason_of(str(error.value)) == "schema"
    hostile.behaviour = padded_json(503, {"error_code": 50301}, "message", MAX_ANSWER_BYTES)
    with pytest.raises(RegistryUnavailable, match=r"answered HTTP 503: an answer larger than 16,777,216 bytes$"):
        client_of(hostile).schema(7)


def test_a_registrys_long_error_message_is_cut_short(hostile):
    hostile.behaviour = padded_json(500, {"error_code": 50001}, "message", 10_000_000)
    with pytest.raises(RegistryUnavailable) as error:
        client_of(hostile).schema(7)
    assert str(error.value) == (f"the Schema Registry at {hostile.url} answered HTTP 500: " + "x" * 1_000 +
                                "... (10,000,000 characters)")
