"""A message means the same to `worker serve` alone on its topic and inside a poll of good messages."""

from __future__ import annotations

import json
import time

from tests.helpers.kafka import TopicWatcher, json_message, new_topic, send
from tests.helpers.service import Service

FEATURES = b"[1, 0, 2, 0, 3, 0]"
CASES = [  # (value, the start of its dead letter's error; None: it is predicted)
    (b"\xef\xbb\xbf" + json_message(features=[1, 0, 2, 0, 3, 0], label=1, id="bom"),
     "malformed JSON: UTF-8 byte order mark"),
    (b'{"id": "twice", "features": %s, "label": 1, "label": 2}' % FEATURES, "duplicate key 'label'"),
    (b'{"id": "big", "features": [9223372036854775808, 0, 2, 0, 3, 0], "label": 1}', None),
    (b'{"id": "label", "features": %s, "label": 9223372036854775808}' % FEATURES,
     "label 9223372036854775808 is beyond ±2**53"),
    (b'{"id": 1180591620717411303424, "features": %s, "label": 2}' % FEATURES, None),
    (b"null", "expected a JSON object; got NoneType"),
    (b'{"id": "nan", "features": %s, "label": 1, "x": NaN}' % FEATURES, "malformed JSON"),
    (b'{"id": "deep", "features": %s, "label": 1, "x": ' % FEATURES + b"[" * 20_000 + b"]" * 20_000 + b"}",
     "malformed JSON"),
]


def answered(watchers: list[TopicWatcher], n: int, timeout: float = 90.0) -> bool:
    """Whether the watchers' topics hold n records between them, within the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for watcher in watchers:
            watcher.wait_until(lambda _: True, timeout=1)  # one poll
        if sum(len(watcher.records) for watcher in watchers) >= n:
            return True
    return False


def outcomes(predictions: TopicWatcher, dead: TopicWatcher, offsets: list[int]) -> list:
    """Per input offset: ("error", its dead letter's error) or ("id", its prediction's id, exactly)."""
    found = {json.loads(r.value)["offset"]: ("id", json.loads(r.value)["id"]) for r in predictions.records}
    found.update({int(dict(r.headers)["source.offset"]): ("error", dict(r.headers)["error"].decode())
                  for r in dead.records})
    return [found.get(offset) for offset in offsets]


def test_each_case_reads_the_same_alone_and_inside_a_poll(kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "one-meaning")
    service = Service(kafka_bootstrap, topic, tmp_path, "--max-message-bytes", 60_000, client=kafka_client).start()
    predictions, dead = TopicWatcher(kafka_bootstrap, service.output), TopicWatcher(kafka_bootstrap, f"{topic}.dlq")
    watchers = [predictions, dead]
    try:
        send(kafka_bootstrap, topic, [json_message(features=[1, 0, 2, 0, 3, 0], label=1, id="first")])
        assert answered(watchers, 1), service.log_tail()
        for offset, (value, _) in enumerate(CASES, start=1):  # each alone: sent once the last is answered
            send(kafka_bootstrap, topic, [value], first_key=offset)
            assert answered(watchers, offset + 1), service.log_tail()
            assert service.running(), service.log_tail()
        alone = outcomes(predictions, dead, list(range(1, len(CASES) + 1)))

        good = [json_message(features=[0, 3, 0, 2, 0, 1], label=2, id=f"good-{i}") for i in range(len(CASES) + 1)]
        poll = [value for pair in zip(good, [value for value, _ in CASES], strict=False) for value in pair] + good[-1:]
        first = len(CASES) + 1
        service.pause()  # all in the log before the service polls again: one poll
        try:
            send(kafka_bootstrap, topic, poll, first_key=first)
        finally:
            service.resume()
        assert answered(watchers, first + len(poll)), service.log_tail()
        together = outcomes(predictions, dead, list(range(first + 1, first + len(poll), 2)))

        assert together == alone
        for (value, error), (kind, found) in zip(CASES, alone, strict=True):
            if error is None:
                assert kind == "id" and found == json.loads(value)["id"]  # 2**70 exactly, as sent
            else:
                assert kind == "error" and found.startswith(error), (error, found)
        assert outcomes(predictions, dead, list(range(first, first + len(poll), 2))) == \
            [("id", f"good-{i}") for i in range(len(good))]
        assert service.running() and service.terminate() == 0
    finally:
        predictions.close(), dead.close()
        if service.running():
            service.kill()
