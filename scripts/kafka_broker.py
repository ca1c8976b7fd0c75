"""A single-node Apache Kafka broker (KRaft) for tests and demos, from Maven Central's jars.

    python3 scripts/kafka_broker.py start [--dir DIR] [--ssl] [--sasl-ssl] [--oauthbearer-jwks-url URL]
                                                                        # prints the bootstrap address(es)
    python3 scripts/kafka_broker.py stop  [--dir DIR]

Needs Java 17 and Maven (the pinned jars in scripts/kafka/pom.xml are fetched once and cached
in ~/.m2); nothing else, not even the project's virtual environment. `start` picks free ports
on 127.0.0.1, formats a fresh log directory with kafka.tools.StorageTool, starts kafka.Kafka,
waits until the broker's own log says it started, and records the ports and process in
DIR/broker.json. The ``Broker`` class does the same for tests, and can also kill the broker
(-9) and restart it on the same ports and data, as a crash and recovery would.

With --ssl it adds a TLS listener, and with --sasl-ssl a SASL_SSL listener with SCRAM-SHA-256
and SCRAM-SHA-512 users (created at format time), whose certificates it makes with keytool
(the CA certificate in PEM is DIR/tls/ca.pem). With --oauthbearer-jwks-url it adds a
SASL_PLAINTEXT listener with OAUTHBEARER, whose tokens Kafka's OIDC validator checks against the
keys at that URL (an OIDC provider's JWKS, which must answer when the broker starts), for the
audience OAUTH_AUDIENCE; a connection's session ends with its token, so clients re-authenticate
with a fresh one. The PLAINTEXT listener stays for administration.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: scripts.* import
from scripts.local_process import free_port, maven_classpath, send_signal, terminate, wait_gone  # noqa: E402

HERE = Path(__file__).resolve().parent
POM = HERE / "kafka" / "pom.xml"
DEFAULT_DIR = Path(os.environ.get("NBSTREAM_BROKER_DIR", "/tmp/nbstream-kafka"))
STARTED = "started (kafka.server.KafkaRaftServer)"
SCRAM_USERS = {"alice": "alice-secret"}  # test users of the SASL_SSL listener
TLS_PASSWORD = "broker-keystore-secret"
OAUTH_AUDIENCE = "nbstream-test"  # the aud claim the OAUTHBEARER listener expects
OAUTH_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"  # Kafka 3.4+






@dataclass
class Broker:
    """One broker process in ``directory``; ports are chosen on the first start and kept."""
    directory: Path
    ssl: bool = False
    sasl_ssl: bool = False
    oauthbearer_jwks_url: str | None = None
    ports: dict[str, int] = field(default_factory=dict)
    pid: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.ports['PLAINTEXT']}"

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def ca_file(self) -> Path:
        return self.directory / "tls" / "ca.pem"

    @property
    def state_file(self) -> Path:
        return self.directory / "broker.json"

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> Broker:
        """Format a fresh broker and start it (the data of a previous start in DIR is discarded)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.directory / "data", ignore_errors=True)
        self._classpath = maven_classpath(POM, self.directory, "classpath.txt")
        names = ["PLAINTEXT", "CONTROLLER"] + (["SSL"] if self.ssl else []) + (["SASL_SSL"] if self.sasl_ssl else []) \
            + (["SASL_PLAINTEXT"] if self.oauthbearer_jwks_url else [])
        self.ports = {name: free_port() for name in names}
        if self.ssl or self.sasl_ssl:
            self._make_certificates()
        config = self._write_config()
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        users = [arg for user, password in SCRAM_USERS.items() for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
                 for arg in ("--add-scram", f"{mechanism}=[name={user},password={password}]")] if self.sasl_ssl else []
        subprocess.run(self._java() + ["kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                                       "-c", str(config), "--ignore-formatted", *users],
                       check=True, stdout=subprocess.DEVNULL)
        return self._launch(timeout)

    def restart(self, timeout: float = 120.0) -> Broker:
        """Start again on the same ports and data (after ``kill`` or ``stop``)."""
        self._classpath = (self.directory / "classpath.txt").read_text().strip()
        return self._launch(timeout)

    def kill(self) -> None:
        """SIGKILL: the broker dies as in a crash, its data left as it was."""
        if self.pid is not None:
            send_signal(self.pid, signal.SIGKILL)
            wait_gone(self.pid, 30)
            self.pid = None

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, and SIGKILL if it has not shut down within ``timeout`` seconds."""
        if self.pid is not None:
            terminate(self.pid, timeout)
            self.pid = None
        self.state_file.unlink(missing_ok=True)

    def _launch(self, timeout: float) -> Broker:
        log_file = self.directory / "broker.log"
        seen = log_file.stat().st_size if log_file.exists() else 0
        with open(self.directory / "broker.out", "ab") as output:
            process = subprocess.Popen(self._java() + ["kafka.Kafka", str(self.directory / "server.properties")],
                                       stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = process.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the broker exited with status {process.returncode}; "
                                   f"see {self.directory}/broker.out")
            if log_file.exists():
                with open(log_file, "rb") as log:
                    log.seek(seen)
                    if STARTED.encode() in log.read():
                        self.state_file.write_text(json.dumps({"pid": self.pid, "ports": self.ports}))
                        return self
            time.sleep(0.2)
        process.kill()
        raise TimeoutError(f"the broker did not start within {timeout:.0f}s; see {log_file}")

    def _java(self) -> list[str]:
        # Kafka 3.9.1 and 4 fetch an OAuth JWKS only from the URLs this system property allows
        allowed = [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.oauthbearer_jwks_url}"] \
            if self.oauthbearer_jwks_url else []
        return ["java", "-Xms256m", "-Xmx768m", f"-Dlog4j.configuration=file:{self.directory / 'log4j.properties'}",
                *allowed, "-cp", self._classpath]

    # ---- configuration --------------------------------------------------------------------
    def _write_config(self) -> Path:
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())
        advertised = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items() if name != "CONTROLLER")
        protocols = ",".join(f"{name}:{name if name != 'CONTROLLER' else 'PLAINTEXT'}" for name in self.ports)
        lines = [
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.ports['CONTROLLER']}",
            f"listeners={listeners}", f"advertised.listeners={advertised}",
            "controller.listener.names=CONTROLLER", f"listener.security.protocol.map={protocols}",
            "inter.broker.listener.name=PLAINTEXT", f"log.dirs={self.directory / 'data'}", "num.partitions=1",
            "offsets.topic.replication.factor=1", "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=4", "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=true", "message.max.bytes=10485760",
            "log.cleaner.backoff.ms=1000",
        ]
        tls = self.directory / "tls"
        if self.ssl or self.sasl_ssl:
            lines += [f"ssl.keystore.location={tls / 'broker.p12'}", "ssl.keystore.type=PKCS12",
                      f"ssl.keystore.password={TLS_PASSWORD}", f"ssl.key.password={TLS_PASSWORD}",
                      "ssl.client.auth=none"]
        if self.sasl_ssl:
            lines += ["sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512"]
            for mechanism in ("scram-sha-256", "scram-sha-512"):
                lines.append(f"listener.name.sasl_ssl.{mechanism}.sasl.jaas.config="
                             "org.apache.kafka.common.security.scram.ScramLoginModule required;")
        if self.oauthbearer_jwks_url:
            prefix = "listener.name.sasl_plaintext"
            lines += [f"{prefix}.sasl.enabled.mechanisms=OAUTHBEARER",
                      f"{prefix}.oauthbearer.sasl.jaas.config="
                      "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
                      f"{prefix}.oauthbearer.sasl.server.callback.handler.class={OAUTH_VALIDATOR}",
                      # sessions last as long as their token (KIP-368): the clients must refresh it
                      f"{prefix}.oauthbearer.connections.max.reauth.ms=3600000",
                      f"sasl.oauthbearer.jwks.endpoint.url={self.oauthbearer_jwks_url}",
                      f"sasl.oauthbearer.expected.audience={OAUTH_AUDIENCE}"]
        config = self.directory / "server.properties"
        config.write_text("\n".join(lines) + "\n")
        (self.directory / "log4j.properties").write_text("\n".join([
            "log4j.rootLogger=WARN, file",
            "log4j.logger.kafka.server.KafkaRaftServer=INFO",
            "log4j.appender.file=org.apache.log4j.FileAppender",
            f"log4j.appender.file.File={self.directory / 'broker.log'}",
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n", ""]))
        return config

    def _make_certificates(self) -> None:
        """A CA and a broker certificate for 127.0.0.1/localhost, made with keytool."""
        tls = self.directory / "tls"
        tls.mkdir(parents=True, exist_ok=True)
        ca, broker = tls / "ca.p12", tls / "broker.p12"
        for path in (ca, broker):
            path.unlink(missing_ok=True)

        def keytool(*args, stdin: bytes | None = None) -> bytes:
            return subprocess.run(["keytool", *args], input=stdin, check=True, capture_output=True).stdout

        common = ["-storetype", "PKCS12", "-storepass", TLS_PASSWORD, "-keypass", TLS_PASSWORD, "-keyalg", "RSA",
                  "-keysize", "2048", "-validity", "30"]
        keytool("-genkeypair", "-alias", "ca", "-dname", "CN=nbstream test CA", "-ext", "bc:c", "-keystore", str(ca),
                *common)
        keytool("-genkeypair", "-alias", "broker", "-dname", "CN=localhost", "-keystore", str(broker), *common)
        request = keytool("-certreq", "-alias", "broker", "-keystore", str(broker), "-storepass", TLS_PASSWORD)
        signed = keytool("-gencert", "-alias", "ca", "-keystore", str(ca), "-storepass", TLS_PASSWORD, "-rfc",
                         "-ext", "SAN=dns:localhost,ip:127.0.0.1", "-validity", "30", stdin=request)
        ca_pem = keytool("-exportcert", "-alias", "ca", "-keystore", str(ca), "-storepass", TLS_PASSWORD, "-rfc")
        self.ca_file.write_bytes(ca_pem)
        keytool("-importcert", "-noprompt", "-alias", "ca", "-keystore", str(broker), "-storepass", TLS_PASSWORD,
                "-file", str(self.ca_file))
        (tls / "broker.pem").write_bytes(signed)
        keytool("-importcert", "-noprompt", "-alias", "broker", "-keystore", str(broker), "-storepass", TLS_PASSWORD,
                "-file", str(tls / "broker.pem"))






def stop_recorded(directory: Path) -> None:
    """Stop the broker recorded in DIR/broker.json, if any."""
    state_file = directory / "broker.json"
    if state_file.exists():
        state = json.loads(state_file.read_text())
        Broker(directory, pid=state["pid"]).stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"working folder (default {DEFAULT_DIR})")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the broker")
    parser.add_argument("--ssl", action="store_true", help="add an SSL listener")
    parser.add_argument("--sasl-ssl", action="store_true", help="add a SASL_SSL listener with SCRAM users")
    parser.add_argument("--oauthbearer-jwks-url", metavar="URL",
                        help="add a SASL_PLAINTEXT listener with OAUTHBEARER, checking tokens by the JWKS at URL")
    args = parser.parse_args()
    stop_recorded(args.dir)
    if args.action == "start":
        broker = Broker(args.dir, ssl=args.ssl, sasl_ssl=args.sasl_ssl,
                        oauthbearer_jwks_url=args.oauthbearer_jwks_url).start(args.timeout)
        print(broker.bootstrap)
        if "SASL_PLAINTEXT" in broker.ports:
            print(f"SASL_PLAINTEXT {broker.address('SASL_PLAINTEXT')} (OAUTHBEARER, audience {OAUTH_AUDIENCE})")
        for listener in ("SSL", "SASL_SSL"):
            if listener in broker.ports:
                print(f"{listener} {broker.address(listener)} (CA certificate: {broker.ca_file})")


if __name__ == "__main__":
    sys.exit(main())
