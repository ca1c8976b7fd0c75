"""The metrics endpoint of a running `worker serve`: every series the Grafana dashboard and the alert
rules of deploy/ select is served; and under clients that stall (slowloris) it holds a bounded
number of connections, cuts off a request that trickles in, answers a scrape, and the service keeps
serving, on IPv4 and IPv6."""

from __future__ import annotations

import os
import resource
import socket
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from tests.helpers.kafka import json_message, new_topic, send
from tests.helpers.monitoring import queries, samples, selectors
from tests.helpers.service import Service, free_port, labeled_messages, wait_for

STALLED = 400  # more than the endpoint's 64 connections, and than the open files left under the limit below
OPEN_FILES_LIMIT = 256


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


def status(url: str) -> int:
    try:
        return urllib.request.urlopen(url, timeout=5).status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def stall(address: tuple[str, int]) -> socket.socket:
    """A connection that sends the start of a request, then nothing."""
    client = socket.create_connection(address, timeout=5)
    client.sendall(b"GET /metrics HTTP/1.1\r\n")
    return client


def seconds_until_cut_off(address: tuple[str, int], longest: float) -> float | None:
    """A client sending one header line a second: how long until the endpoint hangs up (None: never)."""
    client, started = stall(address), time.monotonic()
    try:
        while time.monotonic() - started < longest:
            time.sleep(1)
            try:
                client.sendall(b"X-Slow: 1\r\n")
                client.settimeout(0.05)
                if client.recv(1024) == b"":
                    return time.monotonic() - started
            except TimeoutError:
                continue
            except OSError:  # reset
                return time.monotonic() - started
        return None
    finally:
        client.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_stalled_clients_neither_exhaust_the_service_nor_keep_a_scrape_out(kafka_bootstrap, kafka_client, tmp_path,
                                                                           host):
    if host == "::1" and not has_ipv6_loopback():
        pytest.skip("no IPv6 loopback on this machine")
    port = free_port()
    url = f"http://{'[::1]' if host == '::1' else host}:{port}"
    service = Service(kafka_bootstrap, new_topic(kafka_bootstrap, "metrics"), tmp_path, "--text-features",
                      "--metrics-host", host, "--metrics-port", port, client=kafka_client).start()
    stalled: list[socket.socket] = []
    try:
        assert wait_for(lambda: status(f"{url}/readyz") == 200, timeout=120), service.log_tail()
        pid = service.process.pid
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (OPEN_FILES_LIMIT, OPEN_FILES_LIMIT))
        before = open_files(pid)
        stalled = [stall((host, port)) for _ in range(STALLED)]
        time.sleep(1)
        assert open_files(pid) <= before + 64 + 8, (before, open_files(pid))
        scrape = urllib.request.urlopen(f"{url}/metrics", timeout=5)
        assert scrape.status == 200 and b"nbstream_kafka_sessions_total" in scrape.read()
        assert (cut_off := seconds_until_cut_off((host, port), longest=20)) is not None and cut_off < 8, cut_off
        assert service.running() and status(f"{url}/healthz") == 200, service.log_tail()
        assert service.terminate() == 0, service.log_tail()
    finally:
        for client in stalled:
            client.close()
        if service.running():
            service.kill()


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return response.read().decode()
    except OSError:
        return ""


def test_every_series_the_dashboard_and_the_alerts_select_is_served(kafka_bootstrap, tmp_path):
    """Labeled messages on two partitions (judged, their errors watched for drift), messages whose
    labels come on a labels topic, one message that is a dead letter: then every selector of every
    query in deploy/grafana/nbstream.json and deploy/prometheus/alerts.yml, label matchers included,
    matches a series the service serves. (The series do not depend on the Kafka client.)"""
    topic = new_topic(kafka_bootstrap, "monitored", partitions=2)
    labels_topic = new_topic(kafka_bootstrap, "monitored-labels", partitions=2)
    values, _, _ = labeled_messages(200, np.random.default_rng(5))
    waiting = [json_message(features=[1, 2, 3, 4, 5, 6], id=f"w{i}") for i in range(4)]
    send(kafka_bootstrap, topic, values + waiting + [b"{not json"], partition_of=lambda i: i % 2)
    send(kafka_bootstrap, labels_topic, [json_message(id="w0", label="ham")], partition_of=lambda i: 0)
    port = free_port()
    service = Service(kafka_bootstrap, topic, tmp_path, "--labels-topic", labels_topic, "--drift-detector", "adwin",
                      "--metrics-port", port).start()
    wanted = [(where, selector) for where, expr in queries().items() for selector in selectors(expr)]

    def unmatched() -> list[str]:
        served = samples(scrape(port))
        return [f"{where}: {selector}" for where, selector in wanted
                if not any(selector.matches(name, labels) for name, labels in served)]

    try:
        assert wanted
        assert wait_for(lambda: not unmatched(), timeout=120), "\n".join(unmatched()) + service.log_tail()
        assert service.terminate() == 0, service.log_tail()
    finally:
        if service.running():
            service.kill()
