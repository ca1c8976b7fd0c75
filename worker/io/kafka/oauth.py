"""OAuth 2.0 access tokens for SASL/OAUTHBEARER, from an OIDC provider's token endpoint.

``TokenSource`` performs the client-credentials grant (RFC 6749, 4.4) through the worker's one
HTTP client (``worker.io.http``: a deadline per request, a bounded answer, no redirect to another
origin), keeps the token, and asks for a new one once 80% of its lifetime has passed. kafka-python
asks it for a token each time it opens (or re-authenticates) a connection; librdkafka fetches its
own tokens, and is given the same settings (see ``confluent.connection``).

Each failure says whose fault it is: ``TokenRefused`` (the endpoint refused the credentials,
answered with no token, redirected to another origin, or its certificate is not trusted: the
settings' fault, one line and exit status 2), ``TokenUnavailable`` (unreachable, not answering
within DEADLINE_S, a 5xx, 408 or 429: nobody's, asked again on the next connection). Neither the
client secret nor a token appears in a message, a repr or a log line, and what the endpoint says
is cut short.

A refusal ends the command whenever it comes: at start (the first token, asked for before
anything else), when the first connections ask for a token the endpoint did not give at start,
and while serving (the credentials revoked or rotated: they are read once, at start, so only a
new process, started with the new ones, can get tokens again). The Kafka clients pass it on as
theirs (``kafka_python._TokenProvider``; for librdkafka, which asks for its own tokens,
``blame`` asks the endpoint afresh when the cluster refuses access).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable

from ...errors import UserError
from ...redaction import keep_secret
from .. import http
from ..excerpts import excerpt
from .settings import KafkaSettings, OAuthClient

log = logging.getLogger(__name__)

REFRESH_AT = 0.8  # of a token's lifetime
UNSTATED_LIFETIME_S = 300.0  # when neither expires_in nor the token's exp claim says
LONGEST_LIFETIME_S = 86_400.0  # a token said to live longer is refreshed daily all the same
# The whole request: kafka-python waits for the token on its network thread (its heartbeats too),
# and a stop asked for at start waits for the first one.
DEADLINE_S = 5.0
MAX_ANSWER_BYTES = 1 << 20  # a token endpoint's answer holds a token of a few kilobytes


class TokenRefused(UserError):
    """The token endpoint refused the client credentials, or gave no usable token."""


class TokenUnavailable(Exception):
    """The token endpoint could not answer now (unreachable, timed out, overloaded)."""


class TokenSource:
    """Access tokens of one OIDC client, fetched when none is held or the held one is due for refresh.

    Thread-safe: kafka-python's consumer, producer and admin client share one source.
    """

    def __init__(self, client: OAuthClient, cafile: str | None = None, clock: Callable[[], float] = time.monotonic):
        """cafile : PEM certificates that sign an https endpoint's certificate (else the system's)."""
        self.client = client
        self._context = ssl.create_default_context(cafile=cafile) if cafile else None
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0

    def __repr__(self) -> str:  # kafka-python logs its configuration, this object with it
        return f"TokenSource({self.client.token_url!r}, client_id={self.client.client_id!r})"

    def token(self) -> str:
        """The held access token, or a new one when it is due (raises TokenRefused, TokenUnavailable)."""
        with self._lock:
            if self._token is None or self._clock() >= self._refresh_at:
                asked_at = self._clock()
                token, lifetime_s = self._fetch()
                keep_secret(token, passing=True)  # kafka-python logs its requests at debug level, the token with them
                self._token, self._refresh_at = token, asked_at + REFRESH_AT * lifetime_s
                log.debug("OAuth token fetched", extra={"token_url": self.client.token_url,
                                                        "refresh_in_s": round(REFRESH_AT * lifetime_s, 1)})
            return self._token

    def blame(self) -> TokenRefused | TokenUnavailable | None:
        """Whether the token endpoint is at fault now, asked afresh (a client that fetches its own
        tokens could not authenticate): TokenRefused when it refuses the credentials, TokenUnavailable
        when it does not answer, None when it gives a token (kept, as ``token`` keeps one)."""
        with self._lock:
            self._refresh_at = 0.0
        try:
            self.token()
        except (TokenRefused, TokenUnavailable) as fault:
            return fault
        return None

    def _fetch(self) -> tuple[str, float]:
        """A new (access token, lifetime in seconds) from the endpoint."""
        url = self.client.token_url
        form = {"grant_type": "client_credentials"} | ({"scope": self.client.scope} if self.client.scope else {})
        # HTTP basic, the credentials as they are: what librdkafka sends, so that both clients
        # pass (or fail) alike with one provider.
        credentials = f"{self.client.client_id}:{self.client.client_secret.reveal()}".encode()
        headers = {"Authorization": "Basic " + base64.b64encode(credentials).decode(), "Accept": "application/json",
                   "Content-Type": "application/x-www-form-urlencoded"}
        where = f"the OAuth token endpoint {url}"
        try:
            reply = http.request(url, method="POST", headers=headers, data=urllib.parse.urlencode(form).encode(),
                                 deadline_s=DEADLINE_S, max_bytes=MAX_ANSWER_BYTES, context=self._context)
        except http.UntrustedCertificate as untrusted:
            raise TokenRefused(f"{where} has a certificate that is not trusted ({untrusted}); give its CA's "
                               f"certificate with --ssl-cafile.") from None
        except http.RedirectRefused as redirect:
            raise TokenRefused(f"{where} {redirect}; give --sasl-oauth-token-url the URL it redirects to.") from None
        except http.AnswerTooLarge as large:
            if large.status < 300:
                raise TokenRefused(f"{where} {large}: is it the token endpoint of an OIDC provider?") from None
            raise _http_failure(where, self.client.client_id, large.status, "") from None
        except http.NoAnswer as failure:
            raise TokenUnavailable(f"{where} {failure}") from None
        if not 200 <= reply.status < 300:
            raise _http_failure(where, self.client.client_id, reply.status, _said(reply.body))
        return _token_of(url, reply.body)


def checked_source(settings: KafkaSettings) -> TokenSource | None:
    """The token source of the settings' OIDC client (None without one), having asked it for a first
    token: credentials the endpoint refuses end the command at start (TokenRefused), while an
    endpoint that does not answer yet is asked again when a connection needs a token."""
    if settings.oauth is None:
        return None
    source = TokenSource(settings.oauth, settings.ssl_cafile if settings.oauth.uses_https else None)
    try:
        source.token()
    except TokenUnavailable as error:
        log.warning("no OAuth token yet: asked again when a connection needs one", extra={"cause": str(error)})
    return source


def _said(body: bytes) -> str:
    """The endpoint's own error code and description (RFC 6749, 5.2), cut short, or ""."""
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    if not isinstance(answer, dict):
        return ""
    return excerpt(": ".join(str(answer[key]) for key in ("error", "error_description") if answer.get(key)))


