"""How the registry client sorts the answers to a schema fetch: found; a refusal of this request
(404, another 4xx) is the record's problem, kept a while; an outage (5xx, 408, 429) is waited out;
refused credentials end the command. Against a local HTTP server answering with each status."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from worker.io.kafka.dead_letters import reason_of
from worker.io.registry.client import RegistryAccessError, RegistryClient, RegistryUnavailable, SchemaNotFound
from worker.io.registry.settings import RegistrySettings


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
