"""The Kubernetes manifests in deploy/kubernetes and the Containerfile agree with the program: every
NBSTREAM_ variable they set is one it reads, the probes answer where they look, KEDA scales the
Deployment on the group and topic it serves, and the container's command is one the CLI accepts."""

from __future__ import annotations

import ast
import json
import os
import re
import tomllib
import urllib.error
import urllib.request

import click
import pytest
import typer.main
import yaml

from scripts.env_table import environment_variables
from tests.helpers.paths import REPO
from worker.cli import app
from worker.service.telemetry.metrics import ServiceMetrics
from worker.service.telemetry.server import serve_metrics

MANIFESTS = REPO / "deploy" / "kubernetes"
CONTAINERFILE = REPO / "Containerfile"
VARIABLE = re.compile(r"\bNBSTREAM_[A-Z0-9_]+\b")
ENVIRON_READS = {("os", "getenv"), ("environ", "get"), ("environ", "setdefault")}
# --sasl-mechanism -> the sasl of KEDA's Kafka scaler
KEDA_SASL_MODES = {"PLAIN": "plaintext", "SCRAM-SHA-256": "scram_sha256", "SCRAM-SHA-512": "scram_sha512",
                   "OAUTHBEARER": "oauthbearer"}


def manifests() -> list[dict]:
    documents = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        documents += [document for document in yaml.safe_load_all(path.read_text()) if document]
    return documents


def the(kind: str) -> dict:
    """The one manifest of ``kind``."""
    found = [document for document in manifests() if document["kind"] == kind]
    assert len(found) == 1, f"{len(found)} manifests of kind {kind}"
    return found[0]


def container() -> dict:
    containers = the("Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def config() -> dict[str, str]:
    return the("ConfigMap")["data"]


def secret() -> dict[str, str]:
    return the("Secret")["stringData"]


def strings(value) -> list[str]:
    """Every string in a parsed YAML document, keys included."""
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in strings(key) + strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return [value] if isinstance(value, str) else []


def variables_read_from_the_environment() -> set[str]:
    """The NBSTREAM_ variables the program reads: its options' and those it reads itself (os.environ)."""
    variables = {variable for variable, _ in environment_variables() if variable}
    for path in [*(REPO / "worker").rglob("*.py"), *(REPO / "nbstream").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
                if (owner_name, node.func.attr) not in ENVIRON_READS:
                    continue
                key = node.args[0] if node.args else None
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "environ":
                key = node.slice
            else:
                continue
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and VARIABLE.fullmatch(key.value):
                variables.add(key.value)
    return variables


def containerfile_instruction(name: str) -> str:
    """The arguments of the last ``name`` instruction of the Containerfile (continuation lines joined)."""
    text = CONTAINERFILE.read_text().replace("\\\n", " ")
    found = [line.split(None, 1)[1] for line in text.splitlines() if line.upper().startswith(name + " ")]
    assert found, f"the Containerfile has no {name}"
    return found[-1]


def environment_of_a_pod() -> dict[str, str]:
    """The NBSTREAM_ variables a replica's container gets: the image's, the ConfigMap's, then its own
    (a pod's name for the downward API, the Secret's values)."""
    image = dict(re.findall(r"(NBSTREAM_\w+)=(\S+)", containerfile_instruction("ENV")))
    own = {}
    for variable in container()["env"]:
        source = variable["valueFrom"]
        if "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "metadata.name"
            own[variable["name"]] = "nbstream-7d4b9c6f58-x2k8q"
        else:
            own[variable["name"]] = secret()[source["secretKeyRef"]["key"]]
    return {**image, **config(), **own}


def status(url: str) -> int:
    try:
        return urllib.request.urlopen(url, timeout=5).status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_environment_scan_finds_the_variables_read_outside_the_options():
    read = variables_read_from_the_environment()
    assert "NBSTREAM_SASL_PASSWORD" in read  # read by os.environ.get, no option's envvar
    assert "NBSTREAM_INPUT" in read


def test_every_variable_the_manifests_and_the_image_set_is_one_the_program_reads():
    named = {v for document in manifests() for s in strings(document) for v in VARIABLE.findall(s)}
    named |= set(re.findall(r"(NBSTREAM_\w+)=", containerfile_instruction("ENV")))
    assert {"NBSTREAM_INPUT", "NBSTREAM_INSTANCE_ID", "NBSTREAM_SASL_PASSWORD"} <= named
    assert named - variables_read_from_the_environment() == set()


def test_settings_come_from_the_configmap_and_credentials_from_the_secret_only():
    assert container()["envFrom"] == [{"configMapRef": {"name": the("ConfigMap")["metadata"]["name"]}}]
    secret_name = the("Secret")["metadata"]["name"]
    from_secret = {v["name"] for v in container()["env"]
                   if v["valueFrom"].get("secretKeyRef", {}).get("name") == secret_name}
    assert from_secret == {"NBSTREAM_SASL_USERNAME", "NBSTREAM_SASL_PASSWORD"}
    assert not [name for name in config() if re.search("PASSWORD|SECRET", name)]
    instance = [v for v in container()["env"] if v["name"] == "NBSTREAM_INSTANCE_ID"]
    assert instance[0]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_the_containers_command_is_one_the_cli_accepts(monkeypatch):
    entrypoint = json.loads(containerfile_instruction("ENTRYPOINT"))
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert entrypoint == ["nbstream"] and scripts["nbstream"] == "worker:main"
    for variable in [v for v in os.environ if v.startswith("NBSTREAM_")]:
        monkeypatch.delenv(variable)
    for variable, value in environment_of_a_pod().items():
        monkeypatch.setenv(variable, value)
    name, *arguments = container()["args"]
    group = typer.main.get_command(app)
    command = group.get_command(click.Context(group), name)
    assert command is not None, f"no command {name!r}"
    parsed = command.make_context(name, arguments).params  # a missing or malformed setting raises here
    assert parsed["input"] == config()["NBSTREAM_INPUT"]
    assert parsed["instance_id"] == "nbstream-7d4b9c6f58-x2k8q"
    assert parsed["metrics_host"] == "0.0.0.0"  # the image's: the probes come from outside the container


def test_the_probes_answer_on_the_metrics_port():
    ports = {port["name"]: port["containerPort"] for port in container()["ports"]}
    probes = {kind: container()[kind]["httpGet"] for kind in ("livenessProbe", "readinessProbe")}
    for probe in probes.values():
        assert ports[probe["port"]] == int(config()["NBSTREAM_METRICS_PORT"])
    assert config()["NBSTREAM_METRICS_PORT"] in containerfile_instruction("EXPOSE").split()
    server = serve_metrics(ServiceMetrics(), 0)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert status(url + probes["livenessProbe"]["path"]) == 200  # the loop has just turned
        assert status(url + probes["readinessProbe"]["path"]) == 503  # no partitions assigned yet
        assert status(url + "/nowhere") == 404  # so a wrong path would be seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("field, variable", [("bootstrapServers", "NBSTREAM_BOOTSTRAP"), ("topic", "NBSTREAM_INPUT"),
                                             ("consumerGroup", "NBSTREAM_GROUP"),
                                             ("offsetResetPolicy", "NBSTREAM_START")])
