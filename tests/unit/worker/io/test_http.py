"""The worker's one HTTP client, against hostile servers on 127.0.0.1 (each bad behaviour alone):
a total deadline whatever the server trickles, a capped answer, no request to another origin,
and a server's text cut short."""

from __future__ import annotations

import socket
import time
import tracemalloc

import pytest

from tests.helpers.hostile_http import HostileServer, answer, json_answer, padded_json, redirect, routes, trickle
from worker.io import http

SCHEMA = b'{"schema": "\\"string\\""}'


@pytest.fixture
def server():
    with HostileServer() as hostile:
        yield hostile


@pytest.fixture
def elsewhere():
    """A second server, another origin, which records what reaches it."""
    with HostileServer(json_answer({"got": "it"})) as other:
        yield other


@pytest.mark.parametrize("headers_too", [False, True], ids=["body", "headers"])
def test_an_answer_trickled_a_byte_at_a_time_is_cut_off_at_the_deadline(server, headers_too):
    """Each byte comes well within any per-read timeout; the request ends at its deadline all the same."""
    server.behaviour = trickle(SCHEMA, every_s=0.2, headers_too=headers_too)
    started = time.monotonic()
    with pytest.raises(http.NoAnswer, match=r"^did not answer within 1 s$"):
        http.request(server.url + "/schemas/ids/1", deadline_s=1.0, max_bytes=1 << 20)
    assert 1.0 <= time.monotonic() - started < 1.5


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_redirect_to_another_origin_is_not_followed_and_the_other_origin_gets_nothing(server, elsewhere, status,
                                                                                        method):
    server.behaviour = redirect(status, elsewhere.url + "/token")
    with pytest.raises(http.RedirectRefused) as refused:
        http.request(server.url + "/token", method=method, headers={"Authorization": "Basic c2VjcmV0"},
                     data=b"grant_type=client_credentials" if method == "POST" else None, deadline_s=5,
                     max_bytes=1 << 20)
    assert str(refused.value) == (f"redirects to another origin ({elsewhere.url}), where requests (and their "
                                  f"credentials) are never sent")
    assert elsewhere.requests == [] and len(server.requests) == 1


def test_a_redirect_to_another_port_or_scheme_of_the_same_host_is_another_origin(server):
    port = int(server.url.rsplit(":", 1)[1])
    for location in (f"http://127.0.0.1:{port + 1}/x", f"https://127.0.0.1:{port}/x", f"http://localhost:{port}/x"):
        server.behaviour = redirect(307, location)
        with pytest.raises(http.RedirectRefused, match="redirects to another origin"):
            http.request(server.url + "/x", deadline_s=5, max_bytes=1 << 20)


def test_a_redirect_within_the_origin_is_followed_with_its_headers(server):
    server.behaviour = routes({"/old": redirect(307, "/new")}, json_answer({"schema": "x"}))
    reply = http.request(server.url + "/old", headers={"Authorization": "Basic c2VjcmV0"}, deadline_s=5,
                         max_bytes=1 << 20)
    assert (reply.status, reply.body) == (200, b'{"schema": "x"}')
    assert [(r.path, r.headers.get("Authorization")) for r in server.requests] == [
        ("/old", "Basic c2VjcmV0"), ("/new", "Basic c2VjcmV0")]


@pytest.mark.parametrize("status", [200, 500])
def test_an_answer_larger_than_the_cap_is_refused_with_its_status_in_bounded_memory(server, status):
    cap = 16 << 20
    server.behaviour = padded_json(status, {"error": "server_error"}, "error_description", 100 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(http.AnswerTooLarge) as large:
            http.request(server.url + "/schemas/ids/1", deadline_s=30, max_bytes=cap)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert large.value.status == status
    assert str(large.value) == f"answered HTTP {status} with more than 16,777,216 bytes, the most read"
    assert peak < 2 * cap, peak


def test_an_answer_of_any_status_is_a_reply_and_its_reason_is_cut_short(server):
    server.behaviour = answer(404, b'{"message": "no such schema"}')
    reply = http.request(server.url + "/schemas/ids/1", deadline_s=5, max_bytes=1 << 20)
    assert (reply.status, reply.reason, reply.body) == (404, "Not Found", b'{"message": "no such schema"}')

    def long_reason(handler, stopping):
        handler.send_response(503, "x" * 60_000)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    server.behaviour = long_reason
    reply = http.request(server.url + "/x", deadline_s=5, max_bytes=1 << 20)
    assert reply.status == 503 and reply.reason == "x" * 1_000 + "... (60,000 characters)"


def test_a_server_that_is_not_there_cannot_be_reached():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/token"
    with pytest.raises(http.NoAnswer, match=r"^cannot be reached: \[Errno 111\] Connection refused$"):
        http.request(closed, deadline_s=5, max_bytes=1 << 20)


def test_a_server_that_hangs_up_did_not_answer(server):
    def hang_up(handler, stopping):
        handler.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: 100\r\n\r\n{\"cut")

    server.behaviour = hang_up
    with pytest.raises(http.NoAnswer, match=r"^did not answer: IncompleteRead"):
        http.request(server.url + "/x", deadline_s=5, max_bytes=1 << 20)
