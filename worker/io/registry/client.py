"""A client of any Confluent-compatible Schema Registry's REST API, through the worker's one HTTP
client (``worker.io.http``: a deadline per request, answers of at most MAX_ANSWER_BYTES, no
credentials sent across origins).

Three calls are all the worker needs: a schema by id, the subjects (to check at start that the
registry answers and takes the credentials), and registering a schema under a subject. Each
failure says whose fault it is: ``SchemaNotFound`` (no usable schema of that id: the record's
fault), ``RegistryAccessError`` (credentials or certificate refused, a redirect to another origin:
the settings' fault, one line at start), ``RegistryUnavailable`` (unreachable, timed out, a 5xx:
nobody's, try again). Every field of an answer is checked for its type before it is used.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.parse
from dataclasses import dataclass

from ...errors import ConfigError, UserError
from .. import http
from ..excerpts import excerpt
from .settings import RegistrySettings

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCESS_REFUSED = (401, 403)
MAX_ANSWER_BYTES = 16 << 20  # a schema of 16 MiB is plenty


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


class AnswerTooLarge(RegistryRefused):
    """The registry answered with more than MAX_ANSWER_BYTES."""


class SchemaNotFound(Exception):
    """The registry gives no usable schema of that id: it knows none such, refuses this request (a
    4xx), or answers with what is not a schema (a field of the wrong type, too large)."""


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it; references : the names of the schemas it refers to."""
    schema_id: int
    text: str
    schema_type: str = "AVRO"  # the registry leaves it out for Avro
    references: tuple[str, ...] = ()


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
        408 and 429: a refusal of this request, not of every one; or an answer that is not a
        schema), RegistryUnavailable, RegistryAccessError."""
        try:
            found = self._call("GET", f"/schemas/ids/{schema_id}")
        except AnswerTooLarge as large:
            raise SchemaNotFound(f"schema {schema_id} cannot be fetched: {large}") from None
        except RegistryRefused as refused:
            if refused.status == 404:
                raise SchemaNotFound(f"unknown schema id {schema_id}: the Schema Registry has none such") from None
            if 400 <= refused.status < 500:  # asked again, it would refuse again: the record's problem
                raise SchemaNotFound(f"schema {schema_id} cannot be fetched: {refused}") from None
            raise RegistryUnavailable(str(refused)) from None
        return registered_schema(schema_id, found)

    def check(self) -> None:
        """Ask for the subjects: the registry answers, and takes the credentials and its certificate
        is trusted (RegistryAccessError), and it is a registry's API (RegistryRefused)."""
        try:
            subjects = self._call("GET", "/subjects")
        except AnswerTooLarge:
            raise
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
        schema_id = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(schema_id, int) or isinstance(schema_id, bool):
            raise RegistryUnavailable(f"the Schema Registry's answer to registering under {subject} holds no id")
        return schema_id

    def _call(self, method: str, path: str, body: dict[str, str] | None = None) -> object:
        """The registry's answer to a request, read as JSON; raises as ``_http_failure`` says, or
        AnswerTooLarge."""
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers | ({} if data is None else {"Content-Type": CONTENT_TYPE})
        where = f"the Schema Registry at {self.url}"
        try:
            reply = http.request(self.url + path, method=method, headers=headers, data=data,
                                 deadline_s=self.settings.timeout_s, max_bytes=MAX_ANSWER_BYTES, context=self._context)
        except http.UntrustedCertificate as untrusted:
            raise RegistryAccessError(f"{where} has a certificate that is not trusted ({untrusted}); give its CA's "
                                      f"certificate with --schema-registry-cafile.") from None
        except http.RedirectRefused as redirect:
            raise RegistryAccessError(f"{where} {redirect}; give --schema-registry the URL it redirects to.") from None
        except http.AnswerTooLarge as large:
            if large.status < 300:
                raise AnswerTooLarge(f"{where} {large}") from None
            raise _http_failure(where, large.status, f"an answer larger than {MAX_ANSWER_BYTES:,} bytes") from None
        except http.NoAnswer as failure:
            raise RegistryUnavailable(f"{where} {failure}") from None
        if not 200 <= reply.status < 300:
            raise _http_failure(where, reply.status, _message(reply))
        try:
            return json.loads(reply.body)
        except (ValueError, RecursionError) as error:  # an answer that is not JSON (a proxy's error page)
            raise RegistryUnavailable(f"{where} did not answer with JSON: {excerpt(str(error), 200)}") from None


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


def registered_schema(schema_id: int, found: object) -> RegisteredSchema:
    """The schema in the registry's answer for ``schema_id``, every field used checked for its type
    (else SchemaNotFound, naming the field)."""
    def unusable(what: str) -> SchemaNotFound:
        return SchemaNotFound(f"schema {schema_id} cannot be read from the Schema Registry's answer: {what}")

    if not isinstance(found, dict):
        raise unusable(f"it is {_shown(found)}, not an object")
    text, schema_type, references = found.get("schema"), found.get("schemaType"), found.get("references")
    if not isinstance(text, str):
        raise unusable(f"its schema is {_shown(text)}, not a string")
    if schema_type is not None and not isinstance(schema_type, str):
        raise unusable(f"its schemaType is {_shown(schema_type)}, not a string")
    if references is None:
        references = []
    elif not isinstance(references, list) or not all(
            isinstance(reference, dict) and isinstance(reference.get("name"), str) for reference in references):
        raise unusable(f"its references are {_shown(references)}, not a list of objects each with a name")
    return RegisteredSchema(schema_id, text, "AVRO" if schema_type is None else schema_type,
                            tuple(reference["name"] for reference in references))


def _shown(value: object) -> str:
    """A value of an answer, as JSON, cut short."""
    return excerpt(json.dumps(value), 200)


def _message(reply: http.Reply) -> str:
    """What the registry says of an error (its JSON ``message``), else the status line's words."""
    try:
        answer = json.loads(reply.body)
    except (ValueError, RecursionError):
        return reply.reason
    message = answer.get("message") if isinstance(answer, dict) else None
    return excerpt(str(message)) if message else reply.reason


def _http_failure(where: str, status: int, message: str) -> Exception:
    """The failure an HTTP error status stands for; where : the registry, as errors name it."""
    if status in ACCESS_REFUSED:
        return RegistryAccessError(f"{where} refused access (HTTP {status}): check --schema-registry-user and "
                                   f"its password.")
    if status >= 500 or status in (408, 429):
        return RegistryUnavailable(f"{where} answered HTTP {status}: {message}")
    return RegistryRefused(f"{where} refused the request (HTTP {status}): {message}", status)
