"""A dead letter: its input as it came, then headers saying why, in our names and Kafka Connect's."""

from __future__ import annotations

import numpy as np

from worker.io.kafka.client import record_bytes
from worker.io.kafka.dead_letters import MAX_ERROR_CHARACTERS, dead_letter_record, error_headers
from worker.io.records import Polled, Record


def test_the_kind_of_problem_is_a_stable_class_name_and_the_message_is_the_error_cut():
    record = Record("in", 3, 41, b"k", b"v", row=2)
    headers = dict(error_headers(record, "list has 3 values; expected 6", "features"))
    assert headers["__connect.errors.exception.class.name"] == b"nbstream.wrong_length"
    assert (headers["__connect.errors.topic"], headers["__connect.errors.partition"],
            headers["__connect.errors.offset"], headers["source.row"]) == (b"in", b"3", b"41", b"2")
    long = dict(error_headers(record, "label '" + "x" * 5_000 + "'", "label"))
    assert long["error"] == long["__connect.errors.exception.message"]
    assert len(long["error"]) < MAX_ERROR_CHARACTERS + 30 and long["error"].endswith(b"(5,008 characters)")


def test_input_headers_that_leave_no_room_are_left_out_and_counted():
    record = Record("in", 0, 7, b"k", b"v" * 500, headers=[("a", b"x" * 600), ("b", b"y" * 600)])
    key, value, headers = dead_letter_record(record, "malformed JSON: x", "message", limit=1_500)
    named = dict(headers)
    assert "a" not in named and named["headers.dropped"] == b"2" and value == b"v" * 500
    assert record_bytes(key, value, headers) <= 1_500


def test_input_headers_that_fit_are_kept_and_the_value_is_cut_instead():
    record = Record("in", 0, 7, b"k", b"v" * 2_000, headers=[("traceparent", b"00-ab-cd-01")])
    key, value, headers = dead_letter_record(record, "message of 2000 bytes exceeds the limit", "message", 1_500)
    assert headers[0] == ("traceparent", b"00-ab-cd-01") and dict(headers)["value.truncated.from"] == b"2000"
    assert record_bytes(key, value, headers) <= 1_500 and b"v" * 2_000 != value


def test_the_headers_of_each_message_follow_its_rows_and_survive_a_selection():
    polled = Polled.of("in", [Record("in", 0, i, None, b"m", [("n", str(i).encode())] if i != 1 else [])
                              for i in range(3)])
    rows = polled.expand(np.array([0, 0, 2]), np.array([0, 1, 0]), [b"r0", b"r1", b"r2"])
    assert [rows.record(i).headers for i in range(3)] == [[("n", b"0")], [("n", b"0")], [("n", b"2")]]
    kept = rows.only(np.array([False, True, True]))
    assert [kept.headers_of(i) for i in range(2)] == [[("n", b"0")], [("n", b"2")]]
    assert Polled.of("in", [Record("in", 0, 0, None, b"m")]).headers is None  # none at all: nothing kept
