"""Secrets never written: lasting ones for the whole run, short-lived ones (tokens) while they are new,
and credentials known by their shape (a URL's password, token=..., an Authorization header)."""

from worker.redaction import (
    LINE_CHARS,
    MASK,
    PASSING_KEPT,
    keep_secret,
    keep_uri_secrets,
    redact,
    shown_line,
    without_userinfo,
)


def test_a_lasting_secret_is_hidden_raw_in_a_repr_and_in_json():
    keep_secret('pa"ss\\wörd-lasting')
    for written in ('pa"ss\\wörd-lasting', repr('pa"ss\\wörd-lasting'), '"pa\\"ss\\\\w\\u00f6rd-lasting"'):
        assert 'pa"ss' not in redact(f"x {written} y") and MASK in redact(f"x {written} y")


def test_only_the_newest_short_lived_secrets_are_kept_and_lasting_ones_stay():
    keep_secret("lasting-secret-one")
    tokens = [f"token-{i:03d}-abcdef" for i in range(PASSING_KEPT + 3)]
    for token in tokens:
        keep_secret(token, passing=True)
    newest = tokens[-PASSING_KEPT:]
    assert all(redact(token) == MASK for token in newest)
    assert all(redact(token) == token for token in tokens[:-PASSING_KEPT])  # long replaced: no longer checked
    assert redact("lasting-secret-one") == MASK


def test_credentials_are_masked_by_their_shape_whoever_wrote_them():
    shaped = {  # what a library's exception or log line may repeat, as it would be shown
        "API request to http://alice:pw-1@127.0.0.1:5000/api/2.0/mlflow/runs/create failed":
            "API request to http://alice:***@127.0.0.1:5000/api/2.0/mlflow/runs/create failed",
        "https://bob:p@ss:w@rd@mlflow.example/base": "https://bob:***@mlflow.example/base",
        "GET /artifact?X-Amz-Signature=0a1b2c&page=2&access_token=tok-9":
            "GET /artifact?X-Amz-Signature=***&page=2&access_token=***",
        "MLFLOW_TRACKING_TOKEN=tok-10 password=hunter2": "MLFLOW_TRACKING_TOKEN=*** password=***",
        "Authorization: Basic YWxpY2U6cHc=": "Authorization: Basic ***",
        "{'Authorization': 'Bearer eyJhbGciOi', 'Accept': 'application/json'}":
            "{'Authorization': 'Bearer ***', 'Accept': 'application/json'}",
        '{"proxy-authorization": "Basic Zm9vOmJhcg=="}': '{"proxy-authorization": "Basic ***"}',
    }
    for text, shown in shaped.items():
        assert redact(text) == shown


def test_text_without_credentials_is_left_as_it_is():
    for text in ("http://127.0.0.1:5000/api?page=2", "ftp://host:21/file", "max_tokens=5 tokenizer=words",
                 "mail alice@example.com at http://host:80", "the authorization failed"):
        assert redact(text) == text


def test_a_shown_line_is_one_short_line_redacted_before_it_is_cut():
    body = "Response body: '" + "x" * 200_000 + "'"
    assert len(shown_line(body)) == LINE_CHARS and shown_line(body).endswith("...")
    assert shown_line("first\n  second\tthird") == "first second third"

    near_the_cut = "y" * (LINE_CHARS - 20) + " http://alice:pw-cut-here-and-beyond@host/"
    assert "pw-" not in shown_line(near_the_cut)  # masked whole, not cut in the middle and left


def test_the_password_of_a_uri_is_kept_secret_as_written_and_decoded():
    keep_uri_secrets("http://carol:p%40ss-uri-secret@host:5000")

    assert redact("p%40ss-uri-secret and p@ss-uri-secret") == f"{MASK} and {MASK}"
    assert without_userinfo("https://carol:p%40ss@mlflow.example:8443/base") == "https://mlflow.example:8443/base"
