"""OAUTHBEARER tokens from an OIDC token endpoint (a real HTTP server in the test): the client
credentials grant, the cached token and its refresh, and each failure as one line without the secret;
and a hostile endpoint (trickling, redirecting elsewhere, answering megabytes, odd lifetimes), each
behaviour alone."""

from __future__ import annotations

import base64
import json
import logging
import socket
import time

import pytest
from kafka.net.sasl.oauth import SaslMechanismOAuth

from tests.helpers.hostile_http import HostileServer, json_answer, padded_json, redirect, trickle
from tests.helpers.oidc import OidcProvider
from worker.errors import UserError
from worker.io.kafka import kafka_python, oauth
from worker.io.kafka.oauth import (
    LONGEST_LIFETIME_S,
    MAX_ANSWER_BYTES,
    REFRESH_AT,
    TokenRefused,
    TokenSource,
    TokenUnavailable,
    checked_source,
)
from worker.io.kafka.settings import KafkaSettings, OAuthClient, Secret
from worker.redaction import redact

SECRET = "s3cr3t-of-the-client"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def provider():
    provider = OidcProvider("kafka").start()
    yield provider
    provider.stop()


def source(provider, client_id, clock=None, **behaviour) -> TokenSource:
    provider.add_client(client_id, SECRET, **behaviour)
    client = OAuthClient(provider.token_url, client_id, Secret(SECRET), scope="kafka.read kafka.write")
    return TokenSource(client, clock=clock or Clock())


def test_a_token_is_asked_for_with_the_client_credentials_and_kept(provider):
    tokens = source(provider, "kept")
    first = tokens.token()
    assert tokens.token() == first and provider.issued["kept"] == 1
    form, authorization = provider.requests[-1]
    assert form == {"grant_type": "client_credentials", "scope": "kafka.read kafka.write"}
    assert base64.b64decode(authorization.removeprefix("Basic ")).decode() == f"kept:{SECRET}"
    claims = first.split(".")[1]
    assert b'"sub": "kept"' in base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4))


def test_a_new_token_is_fetched_once_80_percent_of_its_lifetime_has_passed(provider):
    clock = Clock()
    tokens = source(provider, "short", clock, lifetime_s=10)
    tokens.token()
    clock.now += REFRESH_AT * 10 - 0.01
    tokens.token()
    assert provider.issued["short"] == 1
    clock.now += 0.01
    tokens.token()
    assert provider.issued["short"] == 2
    clock.now += 7.99
    tokens.token()
    assert provider.issued["short"] == 2


@pytest.mark.parametrize("behaviour, expected", [
    ({"secret": "not-it"}, r"^the OAuth token endpoint http://127\.0\.0\.1:\d+/token refused the client credentials "
                           r"of {id} \(HTTP 401\) \(invalid_client: client authentication failed\): check "
                           r"--sasl-oauth-client-id, its secret and --sasl-oauth-scope\.$"),
    ({"answer": "html"}, r"^the OAuth token endpoint \S+ did not answer with JSON: is it the token endpoint of an "
                         r"OIDC provider\?$"),
    ({"answer": "no token"}, r"^the OAuth token endpoint \S+ answered without an access_token\.$"),
])
def test_a_refusal_or_an_answer_without_a_token_is_one_line_naming_the_endpoint(provider, behaviour, expected):
    client_id = f"refused-{len(provider.clients)}"
    provider.add_client(client_id, behaviour.pop("secret", SECRET), **behaviour)
    tokens = TokenSource(OAuthClient(provider.token_url, client_id, Secret(SECRET)))
    with pytest.raises(TokenRefused, match=expected.replace("{id}", client_id)) as refused:
        tokens.token()
    assert isinstance(refused.value, UserError) and SECRET not in str(refused.value)


def test_an_endpoint_that_cannot_answer_now_is_unavailable_not_refused(provider):
    with pytest.raises(TokenUnavailable, match=r"answered HTTP 500 \(server_error\)$"):
        source(provider, "overloaded", answer="500").token()
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/token"
    with pytest.raises(TokenUnavailable, match=rf"^the OAuth token endpoint {closed} cannot be reached: "):
        TokenSource(OAuthClient(closed, "me", Secret(SECRET))).token()


