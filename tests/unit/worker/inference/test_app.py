"""The inference API's endpoints on a real server: metadata, answers equal to the library's, and
one clear error line (with the right status) for every request that cannot be answered."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from tests.helpers.inference import call, infer_body, published, running_api, text_model, vector_model
from worker.errors import ConfigError
from worker.inference.config import InferenceApiConfig
from worker.inference.server import InferenceServer


@pytest.fixture(scope="module")
def api():
    board = published(vector_model(), text_model())
    with running_api(board, http_max_rows=50, http_max_bytes=64 << 10, http_max_connections=8) as server:
        server.board = board
        yield server


def _rows(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 4, size=(n, 16))


def test_server_and_health_endpoints_answer(api):
    assert call(api, "GET", "/v2") == (200, {"name": "nbstream", "version": pytest.importorskip("nbstream").__version__,
                                             "extensions": []})
    assert call(api, "GET", "/v2/health/live")[0] == 200
    assert call(api, "GET", "/v2/health/ready") == (200, {"ready": True})
    assert call(api, "GET", "/v2/models/digits/ready") == (200, {"name": "digits", "ready": True})


def test_metadata_says_how_to_build_a_request():
    model = vector_model()
    with running_api(published(model, text_model())) as server:
        status, meta = call(server, "GET", "/v2/models/digits")
        assert status == 200
        assert meta["inputs"] == [{"name": "pixels", "datatype": "FP64", "shape": [-1, 16]}]
        assert [o["name"] for o in meta["outputs"]] == ["label", "probabilities", "explanation"]
        assert meta["versions"] == ["1"] and meta["platform"] == "nbstream"
        assert meta["parameters"]["classes"] == ["a", "b", "c"]
        _, text_meta = call(server, "GET", "/v2/models/spam/versions/5")
        assert text_meta["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]


@pytest.mark.parametrize("datatype", ["FP64", "FP32", "INT64", "UINT8", "INT32"])
def test_answers_equal_the_pipeline_for_every_numeric_datatype(api, datatype):
    X = _rows(7)
    model = api.board.models()["digits"]
    expected = model.pipeline.predict_proba({"pixels": pa.array(list(X), pa.list_(pa.int64()))})
    status, answer = call(api, "POST", "/v2/models/digits/infer", infer_body("pixels", datatype, X))
    assert status == 200, answer
    outputs = {o["name"]: o for o in answer["outputs"]}
    assert outputs["probabilities"]["shape"] == [7, 3]
    assert np.array(outputs["probabilities"]["data"]).reshape(7, 3) == pytest.approx(expected, rel=1e-12)
    assert outputs["label"]["data"] == [str(c) for c in model.pipeline.classes_[expected.argmax(axis=1)]]
    assert outputs["probabilities"]["parameters"]["classes"] == ["a", "b", "c"]
    assert answer["model_name"] == "digits" and answer["parameters"]["model_version"] == "1"


def test_a_binary_request_is_answered_as_its_json_twin(api):
    X = _rows(5).astype(np.float64)
    header = {"inputs": [{"name": "pixels", "datatype": "FP64", "shape": [5, 16],
                          "parameters": {"binary_data_size": X.nbytes}}]}
    import json

    head = json.dumps(header).encode()
    status, binary = call(api, "POST", "/v2/models/digits/infer", head + X.tobytes(),
                          headers={"Inference-Header-Content-Length": str(len(head))})
    _, plain = call(api, "POST", "/v2/models/digits/infer", infer_body("pixels", "FP64", X))
    assert status == 200 and binary["outputs"] == plain["outputs"]


def test_text_is_read_from_json_strings_and_length_prefixed_bytes(api):
    texts = ["claim your free prize", "see you at noon"]
    model = api.board.models()["spam"]
    expected = model.pipeline.predict_proba(texts)
    _, answer = call(api, "POST", "/v2/models/spam/infer", infer_body("text", "BYTES", texts))
    assert np.array(answer["outputs"][1]["data"]).reshape(2, 2) == pytest.approx(expected, rel=1e-12)
    assert answer["outputs"][0]["data"] == ["spam", "ham"]
    raw = b"".join(struct.pack("<I", len(t.encode())) + t.encode() for t in texts)
    head = (b'{"inputs":[{"name":"text","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":%d}}]}'
            % len(raw))
    _, binary = call(api, "POST", "/v2/models/spam/infer", head + raw,
                     headers={"Inference-Header-Content-Length": str(len(head))})
    assert binary["outputs"] == answer["outputs"]


def test_only_the_outputs_asked_for_are_given(api):
    body = infer_body("pixels", "INT64", _rows(2))
    body["outputs"] = [{"name": "label"}]
    _, answer = call(api, "POST", "/v2/models/digits/infer", body)
    assert [o["name"] for o in answer["outputs"]] == ["label"]


BAD_REQUESTS = [
    ("unknown model", "/v2/models/nope/infer", infer_body("pixels", "INT64", _rows(1)), 404,
     "no model is named 'nope'"),
    ("old version", "/v2/models/digits/versions/0/infer", infer_body("pixels", "INT64", _rows(1)), 404,
     "has no version '0'"),
    ("not JSON", "/v2/models/digits/infer", b"{not json", 400, "not JSON"),
    ("a JSON list", "/v2/models/digits/infer", b"[1, 2]", 400, "must be a JSON object"),
    ("no inputs", "/v2/models/digits/infer", {"inputs": []}, 400, "has no inputs"),
    ("unknown datatype", "/v2/models/digits/infer",
     {"inputs": [{"name": "pixels", "datatype": "FP128", "shape": [1, 16], "data": [0] * 16}]}, 400, "FP128"),
    ("text for numbers", "/v2/models/digits/infer", infer_body("pixels", "BYTES", ["a"]), 400, "must be FP64"),
    ("numbers for text", "/v2/models/spam/infer", infer_body("text", "INT64", [1, 2]), 400, "must be BYTES"),
    ("wrong width", "/v2/models/digits/infer", infer_body("pixels", "INT64", np.zeros((2, 15), int)), 400,
     "shape [N, 16]"),
    ("one dimension", "/v2/models/digits/infer", infer_body("pixels", "INT64", np.zeros(16, int)), 400,
     "shape [N, 16]"),
    ("shape and data disagree", "/v2/models/digits/infer",
     {"inputs": [{"name": "pixels", "datatype": "INT64", "shape": [2, 16], "data": [0] * 16}]}, 400,
     "16 values for a shape of 32"),
    ("negative shape", "/v2/models/digits/infer",
     {"inputs": [{"name": "pixels", "datatype": "INT64", "shape": [-1, 16], "data": [0] * 16}]}, 400, "shape"),
    ("wrong input name", "/v2/models/digits/infer", infer_body("image", "INT64", _rows(1)), 400,
     "'pixels' is missing"),
    ("a string among numbers", "/v2/models/digits/infer",
     {"inputs": [{"name": "pixels", "datatype": "FP64", "shape": [1, 2], "data": [1, "x"]}]}, 400,
     "must be numbers"),
    ("too many rows", "/v2/models/digits/infer", infer_body("pixels", "INT64", np.zeros((51, 16), int)), 413,
     "--http-max-rows"),
    ("unknown output", "/v2/models/digits/infer",
     {**infer_body("pixels", "INT64", _rows(1)), "outputs": [{"name": "logits"}]}, 400, "unknown output 'logits'"),
    ("explain zero", "/v2/models/digits/infer", infer_body("pixels", "INT64", _rows(1), explain=0), 400,
     "\"explain\" must be an integer"),
    ("explain text", "/v2/models/digits/infer", infer_body("pixels", "INT64", _rows(1), explain="5"), 400,
     "\"explain\" must be an integer"),
    ("bad min_position", "/v2/models/digits/infer",
     infer_body("pixels", "INT64", _rows(1), min_position={"sms": 3}), 400, "min_position must map"),
    ("timeout too long", "/v2/models/digits/infer",
     infer_body("pixels", "INT64", _rows(1), timeout_ms=10**9), 400, "timeout_ms"),
]


@pytest.mark.parametrize("path, body, status, words", [case[1:] for case in BAD_REQUESTS],
                         ids=[case[0] for case in BAD_REQUESTS])
def test_a_request_that_cannot_be_answered_gets_one_error_line(api, path, body, status, words):
    got, answer = call(api, "POST", path, body)
    assert got == status, answer
    assert list(answer) == ["error"] and "\n" not in answer["error"]
    if words is not None:
        assert words in answer["error"]


def test_non_finite_values_are_refused_naming_the_row(api):
    X = _rows(3).astype(np.float64)
    X[1, 4] = np.nan
    head = (b'{"inputs":[{"name":"pixels","datatype":"FP64","shape":[3,16],"parameters":{"binary_data_size":%d}}]}'
            % X.nbytes)
    status, answer = call(api, "POST", "/v2/models/digits/infer", head + X.tobytes(),
                          headers={"Inference-Header-Content-Length": str(len(head))})
    assert status == 400 and "row 1" in answer["error"] and "NaN" in answer["error"]


def test_negative_counts_are_refused_by_a_model_of_counts():
    with running_api(published(vector_model(kind="multinomial"))) as server:
        status, answer = call(server, "POST", "/v2/models/digits/infer", infer_body("pixels", "INT64", -_rows(2) - 1))
        assert status == 400 and "row 0" in answer["error"] and "negative value" in answer["error"]


def _bytes_header(rows: int, size: int) -> bytes:
    """The JSON part of a request of one BYTES input 'text' sent in the binary extension."""
    return b'{"inputs":[{"name":"text","datatype":"BYTES","shape":[%d],"parameters":{"binary_data_size":%d}}]}' % (
        rows, size)


def test_invalid_utf8_is_refused_naming_the_row(api):
    raw = struct.pack("<I", 2) + b"ok" + struct.pack("<I", 3) + b"\xff\xfe\xfd"
    head = _bytes_header(2, len(raw))
    status, answer = call(api, "POST", "/v2/models/spam/infer", head + raw,
                          headers={"Inference-Header-Content-Length": str(len(head))})
    assert status == 400 and "row 1" in answer["error"] and "UTF-8" in answer["error"]


@pytest.mark.parametrize("raw, words", [(struct.pack("<I", 99) + b"ab", "runs past"), (b"\x01", "ends before"),
                                        (struct.pack("<I", 1) + b"a" + b"zz", "follow its")])
def test_malformed_binary_bytes_are_refused(api, raw, words):
    head = _bytes_header(1, len(raw))
    status, answer = call(api, "POST", "/v2/models/spam/infer", head + raw,
                          headers={"Inference-Header-Content-Length": str(len(head))})
    assert status == 400 and words in answer["error"]


def test_a_body_over_the_limit_is_refused_before_it_is_read_whole(api):
    status, answer = call(api, "POST", "/v2/models/digits/infer", b" " * (65 << 10))
    assert status == 413 and "--http-max-bytes" in answer["error"]


def test_unknown_endpoints_and_methods_answer_json(api):
    assert call(api, "GET", "/v3")[0] == 404
    status, answer = call(api, "GET", "/v2/models/digits/infer")
    assert status == 405 and "error" in answer


def test_a_model_that_learned_nothing_is_not_ready():
    import nbstream
    from nbstream.arrow import FeatureSpec, Pipeline
    from worker.inference.answering import AnsweringModel

    empty = AnsweringModel("empty", Pipeline(nbstream.MultinomialNB(), FeatureSpec.vector("pixels").encoder()), "0")
    with running_api(published(empty)) as server:
        assert call(server, "GET", "/v2/health/ready")[0] == 503
        assert call(server, "GET", "/v2/models/empty/ready") == (503, {"name": "empty", "ready": False})
        status, answer = call(server, "POST", "/v2/models/empty/infer", infer_body("pixels", "INT64", _rows(1)))
        assert status == 503 and "learned nothing" in answer["error"]


def test_min_position_waits_for_a_state_that_includes_it():
    board = published(vector_model(position={"sms:0": 10}))
    with running_api(board) as server:
        body = infer_body("pixels", "INT64", _rows(1), min_position={"sms:0": 10})
        status, answer = call(server, "POST", "/v2/models/digits/infer", body)
        assert status == 200 and answer["parameters"]["position"] == {"sms:0": 10}
        threading.Timer(0.3, lambda: board.publish({"digits": vector_model(version="2", position={"sms:0": 12})},
                                                   "digits")).start()
        started = time.monotonic()
        body = infer_body("pixels", "INT64", _rows(1), min_position={"sms:0": 12}, timeout_ms=5000)
        status, answer = call(server, "POST", "/v2/models/digits/infer", body)
        assert status == 200 and answer["parameters"] == {"position": {"sms:0": 12}, "model_version": "2"}
        assert 0.25 < time.monotonic() - started < 4
        body = infer_body("pixels", "INT64", _rows(1), min_position={"sms:0": 13, "sms:1": 1}, timeout_ms=200)
        status, answer = call(server, "POST", "/v2/models/digits/infer", body)
        assert status == 503 and "within 200 ms" in answer["error"] and "{'sms:0': 12, 'sms:1': 0}" in answer["error"]


def test_a_waiting_request_does_not_hold_up_the_others():
    board = published(vector_model(position={"sms:0": 1}))
    with running_api(board) as server:
        waiting = threading.Thread(target=call, args=(server, "POST", "/v2/models/digits/infer", infer_body(
            "pixels", "INT64", _rows(1), min_position={"sms:0": 5}, timeout_ms=3000)))
        waiting.start()
        time.sleep(0.1)
        started = time.monotonic()
        assert call(server, "POST", "/v2/models/digits/infer", infer_body("pixels", "INT64", _rows(1)))[0] == 200
        assert time.monotonic() - started < 1.0
        waiting.join()


def test_a_token_is_required_where_one_is_set(tmp_path, caplog):
    secret = "tok-5f2e9a1c0d"
    token_file = tmp_path / "token"
    token_file.write_text(secret + "\n")
    with running_api(published(vector_model()), http_token_file=token_file) as server:
        body = infer_body("pixels", "INT64", _rows(1))
        assert call(server, "POST", "/v2/models/digits/infer", body)[0] == 401
        assert call(server, "GET", "/v2/models/digits", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert call(server, "GET", "/v2/models/digits", headers={"Authorization": f"Basic {secret}"})[0] == 401
        assert call(server, "POST", "/v2/models/digits/infer", body,
                    headers={"Authorization": f"Bearer {secret}"})[0] == 200
        assert call(server, "GET", "/v2/health/ready")[0] == 200  # probes carry no token
    assert secret not in caplog.text


@pytest.mark.parametrize("content, words", [("", "empty"), ("two words", "spaces")])
def test_a_token_file_without_one_token_is_refused(tmp_path, content, words):
    token_file = tmp_path / "token"
    token_file.write_text(content)
    with pytest.raises(ConfigError, match=words):
        InferenceServer(InferenceApiConfig(http_port=0, http_token_file=token_file), published(vector_model()))


def test_https_is_served_with_a_certificate(tmp_path):
    import ssl
    import subprocess

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    context = ssl.create_default_context(cafile=str(cert))
    with running_api(published(vector_model()), http_tls_cert=cert, http_tls_key=key) as server:
        assert server.url.startswith("https://")
        assert call(server, "GET", "/v2/health/live", context=context)[0] == 200
    with pytest.raises(ConfigError, match="not a usable certificate"):
        InferenceServer(InferenceApiConfig(http_port=0, http_tls_cert=key, http_tls_key=key), published())


@pytest.mark.parametrize("settings, words", [({"http_tls_cert": "c.pem"}, "go together"),
                                             ({"http_port": None, "http_token_file": "t"}, "needs --http-port")])
def test_settings_that_contradict_are_refused(settings, words):
    with pytest.raises(ConfigError, match=words):
        InferenceApiConfig(**{"http_port": 1, **settings})


def test_a_port_in_use_is_one_error_line():
    with running_api(published()) as server:
        with pytest.raises(ConfigError, match=f"--http-port {server.port}: cannot listen there"):
            InferenceServer(InferenceApiConfig(http_port=server.port), published())


def test_a_slow_body_is_cut_off():
    with running_api(published(vector_model()), http_request_timeout=0.5) as server:
        connection = socket.create_connection(("127.0.0.1", server.port))
        connection.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        connection.settimeout(5)
        started = time.monotonic()
        answer = b""
        while b"}" not in answer and (piece := connection.recv(4096)):
            answer += piece
        connection.close()
        assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 0.5 s" in answer
        assert time.monotonic() - started < 3


def test_a_request_when_the_cap_of_connections_is_open_is_answered_503():
    with running_api(published(vector_model()), http_max_connections=3, http_request_timeout=5) as server:
        held = []
        for _ in range(2):  # two clients that send half a request and wait
            connection = socket.create_connection(("127.0.0.1", server.port))
            connection.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
            held.append(connection)
            time.sleep(0.1)
        status, answer = call(server, "GET", "/v2/health/live", timeout=5)  # the third connection open
        assert status == 503
        for connection in held:
            connection.close()
        time.sleep(0.2)
        assert call(server, "GET", "/v2/health/live")[0] == 200


def test_explanations_name_the_rows_words_and_add_up_to_the_log_odds(api):
    texts = ["claim your free prize now", "see you at noon"]
    status, answer = call(api, "POST", "/v2/models/spam/infer", infer_body("text", "BYTES", texts, explain=2))
    assert status == 200, answer
    outputs = {o["name"]: o for o in answer["outputs"]}
    assert outputs["explanation"]["shape"] == [2]
    rows = [json.loads(row) for row in outputs["explanation"]["data"]]
    assert [row["class"] for row in rows] == outputs["label"]["data"]
    assert set(rows[0]) == {"class", "runner_up", "log_odds", "prior", "features"}
    for row, text in zip(rows, texts, strict=True):
        assert 1 <= len(row["features"]) <= 2
        assert all(set(f["feature"].split("|")) <= set(text.split()) for f in row["features"])
    proba = np.reshape(outputs["probabilities"]["data"], (2, 2))
    classes = outputs["probabilities"]["parameters"]["classes"]
    for row, p in zip(rows, proba, strict=True):  # log-odds are those of the probabilities
        odds = p[classes.index(row["class"])] / p[classes.index(row["runner_up"])]
        assert row["log_odds"] == pytest.approx(np.log(odds))
    full = api.board.models()["spam"].pipeline.explain(texts, top=None)
    for row in full:
        total = row["prior"] + sum(f["contribution"] for f in row["features"])
        assert total == pytest.approx(row["log_odds"], rel=1e-9)


def test_explanations_of_a_list_column_name_its_elements(api):
    body = infer_body("pixels", "INT64", _rows(3), explain=4)
    _, answer = call(api, "POST", "/v2/models/digits/infer", body)
    rows = [json.loads(row) for row in answer["outputs"][-1]["data"]]
    assert all(len(row["features"]) == 4 and all(f["feature"].startswith("pixels[") for f in row["features"])
               for row in rows)


def test_headers_trickled_past_the_deadline_lose_their_connection():
    import select

    with running_api(published(vector_model()), http_request_timeout=0.5) as server:
        connection = socket.create_connection(("127.0.0.1", server.port))
        started = time.monotonic()
        connection.sendall(b"GET /v2 HTTP/1.1\r\nHost: x\r\n")
        closed_after = None
        while time.monotonic() - started < 4 and closed_after is None:
            try:
                connection.sendall(b"X-Slow: 1\r\n")  # a header every 0.1 s: never done
            except OSError:
                closed_after = time.monotonic() - started
            if select.select([connection], [], [], 0.1)[0] and connection.recv(1024) == b"":
                closed_after = time.monotonic() - started
        connection.close()
        assert closed_after is not None and 0.4 < closed_after < 2


def test_a_request_of_no_rows_gets_empty_outputs(api):
    status, answer = call(api, "POST", "/v2/models/digits/infer",
                          {"inputs": [{"name": "pixels", "datatype": "FP64", "shape": [0, 16], "data": []}],
                           "parameters": {"explain": 2}})
    assert status == 200, answer
    assert [(o["name"], o["shape"], list(o["data"])) for o in answer["outputs"]] == [
        ("label", [0], []), ("probabilities", [0, 3], []), ("explanation", [0], [])]


def test_a_request_after_refused_ones_is_read_as_well():
    from worker.inference.tensors import read_request

    good = json.dumps(infer_body("pixels", "INT64", _rows(2))).encode()
    bad = json.dumps({"inputs": [{"name": "pixels", "datatype": "INT64", "shape": [1, 2],
                                  "data": [1, "x"]}]}).encode()
    refusals = []
    for _ in range(3):
        try:
            read_request(bad, None, 10)
        except Exception as error:  # noqa: BLE001 - kept alive on purpose, with its traceback
            refusals.append(error)
    assert read_request(good, None, 10).inputs["pixels"].shape == (2, 16)


def test_headers_over_16_kib_are_answered_431_and_closed(api):
    status, answer = call(api, "GET", "/v2", headers={"X-Big": "a" * (20 << 10)})
    assert status == 431 and "headers are over 16 KiB" in answer["error"]
    status, _ = call(api, "GET", "/v2", headers={"X-Fine": "a" * (8 << 10)})
    assert status == 200
    X = _rows(100).astype(np.float64)  # a large body in the first packets is no header
    status, _ = call(api, "POST", "/v2/models/digits/infer", infer_body("pixels", "FP64", X[:50]))
    assert status == 200


def test_headers_that_never_end_are_cut_at_16_kib(api):
    connection = socket.create_connection(("127.0.0.1", api.port))
    connection.settimeout(5)
    connection.sendall(b"GET /v2 HTTP/1.1\r\nHost: x\r\nX-Endless: ")
    answer, cut = b"", False
    try:
        for _ in range(1000):  # up to 1 MiB of one header's value, never finished
            connection.sendall(b"a" * 1024)
    except OSError:
        cut = True  # the server closed the connection while the client still sent
    try:
        while piece := connection.recv(4096):
            answer += piece
        cut = True
    except ConnectionResetError:  # (the answer may be lost to the reset of a client that kept sending)
        cut = True
    connection.close()
    assert cut and (answer == b"" or answer.startswith(b"HTTP/1.1 431"))


def test_explaining_more_than_the_bound_is_refused():
    with running_api(published(vector_model())) as server:
        body = infer_body("pixels", "INT64", _rows(150), explain=1000)
        status, answer = call(server, "POST", "/v2/models/digits/infer", body)
        assert status == 413 and "over 100,000 features" in answer["error"]


@pytest.mark.parametrize("position, words", [({"sms:x": 1}, "min_position must map"),
                                             ({"other:0": 1}, "names the topic 'other'")])
def test_a_min_position_that_is_no_position_of_the_model_is_refused(position, words):
    with running_api(published(vector_model(position={"sms:0": 3}))) as server:
        status, answer = call(server, "POST", "/v2/models/digits/infer",
                              infer_body("pixels", "INT64", _rows(1), min_position=position, timeout_ms=10_000))
        assert status == 400 and words in answer["error"]


def test_a_model_not_yet_published_is_not_ready_and_the_server_follows_the_served_model():
    from worker.inference.sources import PublishedModels

    board = PublishedModels(["digits", "later"])
    with running_api(board) as server:
        status, answer = call(server, "POST", "/v2/models/later/infer", infer_body("pixels", "INT64", _rows(1)))
        assert status == 503 and "no committed state yet" in answer["error"]
        assert call(server, "GET", "/v2/models/nope")[0] == 404
        assert call(server, "GET", "/v2/health/ready")[0] == 503
        import nbstream
        from nbstream.arrow import FeatureSpec, Pipeline
        from worker.inference.answering import AnsweringModel

        empty = AnsweringModel("later", Pipeline(nbstream.MultinomialNB(), FeatureSpec.vector("pixels").encoder()), "0")
        board.publish({"digits": vector_model(), "later": empty}, "digits")
        assert call(server, "GET", "/v2/health/ready")[0] == 200  # a challenger that learned nothing yet
        assert call(server, "GET", "/v2/models/later/ready")[0] == 503


def test_null_parameters_are_none_given(api):
    body = infer_body("pixels", "INT64", _rows(1))
    body["parameters"] = None
    body["inputs"][0]["parameters"] = None
    assert call(api, "POST", "/v2/models/digits/infer", body)[0] == 200


def test_requests_past_the_cpu_budget_wait_in_line():
    import asyncio

    from worker.inference.budget import CpuBudget

    async def two_at_once() -> float:
        budget = CpuBudget(0.5)
        budget._balance, budget._seen = -0.1, (time.monotonic(), time.thread_time())  # 0.1 s of CPU owed
        started = time.monotonic()
        await asyncio.gather(budget.spend(), budget.spend())
        return time.monotonic() - started

    assert 0.18 < asyncio.run(two_at_once()) < 1.0  # the debt paid once at half a CPU, not by each at the same time
