"""A client of any Confluent-compatible Schema Registry's REST API, on the standard library.

Three calls are all the worker needs: a schema by id, the subjects (to check at start that the
registry answers and takes the credentials), and registering a schema under a subject. Each
failure says whose fault it is: ``SchemaNotFound`` (the registry has no such id: the record's
fault), ``RegistryAccessError`` (credentials or certificate refused: the settings' fault, one
line at start), ``RegistryUnavailable`` (unreachable, timed out, a 5xx: nobody's, try again).
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from ...errors import ConfigError, UserError
from .settings import RegistrySettings

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCESS_REFUSED = (401, 403)


class RegistryUnavailable(Exception):
    """The registry could not answer now (unreachable, timed out, overloaded): no record's fault."""


class RegistryAccessError(UserError):
    """The registry refused the credentials, or its certificate is not trusted."""


class RegistryRefused(UserError):
    """The registry refused a request for what it asked (say, a schema it finds invalid or
    incompatible); status : the HTTP status."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class SchemaNotFound(Exception):
    """The registry knows no schema of that id."""


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it."""
    schema_id: int
    text: str
    schema_type: str = "AVRO"  # the registry leaves it out for Avro
    references: list = field(default_factory=list)


class RegistryClient:
    def __init__(self, settings: RegistrySettings):
        self.settings = settings
        self.url = settings.url.rstrip("/")
        self._context = ssl.create_default_context(cafile=settings.cafile) if settings.cafile else None
        self._headers = {"Accept": CONTENT_TYPE}
        if settings.user is not None:
            password = settings.password.reveal() if settings.password else ""
            token = base64.b64encode(f"{settings.user}:{password}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"

    def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema of ``schema_id``. Raises SchemaNotFound (HTTP 404, or another 4xx but 401, 403,
        408 and 429: a refusal of this request, not of every one), RegistryUnavailable, RegistryAccessError."""
        try:
            found = self._call("GET", f"/schemas/ids/{schema_id}")
        except RegistryRefused as refused:
            if refused.status == 404:
                raise SchemaNotFound(f"unknown schema id {schema_id}: the Schema Registry has none such") from None
            if 400 <= refused.status < 500:  # asked again, it would refuse again: the record's problem
                raise SchemaNotFound(f"schema {schema_id} cannot be fetched: {refused}") from None
            raise RegistryUnavailable(str(refused)) from None
        if not isinstance(found, dict) or not isinstance(found.get("schema"), str):
            raise RegistryUnavailable(f"the Schema Registry's answer for schema id {schema_id} holds no schema")
        return RegisteredSchema(schema_id, found["schema"], found.get("schemaType") or "AVRO",
                                found.get("references") or [])

    def check(self) -> None:
        """Ask for the subjects: the registry answers, and takes the credentials and its certificate
        is trusted (RegistryAccessError), and it is a registry's API (RegistryRefused)."""
        try:
            subjects = self._call("GET", "/subjects")
        except RegistryRefused as refused:
            raise RegistryRefused(f"{self.url} answers HTTP {refused.status} for /subjects: is it the URL of a "
                                  f"Schema Registry's Confluent-compatible API?") from None
        if not isinstance(subjects, list):
            raise RegistryRefused(f"{self.url} does not answer /subjects as a Schema Registry does (a list of "
                                  f"subjects): is it the URL of its Confluent-compatible API?")

    def register(self, subject: str, text: str, schema_type: str = "AVRO") -> int:
        """Register a schema under ``subject`` (or find it there); its id."""
        body = {"schema": text} | ({} if schema_type == "AVRO" else {"schemaType": schema_type})
        answer = self._call("POST", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions", body)
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), int):
            raise RegistryUnavailable(f"the Schema Registry's answer to registering under {subject} holds no id")
        return answer["id"]

    def _call(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers | ({} if data is None else {"Content-Type": CONTENT_TYPE})
        request = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.settings.timeout_s, context=self._context) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as error:
            raise _http_failure(self.url, error) from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, ssl.SSLCertVerificationError):
                raise RegistryAccessError(f"the Schema Registry at {self.url} has a certificate that is not "
                                          f"trusted ({error.reason.verify_message}); give its CA's certificate "
                                          f"with --schema-registry-cafile.") from None
            raise RegistryUnavailable(f"the Schema Registry at {self.url} cannot be reached: {error.reason}") from None
        except (OSError, ValueError) as error:  # timed out, connection reset, an answer that is not JSON
            raise RegistryUnavailable(f"the Schema Registry at {self.url} did not answer: "
                                      f"{error or type(error).__name__}") from None


def schema_to_write(client: RegistryClient, schema_id: int, schema_type: str) -> RegisteredSchema:
    """The registry's schema ``schema_id``, for writing records by (``--schema-id``): a ConfigError
    where the registry has none such or it is not of ``schema_type``."""
    try:
        registered = client.schema(schema_id)
    except SchemaNotFound as missing:
        raise ConfigError(f"--schema-id: {missing}.") from None
    if registered.schema_type.upper() != schema_type:
        raise ConfigError(f"--schema-id {schema_id} is a {registered.schema_type} schema, not {schema_type}.")
    return registered


def _http_failure(url: str, error: urllib.error.HTTPError) -> Exception:
    """The failure an HTTP error status stands for."""
    try:
        message = json.loads(error.read()).get("message") or error.reason
    except (OSError, ValueError, AttributeError):
        message = error.reason
    if error.code in ACCESS_REFUSED:
        return RegistryAccessError(f"the Schema Registry at {url} refused access (HTTP {error.code}): check "
                                   f"--schema-registry-user and its password.")
    if error.code >= 500 or error.code in (408, 429):
        return RegistryUnavailable(f"the Schema Registry at {url} answered HTTP {error.code}: {message}")
    return RegistryRefused(f"the Schema Registry at {url} refused the request (HTTP {error.code}): {message}",
                           error.code)
