"""A small OIDC provider for the tests: a token endpoint (client credentials grant) and a JWKS.

It runs on 127.0.0.1 on a free port, in a thread of the test process. Its tokens are real RS256
JWTs, which a broker's OAuthBearerValidatorCallbackHandler checks against ``jwks_url``. What each
client gets is set per client id (``add_client``): a token of a given lifetime, one signed with a
key the JWKS does not hold, one already expired, or an answer that is not a token at all.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

KEY_ID = "nbstream-test-key"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _number(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


@dataclass
class Client:
    secret: str
    lifetime_s: float = 3600.0
    wrong_key: bool = False  # signed by a key the JWKS does not hold (under the JWKS key's id)
    expired: bool = False  # its exp an hour ago
    answer: str = "token"  # or "html" (not JSON), "no token" (JSON without access_token), "500"


class OidcProvider:
    """``token_url`` serves tokens to the clients added; ``issued[client_id]`` counts them, and
    ``requests`` keeps each token request's form and Authorization header."""

    def __init__(self, audience: str):
        """audience : the aud claim of every token (what the broker expects)."""
        self.audience = audience
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._wrong_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.clients: dict[str, Client] = {}
        self.issued: Counter[str] = Counter()
        self.requests: list[tuple[dict, str]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                if self.path != "/jwks":
                    return self._reply(404, {"error": "not_found"})
                return self._reply(200, provider.jwks())

            def do_POST(self):  # noqa: N802
                if self.path != "/token":
                    return self._reply(404, {"error": "not_found"})
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                status, body = provider.answer(form, self.headers.get("Authorization", ""))
                return self._reply(status, body)

            def _reply(self, status: int, body):
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if isinstance(body, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="oidc-provider", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def token_url(self) -> str:
        return f"{self.url}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks"

    def start(self) -> OidcProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add_client(self, client_id: str, secret: str, **behaviour) -> None:
        self.clients[client_id] = Client(secret, **behaviour)

    def jwks(self) -> dict:
        public = self._key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": KEY_ID, "n": _number(public.n),
                          "e": _number(public.e)}]}

    def answer(self, form: dict, authorization: str) -> tuple[int, dict | str]:
        """(status, body) for a token request: HTTP basic credentials, or client_id and client_secret in the form."""
        self.requests.append((form, authorization))
        client_id, secret = form.get("client_id", ""), form.get("client_secret")
        if authorization.startswith("Basic "):
            client_id, _, secret = base64.b64decode(authorization[6:]).decode().partition(":")
        client = self.clients.get(client_id)
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        if client is None or client.secret != secret:
            return 401, {"error": "invalid_client", "error_description": "client authentication failed"}
        if client.answer == "html":
            return 200, "<html><body>Sign in</body></html>"
        if client.answer == "no token":
            return 200, {"token_type": "Bearer", "expires_in": 60}
        if client.answer == "500":
            return 500, {"error": "server_error"}
        self.issued[client_id] += 1
        return 200, {"access_token": self.jwt(client_id, client, form.get("scope")), "token_type": "Bearer",
                     "expires_in": int(client.lifetime_s)}

    def jwt(self, subject: str, client: Client, scope: str | None) -> str:
        now = int(time.time())
        issued_at = now - 7200 if client.expired else now
        claims = {"sub": subject, "aud": self.audience, "iss": self.url, "iat": issued_at,
                  "exp": now - 3600 if client.expired else now + int(client.lifetime_s)}
        if scope:
            claims["scope"] = scope
        header = {"alg": "RS256", "typ": "JWT", "kid": KEY_ID}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        key = self._wrong_key if client.wrong_key else self._key
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"
