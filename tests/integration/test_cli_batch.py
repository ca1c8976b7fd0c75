"""`worker train / predict / evaluate / merge` through Typer's CliRunner and a real subprocess."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import nbstream
from tests.helpers.arrays import dense
from tests.helpers.cli import invoke, run_worker
from tests.helpers.paths import SMS
from worker.snapshot_meta import read_snapshot


def test_sms_train_and_evaluate_on_the_shipped_data(tmp_path):
    out = tmp_path / "sms.nbs"
    result = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--out", out)
    assert result.exit_code == 0, result.output
    assert "learned 4,459 rows" in result.output
    result = invoke("evaluate", out, SMS / "test.parquet", "--json")
    report = json.loads(result.output)
    assert report["rows"] == 1_115
    assert report["accuracy"] > 0.95
    assert report["labels"] == ["ham", "spam"]
    assert sum(map(sum, report["confusion_matrix"])) == 1_115
    spam = next(c for c in report["classes"] if c["label"] == "spam")
    assert spam["support"] == 146 and spam["precision"] > 0.9


def test_predict_writes_one_row_per_input_row_with_ids_and_probabilities(tmp_path):
    out = tmp_path / "sms.nbs"
    invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--model", "complement",
           "--out", out)
    predictions = tmp_path / "predictions.parquet"
    result = invoke("predict", out, SMS / "test.parquet", "--out", predictions, "--proba", "--id", "id")
    assert result.exit_code == 0, result.output
    table = pq.read_table(predictions)
    source = pq.read_table(SMS / "test.parquet")
    assert table.column_names == ["id", "prediction", "proba_ham", "proba_spam"]
    assert table.column("id").to_pylist() == source.column("id").to_pylist()
    total = np.add(table.column("proba_ham").to_numpy(), table.column("proba_spam").to_numpy())
    np.testing.assert_allclose(total, 1.0)
    model = nbstream.load(out)
    from nbstream.arrow import FeatureEncoder
    from nbstream.persistence.snapshot import read_header
    encoder = FeatureEncoder.from_json(read_header(out)["meta"]["features"])
    X, _ = encoder.encode(source.to_batches()[0], learn=False)
    assert table.column("prediction").to_pylist() == model.predict(X).tolist()


def test_every_option_reads_its_environment_variable(tmp_path):
    env = {"NBSTREAM_LABEL": "label", "NBSTREAM_TEXT": "text", "NBSTREAM_MODEL": "bernoulli",
           "NBSTREAM_ALPHA": "0.5", "NBSTREAM_OUT": str(tmp_path / "env.nbs")}
    result = invoke("train", SMS / "train.parquet", env=env)
    assert result.exit_code == 0, result.output
    model = nbstream.load(tmp_path / "env.nbs")
    assert isinstance(model, nbstream.BernoulliNB) and model.alpha == 0.5


def test_environment_variables_form_one_scheme_documented_in_one_table():
    from scripts import env_table
    variables = env_table.environment_variables()
    assert all(variable for variable, _ in variables), [option for variable, option in variables if not variable]
    names = [variable for variable, _ in variables]
    assert len(names) == len(set(names)), "one variable, one meaning"
    for (variable, option), commands in variables.items():
        assert variable in (f"NBSTREAM_{option[2:].upper().replace('-', '_')}",
                            *(f"NBSTREAM_{c.upper()}_{option[2:].upper().replace('-', '_')}" for c in commands))
    page = env_table.PAGE.read_text()
    assert env_table.table_on_page(page) == env_table.table(variables), \
        "docs/environment.md is out of date: run python scripts/env_table.py --write"


def test_predict_and_evaluate_read_their_variables(tmp_path):
    train = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--out", tmp_path / "m.nbs")
    assert train.exit_code == 0, train.output
    result = invoke("predict", tmp_path / "m.nbs", SMS / "test.parquet",
                    env={"NBSTREAM_OUT": str(tmp_path / "p.parquet")})
    assert result.exit_code == 0 and (tmp_path / "p.parquet").exists(), result.output
    result = invoke("evaluate", tmp_path / "m.nbs", SMS / "test.parquet", env={"NBSTREAM_JSON": "1"})
    assert result.exit_code == 0 and '"accuracy"' in result.output, result.output


def test_a_real_subprocess_end_to_end(tmp_path):
    out = tmp_path / "sub.nbs"
    train = run_worker("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--ngrams", "2",
                       "--out", out, timeout=120)
    assert train.returncode == 0, train.stderr
    evaluate = run_worker("evaluate", out, SMS / "test.parquet", "--json", timeout=120)
    assert evaluate.returncode == 0, evaluate.stderr
    assert json.loads(evaluate.stdout)["accuracy"] > 0.95


def test_mnist_through_the_cli_scores_0_8427(tmp_path, mnist_parquet):
    out = tmp_path / "mnist.nbs"
    result = invoke("train", mnist_parquet["train"], "--label", "label", "--features", "pixels",
                    "--model", "bernoulli", "--binarize", "127.5", "--out", out)
    assert result.exit_code == 0, result.output
    report = json.loads(invoke("evaluate", out, mnist_parquet["test"], "--json").output)
    assert report["accuracy"] == pytest.approx(0.8427, abs=5e-5)


def shards(tmp_path, table, n):
    paths = []
    for i, start in enumerate(range(0, table.num_rows, -(-table.num_rows // n))):
        paths.append(tmp_path / f"part-{i}.parquet")
        pq.write_table(table.slice(start, -(-table.num_rows // n)), paths[-1], row_group_size=500)
    return paths


def test_merging_shard_models_equals_training_on_everything(tmp_path):
    table = pq.read_table(SMS / "train.parquet")
    parts = shards(tmp_path, table, 3)
    snapshots = []
    for i, part in enumerate(parts):
        snapshots.append(tmp_path / f"shard-{i}.nbs")
        assert invoke("train", part, "--label", "label", "--text", "text", "--out", snapshots[-1]).exit_code == 0
    assert invoke("merge", *snapshots, "--out", tmp_path / "merged.nbs").exit_code == 0
    assert invoke("train", *parts, "--label", "label", "--text", "text", "--out", tmp_path / "all.nbs").exit_code == 0
    merged, whole = nbstream.load(tmp_path / "merged.nbs"), nbstream.load(tmp_path / "all.nbs")
    assert merged.classes_.tolist() == whole.classes_.tolist()
    np.testing.assert_array_equal(dense(merged.feature_count_), dense(whole.feature_count_))
    assert merged.n_examples_seen_ == whole.n_examples_seen_ == table.num_rows


def test_merging_categorical_shards_remaps_their_category_codes(tmp_path):
    rng = np.random.default_rng(3)
    colours = rng.choice(["red", "green", "blue", "cyan"], size=600)
    sizes = rng.choice(["S", "M", "L"], size=600)
    label = np.where((colours == "red") | (sizes == "L"), "yes", "no")
    table = pa.table({"colour": colours, "size": sizes, "label": label})
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(table.slice(0, 300), first)
    pq.write_table(table.slice(300).take(np.arange(299, -1, -1)), second)  # other order of first appearance
    for path, out in ((first, "a.nbs"), (second, "b.nbs"), (None, "all.nbs")):
        inputs = [first, second] if path is None else [path]
        result = invoke("train", *inputs, "--label", "label", "--features", "colour,size",
                        "--model", "categorical", "--out", tmp_path / out)
        assert result.exit_code == 0, result.output
    assert invoke("merge", tmp_path / "a.nbs", tmp_path / "b.nbs", "--out", tmp_path / "m.nbs").exit_code == 0
    report_merged = json.loads(invoke("evaluate", tmp_path / "m.nbs", first, second, "--json").output)
    report_whole = json.loads(invoke("evaluate", tmp_path / "all.nbs", first, second, "--json").output)
    assert report_merged["confusion_matrix"] == report_whole["confusion_matrix"]
    assert report_merged["log_loss"] == pytest.approx(report_whole["log_loss"], rel=1e-12)


def test_merging_snapshots_of_the_same_data_warns_that_it_counts_twice(tmp_path):
    first, second = shards(tmp_path, pq.read_table(SMS / "train.parquet"), 2)
    train = ("--label", "label", "--text", "text")
    for inputs, out in (((first,), "a.nbs"), ((first,), "again.nbs"), ((second,), "b.nbs")):
        assert invoke("train", *inputs, *train, "--out", tmp_path / out).exit_code == 0
    disjoint = invoke("merge", tmp_path / "a.nbs", tmp_path / "b.nbs", "--out", tmp_path / "ab.nbs")
    assert disjoint.exit_code == 0 and "warning" not in disjoint.output, disjoint.output
    same = invoke("merge", tmp_path / "a.nbs", tmp_path / "again.nbs", "--out", tmp_path / "twice.nbs")
    assert same.exit_code == 0
    assert f"warning: {tmp_path / 'a.nbs'} and {tmp_path / 'again.nbs'} both learned from {first.resolve()}" \
        in same.output.replace("\n", "")
    # a merge of a merge still knows where its data came from; so does a resumed run
    nested = invoke("merge", tmp_path / "ab.nbs", tmp_path / "again.nbs", "--out", tmp_path / "n.nbs")
    assert f"both learned from {first.resolve()}" in nested.output.replace("\n", "")
    assert invoke("train", second, "--label", "label", "--resume", tmp_path / "a.nbs", "--out",
                  tmp_path / "resumed.nbs").exit_code == 0
    resumed = invoke("merge", tmp_path / "resumed.nbs", tmp_path / "again.nbs", "--out", tmp_path / "r.nbs")
    assert f"both learned from {first.resolve()}" in resumed.output.replace("\n", "")


def test_merge_refuses_different_kinds_and_features(tmp_path):
    for model, out in (("multinomial", "m.nbs"), ("bernoulli", "b.nbs")):
        invoke("train", SMS / "test.parquet", "--label", "label", "--text", "text", "--model", model,
               "--out", tmp_path / out)
    invoke("train", SMS / "test.parquet", "--label", "label", "--text", "text", "--hash-bits", "12",
           "--out", tmp_path / "small.nbs")
    result = invoke("merge", tmp_path / "m.nbs", tmp_path / "b.nbs", "--out", tmp_path / "x.nbs")
    assert result.exit_code == 2 and "(bernoulli) into" in result.output
    result = invoke("merge", tmp_path / "m.nbs", tmp_path / "small.nbs", "--out", tmp_path / "x.nbs")
    assert result.exit_code == 2 and "2^12 features" in result.output and "differ" in result.output


def test_resume_keeps_training_a_snapshot_on_new_data(tmp_path):
    first, second = shards(tmp_path, pq.read_table(SMS / "train.parquet"), 2)
    invoke("train", first, "--label", "label", "--text", "text", "--model", "bernoulli", "--out", tmp_path / "a.nbs")
    result = invoke("train", second, "--label", "label", "--resume", tmp_path / "a.nbs", "--out", tmp_path / "b.nbs")
    assert result.exit_code == 0, result.output
    invoke("train", first, second, "--label", "label", "--text", "text", "--model", "bernoulli",
           "--out", tmp_path / "ab.nbs")
    resumed, whole = nbstream.load(tmp_path / "b.nbs"), nbstream.load(tmp_path / "ab.nbs")
    np.testing.assert_array_equal(dense(resumed.feature_count_), dense(whole.feature_count_))
    result = invoke("train", second, "--label", "label", "--resume", tmp_path / "a.nbs", "--text", "text",
                    "--out", tmp_path / "c.nbs")
    assert result.exit_code == 2 and "takes the features from the snapshot" in result.output


def test_options_a_model_does_not_take_are_refused(tmp_path):
    result = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--model", "multinomial",
                    "--norm", "--out", tmp_path / "x.nbs")
    assert result.exit_code == 2 and "the multinomial model takes no --norm" in result.output


def test_evaluate_prequential_replays_the_rows_test_then_train(tmp_path):
    first, second = shards(tmp_path, pq.read_table(SMS / "train.parquet"), 2)
    out = tmp_path / "a.nbs"
    invoke("train", first, "--label", "label", "--text", "text", "--out", out)
    before = out.read_bytes()
    result = invoke("evaluate", out, second, "--prequential", "--json", "--batch-size", "500")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    model, meta = read_snapshot(out)
    table = pq.read_table(second).combine_chunks().to_batches()[0]
    X, y = meta.features.encode(table, learn=False)[0], np.asarray(table.column("label").to_pylist())
    right = 0
    for i in range(len(y)):
        right += int(model.predict(X[i:i + 1])[0] == y[i])
        model.partial_fit(X[i:i + 1], y[i:i + 1])
    assert report["rows"] == len(y)
    assert report["accuracy"] == pytest.approx(right / len(y), abs=1e-12)
    assert out.read_bytes() == before  # the snapshot is not changed
    plain = json.loads(invoke("evaluate", out, second, "--json").output)
    assert plain["accuracy"] != report["accuracy"]
    refused = invoke("evaluate", out, second, "--prequential", "--engine", "spark")
    assert refused.exit_code == 2 and "--prequential" in refused.output
