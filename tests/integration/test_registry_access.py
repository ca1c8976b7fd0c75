"""The Schema Registry options of `worker serve`: a registry that refuses the credentials or whose
certificate is not trusted ends the command at start with one line and exit status 2; the
password comes from the environment or a file, never a flag, and is never shown; a redirect to
another origin is not followed (the password goes nowhere else). Access refused while serving is
waited out, as a registry that does not answer is."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from tests.helpers.cli import worker_env
from tests.helpers.hostile_http import HostileServer, json_answer, redirect
from tests.helpers.kafka import new_topic, read_all, send
from tests.helpers.registry import avro_values
from tests.helpers.service import assert_equal_statistics, covered, free_port, labeled_messages, wait_for
from tests.integration.test_avro_serve import EXAMPLE, EXAMPLE_V2, avro_service, records_of, status
from worker.io.registry.client import RegistryAccessError, RegistryClient
from worker.io.registry.settings import registry_settings_from

SECRET = "registry-secret-5781"


class Registry(BaseHTTPRequestHandler):
    """Answers /subjects with [] to alice:SECRET (HTTP basic), 401 to anyone else."""

    def do_GET(self):  # noqa: N802 - the standard library's name
        expected = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.end_headers()
            self.wfile.write(json.dumps({"error_code": 40101, "message": "Unauthorized"}).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.end_headers()
        self.wfile.write(b"[]")

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_registry(tmp_path):
    """(http URL, https URL, the https server's CA file): one fake registry on both."""
    certificate, key = tmp_path / "registry.pem", tmp_path / "registry.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(certificate)],
                   check=True, capture_output=True)
    plain, secure = ThreadingHTTPServer(("127.0.0.1", 0), Registry), ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    threads = [threading.Thread(target=server.serve_forever, daemon=True) for server in (plain, secure)]
    for thread in threads:
        thread.start()
    yield f"http://127.0.0.1:{plain.server_port}", f"https://127.0.0.1:{secure.server_port}", certificate
    for server in (plain, secure):
        server.shutdown()


def serve(*registry_options, env=None):
    """`worker serve --format avro` with the given registry options (Kafka is never reached)."""
    command = [sys.executable, "-m", "worker", "serve", "--bootstrap", "127.0.0.1:9", "--input", "in", "--output",
               "out", "--group", "g", "--format", "avro", *registry_options]
    return subprocess.run(command, capture_output=True, text=True, env=env or worker_env(), timeout=60)


def test_avro_without_a_registry_is_one_line_with_exit_status_2():
    result = serve()
    assert result.returncode == 2
    assert "--format avro needs --schema-registry URL" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_refused_credentials_end_the_command_at_start_and_the_password_is_never_shown(fake_registry, tmp_path):
    url = fake_registry[0]
    result = serve("--schema-registry", url, "--schema-registry-user", "alice",
                   env=worker_env() | {"NBSTREAM_SCHEMA_REGISTRY_PASSWORD": "wrong-password-1234"})
    assert result.returncode == 2, result.stderr
    assert "refused access (HTTP 401)" in result.stderr and "Traceback" not in result.stderr
    assert "wrong-password-1234" not in result.stderr + result.stdout
    password_file = tmp_path / "password"
    password_file.write_text(SECRET + "\n")
    RegistryClient(registry_settings_from(url, "alice", None, password_file, None)).check()  # the right one passes
    assert serve("--schema-registry-password", SECRET).returncode == 2  # there is no password flag


def test_an_untrusted_certificate_ends_the_command_at_start_and_a_given_ca_is_trusted(fake_registry):
    _, url, ca_file = fake_registry
    result = serve("--schema-registry", url)
    assert result.returncode == 2
    assert "certificate that is not trusted" in result.stderr and "--schema-registry-cafile" in result.stderr
    assert "Traceback" not in result.stderr
    trusted = registry_settings_from(url, "alice", SECRET, None, ca_file)
    RegistryClient(trusted).check()
    assert "Secret('***')" in repr(trusted) and SECRET not in repr(trusted)
    with pytest.raises(RegistryAccessError, match="refused access"):
        RegistryClient(registry_settings_from(url, None, None, None, ca_file)).check()


