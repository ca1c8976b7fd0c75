"""`worker inspect` through Typer's CliRunner."""

from __future__ import annotations

import json

import nbstream
from tests.helpers.cli import invoke


def test_inspect_shows_kind_classes_counts_and_metadata(tmp_path):
    model = nbstream.MultinomialNB(alpha=0.5).partial_fit([[1, 2], [3, 0], [0, 1]], ["spam", "ham", "spam"])
    path = nbstream.save(model, tmp_path / "m.nbs", meta={"source": "sms.parquet"})
    result = invoke("inspect", path)
    assert result.exit_code == 0, result.output
    assert "kind:           multinomial" in result.output
    assert "examples seen:  3" in result.output
    assert "MultinomialNB(alpha=0.5)" in result.output
    assert "classes (open):" in result.output
    assert "spam" in result.output and "ham" in result.output
    assert '{"source": "sms.parquet"}' in result.output


def test_inspect_json_and_corrupt_files(tmp_path):
    path = nbstream.save(nbstream.GaussianNB().fit([[0.0], [1.0]], [0, 1]), tmp_path / "g.nbs")
    result = invoke("inspect", "--json", path)
    assert json.loads(result.output)["kind"] == "gaussian"
    path.write_bytes(path.read_bytes()[:-1])
    result = invoke("inspect", path)
    assert result.exit_code == 2
    assert "checksum mismatch" in result.output


def test_inspect_shows_the_feature_spec_and_source_position(tmp_path):
    from tests.helpers.paths import SMS

    out = tmp_path / "sms.nbs"
    invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--out", out)
    result = invoke("inspect", out)
    assert "features:       text column 'text': word 1-grams hashed into 2^20 features" in result.output
    assert "label column:   label" in result.output
    assert "source:         1 Parquet file(s), complete" in result.output
    assert "examples seen:  4,459" in result.output


def test_a_hashed_text_model_keeps_sparse_counts_and_says_so_and_dense_ones_predict_the_same(tmp_path):
    from tests.helpers.paths import SMS

    outputs = {}
    for counts in ("auto", "dense"):
        model = tmp_path / f"{counts}.nbs"
        assert invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--counts", counts,
                      "--out", model, "--no-progress").exit_code == 0
        outputs[counts] = invoke("inspect", model).output
        predictions = tmp_path / f"{counts}.parquet"
        assert invoke("predict", model, SMS / "test.parquet", "--out", predictions, "--no-progress").exit_code == 0
        outputs[counts + " predictions"] = predictions.read_bytes()
    assert "counts:         sparse, " in outputs["auto"] and "(class, feature) pairs seen" in outputs["auto"]
    assert "counts:" not in outputs["dense"]
    import pyarrow.parquet as pq

    auto, dense = (pq.read_table(tmp_path / f"{c}.parquet") for c in ("auto", "dense"))
    assert auto.column("prediction").to_pylist() == dense.column("prediction").to_pylist()


def test_an_unknown_counts_layout_is_one_line_naming_the_choices(tmp_path):
    from tests.helpers.paths import SMS

    result = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--counts", "bogus",
                    "--out", tmp_path / "m.nbs")
    assert result.exit_code == 2
    assert "counts must be one of auto, dense, sparse; got 'bogus'" in result.output
    assert "Traceback" not in result.output
