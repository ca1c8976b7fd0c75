"""The Schema Registry options of `worker serve`: a registry that refuses the credentials or whose
certificate is not trusted ends the command at start with one line and exit status 2; the
password comes from the environment or a file, never a flag, and is never shown."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.helpers.cli import worker_env
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
