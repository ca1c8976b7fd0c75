"""The Open Inference Protocol's REST endpoints (v2), as an ASGI application on Starlette.

    GET  /v2                                   the server: name, version, extensions
    GET  /v2/health/live                       200 while the server runs
    GET  /v2/health/ready                      200 once every model can answer, else 503
    GET  /v2/models/{name}[/versions/{v}]          a model's metadata: inputs, outputs, platform, versions
    GET  /v2/models/{name}[/versions/{v}]/ready    200 once it can answer, else 503
    POST /v2/models/{name}[/versions/{v}]/infer    an answer

Every error is ``{"error": "one line"}`` with a status that says whose it is (4xx: the request's,
503: not yet, 500: the server's own, logged with its traceback). With a token, every endpoint but
the two health checks wants ``Authorization: Bearer TOKEN`` (compared in constant time; never logged).
A request body is read within ``Limits.body_seconds`` and up to ``Limits.max_bytes``.

An infer request's parameters may hold ``explain`` (k features per row), ``key`` (answer by that
key's model, of a model per key), ``min_position`` (answer once the model's committed state
includes these offsets) and ``timeout_ms`` (how long to wait for it, or for the key's lookup).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

import nbstream

from .answering import AnsweringModel
from .budget import CpuBudget
from .errors import NotFound, RequestError
from .parameters import key_of, min_position_of, wait_ms_of
from .sources import ModelSource, model_at, model_knowing, model_named
from .tensors import read_request

log = logging.getLogger(__name__)

SERVER_NAME = "nbstream"
BODIES_AT_ONCE = 4


@dataclass(frozen=True)
class Limits:
    """What one request may be: rows of an input, bytes of a body, seconds to send the body."""
    max_rows: int = 10_000
    max_bytes: int = 64 << 20
    body_seconds: float = 30.0


def _json(document: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY), status,
                    headers=headers, media_type="application/json")


def _error(message: str, status: int) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return _json({"error": message}, status, headers)


class InferenceEndpoints:
    """The handlers, over one source of models."""

    def __init__(self, source: ModelSource, limits: Limits, token: bytes | None, budget: CpuBudget):
        self.source, self.limits, self._token, self.budget = source, limits, token, budget
        # Bodies read and parsed at once: each may take a few times --http-max-bytes while it is.
        self._reading = asyncio.Semaphore(BODIES_AT_ONCE)

    def app(self) -> Starlette:
        routes = [Route("/v2", self.server_metadata), Route("/v2/health/live", self.live),
                  Route("/v2/health/ready", self.server_ready)]
        for prefix in ("/v2/models/{name}", "/v2/models/{name}/versions/{version}"):
            routes += [Route(prefix, self.model_metadata), Route(prefix + "/ready", self.model_ready),
                       Route(prefix + "/infer", self.infer, methods=["POST"])]
        return Starlette(routes=routes, exception_handlers={
            HTTPException: self._http_error, RequestError: self._request_error, Exception: self._internal_error})

    # ---- endpoints ---------------------------------------------------------------------------
    async def server_metadata(self, request: Request) -> Response:
        self._authorize(request)
        return _json({"name": SERVER_NAME, "version": nbstream.__version__, "extensions": []})

    async def live(self, request: Request) -> Response:
        return _json({"live": True})

    async def server_ready(self, request: Request) -> Response:
        ready = self.source.ready()
        return _json({"ready": ready}, 200 if ready else 503)

    async def model_metadata(self, request: Request) -> Response:
        self._authorize(request)
        return _json(self._model(request).metadata())

    async def model_ready(self, request: Request) -> Response:
        self._authorize(request)
        model = self._model(request)
        return _json({"name": model.name, "ready": model.ready}, 200 if model.ready else 503)

    async def infer(self, request: Request) -> Response:
        await self.budget.spend()
        self._authorize(request)
        named = self._model(request)  # an unknown model is refused before its body is read
        if request.headers.get("content-encoding", "identity") != "identity":
            raise RequestError("compressed request bodies are not taken; send them as they are.", 415)
        async with self._reading:
            body = await self._body(request)
            asked = read_request(body, request.headers.get("inference-header-content-length"),
                                 self.limits.max_rows)
            del body
        topics = {key.rpartition(":")[0] for key in named.position} or None
        wait_ms = wait_ms_of(asked.parameters.get("timeout_ms"))
        key = key_of(asked.parameters.get("key"), named.name, named.keys is not None)
        deadline = time.monotonic() + wait_ms / 1000  # (one timeout_ms for both waits)
        model = await model_at(self.source, named.name, min_position_of(asked.parameters.get("min_position"), topics),
                               wait_ms)
        model = await model_knowing(self.source, model, key, wait_ms, deadline)
        self._check_version(request, model)
        return _json(model.infer(asked))

    # ---- what every endpoint checks ----------------------------------------------------------
    def _authorize(self, request: Request) -> None:
        if self._token is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self._token):
            raise RequestError("a valid bearer token is needed (Authorization: Bearer TOKEN).", 401)

    def _model(self, request: Request) -> AnsweringModel:
        model = model_named(self.source, request.path_params["name"])
        self._check_version(request, model)
        return model

    @staticmethod
    def _check_version(request: Request, model: AnsweringModel) -> None:
        version = request.path_params.get("version")
        if version is not None and version != model.version:
            raise NotFound(f"model {model.name!r} has no version {version[:80]!r}; it is at version {model.version!r}.")

    async def _body(self, request: Request) -> bytes:
        """The body, read within the limits (RequestError 413 beyond the size, 408 beyond the time)."""
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limits.max_bytes:
            raise self._too_large()

        async def read() -> bytes:
            parts, size = [], 0
            async for part in request.stream():
                size += len(part)
                if size > self.limits.max_bytes:
                    raise self._too_large()
                parts.append(part)
            return b"".join(parts)

        try:
            return await asyncio.wait_for(read(), self.limits.body_seconds)
        except TimeoutError:
            raise RequestError(f"the request body did not arrive within {self.limits.body_seconds:g} s.", 408) \
                from None
        except ClientDisconnect:  # no one is left to answer
            raise RequestError("the client left before its request was read.", 400) from None

    def _too_large(self) -> RequestError:
        return RequestError(f"the request body is over {self.limits.max_bytes} bytes (--http-max-bytes).", 413)

    # ---- errors -----------------------------------------------------------------------------
    async def _request_error(self, request: Request, error: Exception) -> Response:
        assert isinstance(error, RequestError)
        return _error(str(error), error.status)

    async def _http_error(self, request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        message = "no such endpoint" if error.status_code == 404 else str(error.detail)
        return _error(f"{request.method} {request.url.path[:120]}: {message}.", error.status_code)

    async def _internal_error(self, request: Request, error: Exception) -> Response:
        log.error("an internal error answering a request", exc_info=error,
                  extra={"method": request.method, "path": request.url.path[:120]})
        return _error(f"internal error ({type(error).__name__}); the server's log has its traceback.", 500)


def inference_app(source: ModelSource, limits: Limits, token: bytes | None = None,
                  cpu_share: float | None = None) -> Callable[..., Awaitable[None]]:
    """The ASGI application answering from ``source``, its thread using at most ``cpu_share`` of
    a CPU for requests (``budget``; None: no bound)."""
    endpoints = InferenceEndpoints(source, limits, token, CpuBudget(cpu_share)).app()

    async def answered_once(scope: Any, receive: Any, send: Any) -> None:
        try:
            await endpoints(scope, receive, send)
        except Exception:  # noqa: BLE001 - answered 500 and logged by _internal_error; uvicorn would log it again
            pass

    return answered_once