def test_keda_reads_the_lag_of_the_group_and_topic_the_replicas_serve(field, variable):
    trigger = the("ScaledObject")["spec"]["triggers"][0]
    assert trigger["type"] == "kafka"
    assert trigger["metadata"][field] == config()[variable]


def test_keda_scales_the_deployment_to_one_replica_per_partition_at_most_with_the_services_credentials():
    scaled = the("ScaledObject")["spec"]
    assert scaled["scaleTargetRef"]["name"] == the("Deployment")["metadata"]["name"]
    assert scaled["scaleTargetRef"].get("kind", "Deployment") == "Deployment"
    assert 1 <= scaled["minReplicaCount"] <= scaled["maxReplicaCount"]
    assert "replicas" not in the("Deployment")["spec"]  # KEDA's to set
    (trigger,) = scaled["triggers"]
    assert trigger["metadata"]["allowIdleConsumers"] == "false"  # KEDA too caps replicas at the partitions
    mechanism = config()["NBSTREAM_SASL_MECHANISM"]
    assert trigger["metadata"]["sasl"] == KEDA_SASL_MODES[mechanism]
    assert (trigger["metadata"]["tls"] == "enable") == config()["NBSTREAM_SECURITY_PROTOCOL"].endswith("SSL")
    authentication = the("TriggerAuthentication")
    assert trigger["authenticationRef"]["name"] == authentication["metadata"]["name"]
    references = {ref["parameter"]: (ref["name"], ref["key"]) for ref in authentication["spec"]["secretTargetRef"]}
    by_variable = {v["name"]: (v["valueFrom"]["secretKeyRef"]["name"], v["valueFrom"]["secretKeyRef"]["key"])
                   for v in container()["env"] if "secretKeyRef" in v["valueFrom"]}
    assert references == {"username": by_variable["NBSTREAM_SASL_USERNAME"],
                          "password": by_variable["NBSTREAM_SASL_PASSWORD"]}


def test_the_pod_runs_as_the_images_user_without_privileges():
    pod = the("Deployment")["spec"]["template"]["spec"]["securityContext"]
    image_uid = int(re.search(r"^ARG UID=(\d+)$", CONTAINERFILE.read_text(), re.MULTILINE).group(1))
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] == image_uid
    assert containerfile_instruction("USER") == "${UID}:${UID}"
    own = container()["securityContext"]
    assert own["allowPrivilegeEscalation"] is False and own["capabilities"]["drop"] == ["ALL"]
    assert {"requests", "limits"} <= container()["resources"].keys()


def test_the_inference_service_runs_serve_model_on_the_port_its_probes_ask(monkeypatch, tmp_path):
    service = the("InferenceService")
    (predictor,) = service["spec"]["predictor"]["containers"]
    assert predictor["name"] == "kserve-container"
    environment = {v["name"]: v["value"] for v in predictor["env"]}
    port = int(environment["NBSTREAM_HTTP_PORT"])
    assert predictor["ports"] == [{"containerPort": port, "protocol": "TCP"}]
    assert predictor["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": port}
    assert predictor["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": port}
    for variable in [v for v in os.environ if v.startswith("NBSTREAM_")]:
        monkeypatch.delenv(variable)
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    name, *arguments = predictor["args"]
    group = typer.main.get_command(app)
    parsed = group.get_command(click.Context(group), name).make_context(name, arguments).params
    assert name == "serve-model" and str(parsed["model"]).startswith("/mnt/models/")  # where KServe puts it
    assert str(port) in containerfile_instruction("EXPOSE").split()
    assert parsed["http_port"] == port and parsed["http_host"] == "0.0.0.0" and parsed["reload"]