def _http_failure(where: str, client_id: str, status: int, said: str) -> Exception:
    """The failure an HTTP error status stands for; where : the endpoint, as errors name it; said :
    what it said of the error."""
    said = f" ({said})" if said else ""
    if status >= 500 or status in (408, 429):
        return TokenUnavailable(f"{where} answered HTTP {status}{said}")
    return TokenRefused(f"{where} refused the client credentials of {client_id} (HTTP {status}){said}: check "
                        f"--sasl-oauth-client-id, its secret and --sasl-oauth-scope.")


def _token_of(url: str, body: bytes) -> tuple[str, float]:
    """(access token, lifetime in seconds) from a token endpoint's answer (RFC 6749, 5.1)."""
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        raise TokenRefused(f"the OAuth token endpoint {url} did not answer with JSON: is it the token "
                           f"endpoint of an OIDC provider?") from None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise TokenRefused(f"the OAuth token endpoint {url} answered without an access_token.")
    lifetime = _seconds(answer.get("expires_in"))
    if lifetime is None or lifetime <= 0:
        expires = _expiry_claim(token)
        lifetime = max(1.0, expires - time.time()) if expires is not None else UNSTATED_LIFETIME_S
    return token, min(lifetime, LONGEST_LIFETIME_S)


def _expiry_claim(token: str) -> float | None:
    """The exp claim of a JWT (not verified: the broker does that), or None."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        expires = claims.get("exp")
    except (IndexError, ValueError, AttributeError, RecursionError):
        return None
    return _seconds(expires)


def _seconds(value: object) -> float | None:
    """A JSON number as a finite float, or None (not a number, or beyond a double)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None