def test_the_secret_shows_in_no_repr(provider):
    tokens = source(provider, "shown")
    settings = KafkaSettings("b:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                             oauth=tokens.client)
    options = kafka_python.connection(settings, tokens)
    for text in (repr(tokens), repr(tokens.client), repr(settings), repr(options), settings.describe()):
        assert SECRET not in text
    assert settings.describe() == "b:1 over SASL_PLAINTEXT as shown (OAUTHBEARER) with kafka-python"
    token = tokens.token()
    assert redact(f"auth=Bearer {token} for {SECRET}") == "auth=Bearer *** for ***"  # whatever logs them


def test_kafka_python_sends_the_sources_token_in_its_oauthbearer_exchange(provider):
    tokens = source(provider, "kafka-python")
    settings = KafkaSettings("b:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                             oauth=tokens.client)
    options = kafka_python.connection(settings, tokens)
    assert options["sasl_mechanism"] == "OAUTHBEARER"
    mechanism = SaslMechanismOAuth(**options)  # refuses a provider that is not kafka-python's kind
    assert mechanism.auth_bytes() == f"n,,\x01auth=Bearer {tokens.token()}\x01\x01".encode()


def test_credentials_are_checked_at_start_but_an_endpoint_not_up_yet_is_waited_for(provider, caplog):
    provider.add_client("checked", SECRET)
    given = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"}
    right = KafkaSettings("b:1", **given, oauth=OAuthClient(provider.token_url, "checked", Secret(SECRET)))
    assert checked_source(right).token() and provider.issued["checked"] == 1  # the token fetched at start is kept
    wrong = KafkaSettings("b:1", **given, oauth=OAuthClient(provider.token_url, "checked", Secret("wrong")))
    with pytest.raises(TokenRefused, match="refused the client credentials of checked"):
        checked_source(wrong)
    provider.add_client("later", SECRET, answer="500")
    later = KafkaSettings("b:1", **given, oauth=OAuthClient(provider.token_url, "later", Secret(SECRET)))
    with caplog.at_level(logging.WARNING):
        assert checked_source(later) is not None
    assert [record.message for record in caplog.records if record.levelno >= logging.WARNING] == [
        "no OAuth token yet: asked again when a connection needs one"]  # debug lines show when another test set them
    assert checked_source(KafkaSettings("b:1")) is None


def test_blame_asks_the_endpoint_afresh_and_says_whose_fault_it_is(provider):
    tokens = source(provider, "blamed")
    tokens.token()
    assert tokens.blame() is None and provider.issued["blamed"] == 2  # asked afresh
    assert tokens.token() and provider.issued["blamed"] == 2  # and kept
    provider.add_client("blamed", SECRET, answer="500")
    assert isinstance(tokens.blame(), TokenUnavailable)
    provider.add_client("blamed", "rotated")
    refused = tokens.blame()
    assert isinstance(refused, TokenRefused) and "(HTTP 401) (invalid_client" in str(refused)
    assert SECRET not in str(refused) and "rotated" not in str(refused)


def test_kafka_python_is_told_a_token_failure_as_a_connection_failure_the_seam_gives_back(provider):
    """kafka-python handles its own exceptions when a connection cannot authenticate: a TokenUnavailable
    raised in it came out of a poll as a traceback. Its seam gives the endpoint's fault back: a refusal
    (ends the command), or a KafkaFailure (a new session)."""
    from kafka import errors

    from worker.io.kafka.client import KafkaFailure

    tokens = source(provider, "told", answer="500")
    mechanism = SaslMechanismOAuth(**kafka_python.connection(KafkaSettings(
        "b:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER", oauth=tokens.client), tokens))
    with pytest.raises(errors.KafkaConnectionError) as unavailable:
        mechanism.auth_bytes()
    assert isinstance(kafka_python.failure(unavailable.value), KafkaFailure)
    provider.add_client("told", "rotated")
    with pytest.raises(errors.KafkaConnectionError) as refused:
        mechanism.auth_bytes()
    assert isinstance(kafka_python.failure(refused.value), TokenRefused)
    # a bootstrap that failed on it says only that it could not bootstrap: the refusal is the news
    bootstrap = errors.KafkaTimeoutError("Unable to bootstrap from ['b:1']")
    assert kafka_python.failure(bootstrap) is refused.value.cause
    provider.add_client("told", SECRET)
    assert mechanism.auth_bytes()  # a token again: the refusal is forgotten
    assert not isinstance(kafka_python.failure(bootstrap), TokenRefused)


def test_librdkafkas_refusal_of_access_is_put_on_the_token_endpoint_when_it_is_at_fault(provider):
    """librdkafka fetches its own tokens: when the cluster refuses access, the endpoint is asked afresh."""
    pytest.importorskip("confluent_kafka")
    from worker.io.kafka.client import KafkaAccessError, KafkaFailure
    from worker.io.kafka.confluent import _Reporting

    tokens = source(provider, "librdkafka")
    no_token = KafkaAccessError('Kafka refused access: Failed to acquire SASL OAUTHBEARER token: {"error": "x"}')
    expired = KafkaAccessError("Kafka refused access: Failed to acquire SASL OAUTHBEARER token: Must supply an "
                               "unexpired token: now=2ms, exp=1ms")
    broker = KafkaAccessError("Kafka refused access: SASL authentication error: invalid_token")
    assert _Reporting()._blamed(no_token) is no_token  # no OIDC client: nothing to ask
    assert isinstance(_Reporting(tokens)._blamed(no_token), KafkaFailure)  # it gives a token now
    assert _Reporting(tokens)._blamed(expired) is expired  # it gives such a token every time
    assert _Reporting(tokens)._blamed(broker) is broker
    provider.add_client("librdkafka", SECRET, answer="500")
    assert isinstance(_Reporting(tokens)._blamed(broker), KafkaFailure)
    provider.add_client("librdkafka", "rotated")
    reporting = _Reporting(tokens)
    assert isinstance(reporting._blamed(broker), TokenRefused)
    provider.add_client("librdkafka", SECRET)
    assert isinstance(reporting._blamed(broker), TokenRefused)  # asked once per client


# ---- a hostile token endpoint, each behaviour alone ------------------------------------------

@pytest.fixture
def hostile():
    with HostileServer() as server:
        yield server


def hostile_source(server, clock=None) -> TokenSource:
    return TokenSource(OAuthClient(server.url + "/token", "me", Secret(SECRET)), clock=clock or Clock())


def test_a_trickling_endpoint_is_unavailable_at_the_deadline_and_start_goes_on(hostile, monkeypatch, caplog):
    monkeypatch.setattr(oauth, "DEADLINE_S", 1.0)
    hostile.behaviour = trickle(json.dumps({"access_token": "t", "expires_in": 60}).encode(), every_s=0.3)
    started = time.monotonic()
    with pytest.raises(TokenUnavailable, match=rf"^the OAuth token endpoint {hostile.url}/token did not answer "
                                               r"within 1 s$"):
        hostile_source(hostile).token()
    assert time.monotonic() - started < 1.5
    settings = KafkaSettings("b:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                             oauth=OAuthClient(hostile.url + "/token", "me", Secret(SECRET)))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        assert checked_source(settings) is not None
    assert time.monotonic() - started < 1.5
    assert [r.message for r in caplog.records if r.levelno >= logging.WARNING] == [
        "no OAuth token yet: asked again when a connection needs one"]


@pytest.mark.parametrize("status", [302, 307])
def test_a_redirect_to_another_origin_sends_it_neither_the_secret_nor_the_form(hostile, status):
    with HostileServer(json_answer({"access_token": "stolen", "expires_in": 60})) as elsewhere:
        hostile.behaviour = redirect(status, elsewhere.url + "/token")
        with pytest.raises(TokenRefused) as refused:
            hostile_source(hostile).token()
        assert elsewhere.requests == []
    assert str(refused.value) == (f"the OAuth token endpoint {hostile.url}/token redirects to another origin "
                                  f"({elsewhere.url}), where requests (and their credentials) are never sent; give "
                                  f"--sasl-oauth-token-url the URL it redirects to.")
    assert SECRET not in str(refused.value)


def test_an_endpoints_error_description_is_cut_short_and_a_huge_answer_not_read(hostile):
    hostile.behaviour = padded_json(500, {"error": "server_error"}, "error_description", 100_000)
    with pytest.raises(TokenUnavailable) as error:
        hostile_source(hostile).token()
    assert str(error.value) == (f"the OAuth token endpoint {hostile.url}/token answered HTTP 500 (server_error: " +
                                "x" * 986 + "... (100,014 characters))")
    hostile.behaviour = padded_json(500, {"error": "server_error"}, "error_description", 10_000_000)
    with pytest.raises(TokenUnavailable) as error:
        hostile_source(hostile).token()
    assert str(error.value) == f"the OAuth token endpoint {hostile.url}/token answered HTTP 500"
    hostile.behaviour = padded_json(200, {"expires_in": 60}, "access_token", MAX_ANSWER_BYTES)
    with pytest.raises(TokenRefused, match=r"answered HTTP 200 with more than 1,048,576 bytes, the most read: is "
                                           r"it the token endpoint of an OIDC provider\?$"):
        hostile_source(hostile).token()


@pytest.mark.parametrize("lifetime", [1e300, 10**400, float("inf"), -(10**400), "3600", True])
def test_a_lifetime_beyond_a_double_or_not_a_number_neither_crashes_nor_lasts_for_ever(hostile, lifetime):
    """expires_in 10**400 had raised OverflowError; 1e300 and Infinity had kept a token for ever."""
    hostile.behaviour = json_answer({"access_token": "not-a-jwt", "expires_in": lifetime})
    clock = Clock()
    tokens = hostile_source(hostile, clock)
    assert tokens.token() == "not-a-jwt"
    clock.now += REFRESH_AT * LONGEST_LIFETIME_S
    tokens.token()
    assert len(hostile.requests) == 2
