"""Challenger models on a real broker: the SMS stream served by Bernoulli with a multinomial
challenger and --promote auto; and each bad --challenger alone, refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

import nbstream
from nbstream.arrow import FeatureSpec
from tests.helpers.cli import run_worker
from tests.helpers.kafka import TopicWatcher, json_message, new_topic, read_all, send
from tests.helpers.paths import SMS
from tests.helpers.service import Service, free_port, metric_values, wait_for

PROMOTED = "promoted mnb to serve in place of main"
CHALLENGED = ("--text-features", "--model", "bernoulli", "--challenger", "mnb=model=multinomial", "--promote", "auto",
              "--promote-window", 500, "--max-poll-records", 200, "--json-logs")


def sms(split: str) -> tuple[list[dict], object, np.ndarray]:
    """The rows of an SMS split, their hashed text (as --text hashes it) and their labels."""
    table = pq.read_table(SMS / f"{split}.parquet")
    X = FeatureSpec.text("text").encoder().encode(table.combine_chunks().to_batches()[0], learn=False)[0]
    return table.to_pylist(), X, np.asarray(table.column("label").to_pylist())


def log_lines(service: Service) -> list[dict]:
    return [json.loads(line) for line in service.log.read_text().splitlines() if line.startswith("{")]


def exported(bootstrap, client, service: Service, path, *model_name) -> tuple[nbstream.naive_bayes.NaiveBayes, str]:
    done = run_worker("export", "--bootstrap", bootstrap, "--kafka-client", client, "--input", service.topic,
                      "--group", service.group, "--out", path, *model_name, timeout=120)
    assert done.returncode == 0, done.stderr
    return nbstream.load(path), done.stdout


def assert_same_statistics(model, offline) -> None:
    """The same classes, class counts and (class, feature) counts, exactly."""
    assert type(model) is type(offline) and model.n_examples_seen_ == offline.n_examples_seen_
    order = np.argsort(model.classes_)
    assert model.classes_[order].tolist() == offline.classes_.tolist()
    np.testing.assert_array_equal(model.class_count_[order], offline.class_count_)
    difference = model.feature_count_[order] - offline.feature_count_
    assert difference.shape == offline.feature_count_.shape and not abs(difference).sum()


def test_sms_a_multinomial_challenger_is_promoted_exports_exactly_and_still_serves_after_kill_9(
        kafka_bootstrap, kafka_client, tmp_path):
    rows, X, labels = sms("train")
    topic = new_topic(kafka_bootstrap, "challengers-sms")
    send(kafka_bootstrap, topic, [json_message(text=r["text"], label=r["label"], id=r["id"]) for r in rows])
    port = free_port()
    service = Service(kafka_bootstrap, topic, tmp_path, *CHALLENGED, "--metrics-port", port,
                      client=kafka_client).start()
    watcher = TopicWatcher(kafka_bootstrap, service.output)
    assert watcher.wait_until(lambda records: len(records) >= len(rows), timeout=180), service.log_tail()
    predictions = sorted((json.loads(r.value) for r in watcher.records), key=lambda p: p["offset"])
    watcher.close()

    # one promotion, its figures, and the model each message was served by
    promoted = [line for line in log_lines(service) if line["message"].startswith(PROMOTED)]
    assert len(promoted) == 1, service.log_tail()
    figures = promoted[0]
    switch = figures["next_offsets"]["0"]
    assert figures["window"] == 500 and figures["challenger_log_loss"] <= 0.95 * figures["served_log_loss"]
    assert 500 < switch < len(rows)
    assert [p["model"] for p in predictions] == ["main"] * switch + ["mnb"] * (len(rows) - switch)
    assert wait_for(lambda: metric_values(port).get(
        'nbstream_promotions_total{from_model="main",to_model="mnb"}') == 1.0, timeout=30)
    metrics = metric_values(port)
    assert metrics['nbstream_model_info{model="mnb",role="served",settings="MultinomialNB()"}'] == 1.0
    for model in ("main", "mnb"):
        assert f'nbstream_prequential_log_loss{{model="{model}",window="all"}}' in metrics

    # each model's export is an offline fit of the same rows
    for name, offline in (("main", nbstream.BernoulliNB()), ("mnb", nbstream.MultinomialNB())):
        model, line = exported(kafka_bootstrap, kafka_client, service, tmp_path / f"{name}.nbs", "--model-name", name)
        assert_same_statistics(model, offline.partial_fit(X, labels))
        assert f"exported 4,459 examples of model {name}" in line
    served, _ = exported(kafka_bootstrap, kafka_client, service, tmp_path / "served.nbs")
    assert isinstance(served, nbstream.MultinomialNB)  # by default, the model the group serves
    inspected = run_worker("inspect", tmp_path / "served.nbs")
    assert "models:         mnb MultinomialNB() (served), main BernoulliNB()" in inspected.stdout, inspected.stdout

    # kill -9, more messages, a restart: still served by the promoted model
    service.kill()
    more, _, _ = sms("test")
    send(kafka_bootstrap, topic, [json_message(text=r["text"], label=r["label"], id=r["id"]) for r in more[:300]],
         first_key=len(rows))
    service.start()
    after = read_all(kafka_bootstrap, service.output, expected=len(rows) + 300, timeout=180, committed_only=True)
    assert service.terminate() == 0, service.log_tail()
    late = [json.loads(r.value) for r in after if json.loads(r.value)["offset"] >= len(rows)]
    assert len(late) == 300 and {p["model"] for p in late} == {"mnb"}
    assert any(line["message"] == "serving the model the group chose" and line["model"] == "mnb"
               for line in log_lines(service))


def test_a_model_whose_settings_changed_under_its_name_ends_the_service_in_one_line(kafka_bootstrap, tmp_path):
    topic = new_topic(kafka_bootstrap, "challengers-changed")
    send(kafka_bootstrap, topic, [json_message(text="free prize now", label="spam", id=1),
                                  json_message(text="lunch at noon", label="ham", id=2)])
    service = Service(kafka_bootstrap, topic, tmp_path, "--text-features", "--challenger",
                      "cnb=model=complement").start()
    assert len(read_all(kafka_bootstrap, service.output, expected=2, timeout=90)) == 2
    assert service.terminate() == 0, service.log_tail()
    again = Service(kafka_bootstrap, topic, tmp_path / "again", "--text-features", "--challenger",
                    "cnb=model=complement,alpha=0.5", group=service.group).start()
    assert again.process.wait(timeout=120) == 2
    errors = [line for line in again.log.read_text().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "holds the model cnb as ComplementNB(); this service is configured for " \
        "ComplementNB(alpha=0.5) under that name" in errors[0], again.log_tail()


@pytest.mark.parametrize("challenger, expected", [
    ("cnb", "--challenger takes NAME=SPEC, such as cnb=model=complement,alpha=0.5; got 'cnb'."),
    ("c b=model=complement", "--challenger: a model's name is a letter or digit"),
    ("cnb=model=complment", "--challenger cnb: unknown model 'complment' (did you mean complement?)"),
    ("cnb=alpah=1", "--challenger cnb: 'alpah' is no model setting (did you mean alpha?)"),
    ("cnb=alpha=-1", "--challenger cnb: alpha must be a finite number >= 0, or one per feature; got -1.0."),
    ("cnb=half_life=-5", "--challenger cnb: half_life must be None or a finite number > 0; got -5.0."),
    ("cnb=half-life=0", "--challenger cnb: half-life must be None or a finite number > 0; got 0.0."),
    ("cnb=alpha=much", "--challenger cnb: alpha must be a finite number; got 'much'."),
    ("cnb=alpha=1,alpha=2", "--challenger cnb: alpha is given twice."),
    ("cnb=window=5000,half_life=100", "--challenger cnb: half_life and window cannot be used together"),
    ("cnb=model=multinomial,binarize=0.5", "--challenger cnb: the multinomial model takes no binarize."),
    ("cnb=model=gaussian", "--challenger cnb: --text-features needs a bernoulli, multinomial or complement model"),
    ("cnb=norm=maybe", "--challenger cnb: norm must be true or false; got 'maybe'."),
    ("main=model=complement", "the model name 'main' is given twice"),
])
def test_a_bad_challenger_alone_is_one_line_with_exit_status_2(challenger, expected):
    done = run_worker("serve", "--bootstrap", "127.0.0.1:9", "--input", "t", "--output", "t.out", "--group", "g",
                      "--text-features", "--challenger", challenger, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"ERROR worker.serve: {expected}" in lines[0], lines[0]


def test_more_than_eight_challengers_are_refused_in_one_line():
    many = [option for i in range(9) for option in ("--challenger", f"c{i}=alpha={i + 1}")]
    done = run_worker("serve", "--bootstrap", "127.0.0.1:9", "--input", "t", "--output", "t.out", "--group", "g",
                      "--text-features", *many, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "--challenger is given 9 times; 8 at most" in done.stderr
