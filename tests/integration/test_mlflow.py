"""nbstream.mlflow and `worker train/evaluate --mlflow`, against a real MLflow tracking server."""

from __future__ import annotations

import json
import uuid

import mlflow.pyfunc
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from mlflow import MlflowClient
from sklearn.metrics import accuracy_score, f1_score, log_loss

import nbstream
import nbstream.mlflow
from nbstream.arrow import load_pipeline
from tests.helpers.cli import invoke
from tests.helpers.paths import SMS
from tests.helpers.service import free_port


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def tracking(mlflow_tracking_uri, monkeypatch) -> str:
    """The session's server, named by MLFLOW_TRACKING_URI as a user names it."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_tracking_uri)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    return mlflow_tracking_uri


@pytest.fixture(scope="module")
def sms_snapshot(tmp_path_factory):
    out = tmp_path_factory.mktemp("mlflow-sms") / "sms.nbs"
    result = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--hash-bits", "14",
                    "--out", out)
    assert result.exit_code == 0, result.output
    return out


def _gaussian_frame(rng) -> tuple[nbstream.GaussianNB, pd.DataFrame]:
    frame = pd.DataFrame(rng.normal(size=(60, 3)), columns=["height", "weight", "age"])
    labels = np.where(frame["height"] + rng.normal(size=60) > 0, "tall", "short")
    return nbstream.GaussianNB().fit(frame, labels), frame


def test_save_model_keeps_the_snapshot_and_no_pickle(tmp_path, rng):
    model, frame = _gaussian_frame(rng)

    nbstream.mlflow.save_model(model, tmp_path / "model", input_example=frame.head(3))

    files = sorted(p.relative_to(tmp_path / "model").as_posix() for p in (tmp_path / "model").rglob("*") if p.is_file())
    assert "data/model.nbs" in files and not [f for f in files if f.endswith((".pkl", ".pickle", ".cloudpickle"))]
    assert (tmp_path / "model" / "data" / "model.nbs").read_bytes().startswith(b"NBSNAP")
    flavors = yaml.safe_load((tmp_path / "model" / "MLmodel").read_text())["flavors"]
    assert flavors["nbstream"] == {"nbstream_version": nbstream.__version__, "snapshot": "data/model.nbs",
                                   "kind": "gaussian", "pipeline": False}
    assert flavors["python_function"]["loader_module"] == "nbstream.mlflow"
    signature = yaml.safe_load((tmp_path / "model" / "MLmodel").read_text())["signature"]
    assert [column["name"] for column in json.loads(signature["inputs"])] == ["height", "weight", "age"]
    loaded = nbstream.mlflow.load_model(str(tmp_path / "model"))
    np.testing.assert_array_equal(loaded.predict_proba(frame), model.predict_proba(frame))


def test_load_model_refuses_a_model_of_another_flavor(tmp_path):
    import mlflow.sklearn  # noqa: F401 - the flavor writes no pickle of ours: skops is its default format
    from sklearn.naive_bayes import GaussianNB

    model = nbstream.GaussianNB().fit([[0.0], [1.0]], [0, 1])
    nbstream.mlflow.save_model(model, tmp_path / "ours")
    (tmp_path / "ours" / "MLmodel").write_text((tmp_path / "ours" / "MLmodel").read_text()
                                               .replace("  nbstream:", "  other:"))
    with pytest.raises(ValueError, match="is not an nbstream model: its flavors are \\['other', 'python_function'\\]"):
        nbstream.mlflow.load_model(str(tmp_path / "ours"))
    assert GaussianNB  # scikit-learn's own flavor stays scikit-learn's


def test_a_registered_model_predicts_through_pyfunc_as_nbstream(tracking, rng):
    model, frame = _gaussian_frame(rng)
    name = unique("gaussian")

    info = nbstream.mlflow.log_model(model, input_example=frame.head(3), registered_model_name=name)

    assert str(info.registered_model_version) == "1"
    served = mlflow.pyfunc.load_model(f"models:/{name}/1")
    assert served.predict(frame).tolist() == model.predict(frame).tolist()
    loaded = nbstream.mlflow.load_model(f"models:/{name}/1")
    assert isinstance(loaded, nbstream.GaussianNB)
    np.testing.assert_array_equal(loaded.predict_proba(frame), model.predict_proba(frame))
    loaded.partial_fit(frame.head(5), model.predict(frame.head(5)))  # it keeps learning
    assert loaded.n_examples_seen_ == model.n_examples_seen_ + 5


def test_a_text_pipeline_predicts_through_pyfunc_from_a_data_frame(tracking, sms_snapshot):
    pipeline = load_pipeline(sms_snapshot)
    texts = pq.read_table(SMS / "test.parquet").column("text").to_pylist()[:400]

    info = nbstream.mlflow.log_model(pipeline, input_example=pd.DataFrame({"text": texts[:3]}))

    served = mlflow.pyfunc.load_model(info.model_uri)
    assert served.predict(pd.DataFrame({"text": texts})).tolist() == pipeline.predict(texts).tolist()
    assert [column["name"] for column in served.metadata.get_input_schema().to_dict()] == ["text"]
    assert served.metadata.flavors["nbstream"]["pipeline"] is True


def test_train_and_evaluate_log_their_run_and_register_the_model(tracking, tmp_path):
    name = unique("sms")
    train = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--hash-bits", "14",
                   "--out", tmp_path / "sms.nbs", "--mlflow", "--register", name)
    assert train.exit_code == 0, train.output
    run_line = next(line for line in train.output.splitlines() if line.startswith("mlflow run: "))
    run_id = run_line.split()[2]
    assert f"registered model: {name} version 1" in train.output
    assert "View run" not in train.output  # MLflow's own lines (which may show the URI) are kept quiet

    client = MlflowClient(tracking)
    run = client.get_run(run_id)
    assert run.data.params["model"] == "multinomial" and run.data.params["model.alpha"] == "1.0"
    assert run.data.params["label"] == "label" and run.data.params["train.data"] == str(SMS / "train.parquet")
    assert run.data.params["features"].startswith("text column 'text'")
    assert run.data.metrics["rows_learned"] == 4459 and run.data.metrics["rows_rejected"] == 0
    assert client.get_model_version(name, "1").run_id == run_id

    evaluate = invoke("evaluate", tmp_path / "sms.nbs", SMS / "test.parquet", "--json", "--mlflow",
                      env={"MLFLOW_RUN_ID": run_id})  # adds to train's run
    assert evaluate.exit_code == 0, evaluate.output
    report = json.loads(evaluate.stdout)
    assert report["mlflow"]["run_id"] == run_id
    metrics = client.get_run(run_id).data.metrics
    for metric in ("accuracy", "macro_f1", "log_loss", "brier"):
        assert metrics[metric] == pytest.approx(report[metric], rel=1e-12)
    test = pq.read_table(SMS / "test.parquet")
    truth = test.column("label").to_pylist()
    pipeline = load_pipeline(tmp_path / "sms.nbs")
    texts = test.column("text").to_pylist()
    assert metrics["accuracy"] == pytest.approx(accuracy_score(truth, pipeline.predict(texts)), rel=1e-12)
    assert metrics["macro_f1"] == pytest.approx(f1_score(truth, pipeline.predict(texts), average="macro"), rel=1e-9)
    assert metrics["log_loss"] == pytest.approx(log_loss(truth, pipeline.predict_proba(texts),
                                                         labels=pipeline.classes_), rel=1e-6)
    assert metrics["rows_evaluated"] == test.num_rows
    served = mlflow.pyfunc.load_model(f"models:/{name}/1")
    assert served.predict(pd.DataFrame({"text": texts[:200]})).tolist() == pipeline.predict(texts[:200]).tolist()


def test_a_tracking_server_that_does_not_answer_is_one_line_before_any_work(tmp_path, monkeypatch):
    # (a password no other test's text holds: the process hides it from every line from now on)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://user:pw-of-the-silent-server@127.0.0.1:{free_port()}")

    result = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--out",
                    tmp_path / "m.nbs", "--mlflow")

    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the MLflow tracking server at http://127.0.0.1:")
    assert "(MLFLOW_TRACKING_URI) does not answer" in lines[0] and "pw-of-the-silent-server" not in lines[0]
    assert not (tmp_path / "m.nbs").exists()


def test_mlflow_without_a_tracking_uri_is_one_line(sms_snapshot, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)

    result = invoke("evaluate", sms_snapshot, SMS / "test.parquet", "--mlflow")

    assert result.exit_code == 2
    assert result.output.strip() == ("error: --mlflow logs to the MLflow tracking server MLFLOW_TRACKING_URI names: "
                                     "set it (http://HOST:PORT of an mlflow server).")


def test_register_without_mlflow_is_one_line(sms_snapshot):
    result = invoke("evaluate", sms_snapshot, SMS / "test.parquet", "--register", "spam")

    assert result.exit_code == 2
    assert result.output.strip() == "error: --register names the model --mlflow logs: add --mlflow."