@contextmanager
def gate_to(upstream: str):
    """A registry in front of ``upstream`` that relays GETs, or answers 401 while ``refusing`` is set:
    credentials rotated, or rights withdrawn, while a service runs. Yields (its URL, the event)."""
    refusing = threading.Event()

    class Gate(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            if refusing.is_set():
                status, body = 401, json.dumps({"error_code": 40101, "message": "Unauthorized"}).encode()
            else:
                try:
                    with urllib.request.urlopen(upstream + self.path.removeprefix("/gate"), timeout=10) as reply:
                        status, body = reply.status, reply.read()
                except urllib.error.HTTPError as error:
                    status, body = error.code, error.read()
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Gate)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/gate", refusing
    finally:
        server.shutdown()


def test_access_refused_while_serving_holds_the_records_back_and_nothing_is_lost(
        kafka_bootstrap, schema_registry_url, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "registry-refuses")
    _, X, labels = labeled_messages(60, np.random.default_rng(41))
    before = avro_values(schema_registry_url, topic, EXAMPLE, records_of(X[:30], labels[:30]))
    # registered now, first read while access is refused: the service has not fetched this schema yet
    after = avro_values(schema_registry_url, topic, EXAMPLE_V2, records_of(X[30:], labels[30:], start_id=30,
                                                                           source="late"))
    port = free_port()
    with gate_to(schema_registry_url) as (url, refusing):
        service = avro_service(kafka_bootstrap, topic, tmp_path, url, "--metrics-port", port,
                               client=kafka_client).start()
        try:
            send(kafka_bootstrap, topic, before)
            assert wait_for(lambda: len(read_all(kafka_bootstrap, service.output, committed_only=True)) == 30), \
                service.log_tail()
            refusing.set()
            send(kafka_bootstrap, topic, after, first_key=30)
            assert wait_for(lambda: "the Schema Registry refuses access" in service.log_tail(20_000), timeout=30)
            assert wait_for(lambda: status(port, "/readyz") == 503, timeout=10)
            time.sleep(5)
            assert service.running(), service.log_tail()
            assert len(read_all(kafka_bootstrap, service.output, committed_only=True)) == 30
            refusing.clear()
            found = read_all(kafka_bootstrap, service.output, expected=60, committed_only=True)
            assert covered(found) == {(0, offset) for offset in range(60)}, service.log_tail()
            assert wait_for(lambda: status(port, "/readyz") == 200, timeout=30)
            log = service.log_tail(50_000)
            assert log.count("refuses access") == 1 and log.count("answers again") == 1, log
            assert not read_all(kafka_bootstrap, f"{topic}.dlq", timeout=5)
            assert service.terminate() == 0
            assert_equal_statistics(service.state()[0], X, labels)
        finally:
            if service.running():
                service.kill()


def test_a_redirect_to_another_origin_at_start_ends_the_command_and_sends_the_password_nowhere(tmp_path):
    """urllib had replayed the Authorization header to the other host of a 307."""
    with HostileServer(json_answer(["stolen"])) as elsewhere, \
            HostileServer(redirect(307, elsewhere.url + "/subjects")) as registry:
        result = serve("--schema-registry", registry.url, "--schema-registry-user", "alice",
                       env=worker_env() | {"NBSTREAM_SCHEMA_REGISTRY_PASSWORD": SECRET})
        assert elsewhere.requests == [] and len(registry.requests) == 1
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and (
        f"the Schema Registry at {registry.url} redirects to another origin ({elsewhere.url}), where requests (and "
        f"their credentials) are never sent; give --schema-registry the URL it redirects to.") in lines[0], lines
    assert "Traceback" not in result.stderr and SECRET not in result.stderr + result.stdout
