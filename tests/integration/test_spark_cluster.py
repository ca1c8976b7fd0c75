"""nbstream on a real Spark cluster and through Spark Connect, as a user with one meets them.

One standalone master and one worker (1 core), and one Spark Connect server (local[1]), started
from the pyspark package for the whole module (scripts/spark_cluster.py). Their executors run a
Python of their own with numpy, pyarrow and scipy and no nbstream, so every task here imports
the nbstream that the driver shipped. The commands run as subprocesses: each is a fresh driver,
as a user's would be, and what it prints is all of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers.cli import invoke, run_worker
from tests.helpers.exactness import assert_exact_pipeline, assert_exact_predictions
from tests.helpers.paths import REPO, SMS, script

pytest.importorskip("pyspark")

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The module's cluster: a master, one 1-core worker and a Spark Connect server."""
    started = script("spark_cluster").Cluster(tmp_path_factory.mktemp("spark-cluster"), workers=1, cores=1,
                                              memory="1g")
    try:
        started.start()
        started.start_connect()
    except Exception as error:  # noqa: BLE001 - any failure to start means no cluster
        started.stop()
        if os.environ.get("CI"):
            pytest.fail(f"no Spark cluster for the tests that need one: {error}")
        pytest.skip(f"no Spark cluster: {error}")
    yield started
    started.stop()


def on_cluster(cluster, *args, python=None):
    """``worker ARGS... --engine spark`` against the standalone master, its executors running
    ``python`` (default: the cluster's own, without nbstream)."""
    return run_worker(*args, "--engine", "spark", "--master", cluster.master_url,
                      "--spark-conf", f"spark.pyspark.python={python or cluster.python}",
                      "--spark-conf", "spark.executor.memory=512m")


def last_line(result) -> str:
    return result.stderr.strip().splitlines()[-1]


def assert_one_clean_line(result, expected_start: str):
    """Exit 2, the error as the last line, and no stack of any language before it."""
    assert result.returncode == 2, result.stderr
    assert last_line(result).startswith(expected_start), result.stderr
    assert "Traceback" not in result.stderr and "\tat " not in result.stderr, result.stderr


@pytest.fixture(scope="module")
def counts_data(tmp_path_factory):
    """Counts of 12 features, three classes, in three files."""
    folder = tmp_path_factory.mktemp("counts")
    rng = np.random.default_rng(7)
    for part in range(3):
        labels = rng.choice(["ham", "spam", "eggs"], size=300)
        X = rng.poisson(np.where(labels[:, None] == "ham", 1.0, 2.5), size=(300, 12))
        pq.write_table(pa.table({"id": np.arange(part * 300, (part + 1) * 300), "label": labels,
                                 "pixels": X.tolist()}), folder / f"part-{part}.parquet")
    return folder


def test_the_executors_python_has_no_nbstream(cluster):
    probe = subprocess.run([str(cluster.python), "-c", "import nbstream"], capture_output=True, text=True,
                           cwd=cluster.directory)
    assert probe.returncode == 1 and "No module named 'nbstream'" in probe.stderr
    assert subprocess.run([str(cluster.python), "-c", "import numpy, pyarrow"], cwd=cluster.directory).returncode == 0
    print(f"executors' Python: {cluster.python}: {probe.stderr.strip().splitlines()[-1]}")


def test_train_evaluate_and_predict_on_the_cluster_equal_the_local_engine(cluster, counts_data, tmp_path):
    train = ("train", counts_data, "--label", "label", "--features", "pixels", "--model", "multinomial")
    assert invoke(*train, "--out", tmp_path / "local.nbs", "--no-progress").exit_code == 0
    remote = on_cluster(cluster, *train, "--out", tmp_path / "cluster.nbs")
    assert remote.returncode == 0, remote.stderr
    assert "learned 900 rows (0 rejected in all)" in remote.stdout
    assert_exact_pipeline(tmp_path / "cluster.nbs", tmp_path / "local.nbs")

    scored = on_cluster(cluster, "predict", tmp_path / "local.nbs", counts_data, "--proba", "--id", "id",
                        "--out", tmp_path / "predictions")
    assert scored.returncode == 0, scored.stderr
    assert invoke("predict", tmp_path / "local.nbs", counts_data, "--proba", "--id", "id", "--out",
                  tmp_path / "local.parquet", "--no-progress").exit_code == 0
    largest = assert_exact_predictions(pq.read_table(tmp_path / "predictions").sort_by("id"),
                                       pq.read_table(tmp_path / "local.parquet").sort_by("id"))
    print(f"largest difference of a probability, the cluster's tasks against the local engine: {largest:.3g}")

    evaluated = on_cluster(cluster, "evaluate", tmp_path / "local.nbs", counts_data, "--json")
    assert evaluated.returncode == 0, evaluated.stderr
    local = invoke("evaluate", tmp_path / "local.nbs", counts_data, "--json", "--no-progress")
    mine, theirs = json.loads(evaluated.stdout), json.loads(local.output)
    assert mine["confusion_matrix"] == theirs["confusion_matrix"] and mine["rows"] == 900
    assert mine["log_loss"] == pytest.approx(theirs["log_loss"], rel=1e-12)


def test_text_on_the_cluster_equals_the_local_engine(cluster, tmp_path):
    train = ("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--model", "complement")
    assert invoke(*train, "--out", tmp_path / "local.nbs", "--no-progress").exit_code == 0
    remote = on_cluster(cluster, *train, "--out", tmp_path / "cluster.nbs")
    assert remote.returncode == 0, remote.stderr
    assert_exact_pipeline(tmp_path / "cluster.nbs", tmp_path / "local.nbs")


def test_an_executor_python_that_is_not_there_is_one_line_naming_the_setting(cluster, counts_data, tmp_path):
    result = on_cluster(cluster, "train", counts_data, "--label", "label", "--features", "pixels",
                        "--out", tmp_path / "m.nbs", python="/nonexistent/bin/python")
    assert_one_clean_line(result, "error: the executors cannot run Python '/nonexistent/bin/python' "
                                  "(error=2, No such file or directory): set spark.pyspark.python")
    assert "spark.archives" in last_line(result) and not (tmp_path / "m.nbs").exists()


def test_executors_without_numpy_are_one_line_naming_the_setting(cluster, counts_data, tmp_path):
    bare = script("spark_cluster").bare_python()
    result = on_cluster(cluster, "train", counts_data, "--label", "label", "--features", "pixels",
                        "--out", tmp_path / "m.nbs", python=bare)
    assert_one_clean_line(result, "error: the executors' Python has no module ")
    assert "set spark.pyspark.python" in last_line(result)


# ---- Spark Connect -------------------------------------------------------------------------------
def test_worker_commands_through_spark_connect_equal_the_local_engine(cluster, counts_data, tmp_path):
    train = ("train", counts_data, "--label", "label", "--features", "pixels", "--model", "bernoulli",
             "--binarize", "1.5")
    assert invoke(*train, "--out", tmp_path / "local.nbs", "--no-progress").exit_code == 0
    remote = run_worker(*train, "--out", tmp_path / "connect.nbs", "--engine", "spark", "--master",
                        cluster.connect_url)
    assert remote.returncode == 0, remote.stderr
    assert_exact_pipeline(tmp_path / "connect.nbs", tmp_path / "local.nbs")
    evaluated = run_worker("evaluate", tmp_path / "local.nbs", counts_data, "--json", "--engine", "spark",
                           "--master", cluster.connect_url)
    local = invoke("evaluate", tmp_path / "local.nbs", counts_data, "--json", "--no-progress")
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads(evaluated.stdout)["confusion_matrix"] == json.loads(local.output)["confusion_matrix"]


def test_fit_on_a_remote_sessions_dataframe_equals_the_local_fit(cluster, counts_data, tmp_path):
    code = f"""
import sys
from pyspark.sql import SparkSession
import nbstream.spark
from nbstream.spark import parquet_pieces
spark = SparkSession.builder.remote({cluster.connect_url!r}).getOrCreate()
df = spark.read.parquet({str(counts_data)!r})
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
assert parquet_pieces.plan(df, ["label", "pixels"]), "the tasks read the files themselves"
pipeline = nbstream.spark.fit(df, label="label", features="pixels", model="complement")
pipeline.save({str(tmp_path / "connect.nbs")!r})
print(nbstream.spark.evaluate(pipeline, df)["rows"])
"""
    fitted = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert fitted.returncode == 0, fitted.stderr
    assert fitted.stdout.strip().splitlines()[-1] == "900"
    assert invoke("train", counts_data, "--label", "label", "--features", "pixels", "--model", "complement",
                  "--out", tmp_path / "local.nbs", "--no-progress").exit_code == 0
    assert_exact_pipeline(tmp_path / "connect.nbs", tmp_path / "local.nbs")


# ---- the recipes of docs/spark.md ------------------------------------------------------------------
def recipe_lines() -> list[str]:
    """The lines of the code blocks under docs/spark.md's "Recipes"."""
    text = (REPO / "docs" / "spark.md").read_text()
    section = text[text.index("## Recipes"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    blocks = section.split("```")[1::2]
    return [line for block in blocks for line in block.splitlines()[1:] if line.strip()]


def test_the_recipes_run_as_the_docs_write_them(cluster, counts_data, tmp_path):
    script_text = (REPO / "scripts" / "spark_recipes.sh").read_text()
    lines = recipe_lines()
    assert len(lines) >= 10
    for line in lines:
        assert line.replace("\\\\", "\\") in script_text, f"docs/spark.md's line is not run: {line}"
    environment = {**os.environ, "CLUSTER": cluster.master_url, "CONNECT": cluster.connect_url,
                   "DATA": str(counts_data), "EXECUTOR_PYTHON": str(cluster.python)}
    ran = subprocess.run([str(REPO / "scripts" / "spark_recipes.sh"), str(tmp_path)], capture_output=True,
                         text=True, env=environment, timeout=900)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == "recipes: 4 ran"
    for model in ("cli", "submit", "connect", "notebook"):
        assert_exact_pipeline(tmp_path / f"{model}.nbs", tmp_path / "cli.nbs")


# ---- the extras, each alone in a fresh virtual environment --------------------------------------------
FIT = """
import sys
from pyspark.sql import SparkSession
import nbstream.spark
builder = SparkSession.builder
spark = (builder.remote(sys.argv[1]) if sys.argv[1].startswith("sc://") else
         builder.master(sys.argv[1]).config("spark.ui.enabled", "false")).getOrCreate()
pipeline = nbstream.spark.fit(spark.read.parquet(sys.argv[2]), label="label", features="pixels")
print(pipeline.model.n_examples_seen_)
"""


def test_the_spark_extras_bring_what_they_need(cluster, counts_data, tmp_path):
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "env")], check=True)
    python = str(tmp_path / "env" / "bin" / "python")

    def install(extra: str) -> None:
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        f"{REPO}[{extra}]"], check=True, capture_output=True, timeout=600)

    program = tmp_path / "fit.py"  # a file: PySpark's Connect client exits quietly under `python -c`
    program.write_text(FIT)

    def fit(master: str) -> subprocess.CompletedProcess:
        environment = {**os.environ, "PYSPARK_PYTHON": python}
        return subprocess.run([python, str(program), master, str(counts_data)], capture_output=True, text=True,
                              env=environment, cwd=tmp_path, timeout=300)

    install("spark")
    alone = fit("local[1]")
    assert alone.returncode == 0 and alone.stdout.strip().splitlines()[-1] == "900", alone.stderr
    without_client = fit(cluster.connect_url)  # the Connect client is not in nbstream[spark]
    assert without_client.returncode == 1 and "No module named 'grpc'" in without_client.stderr
    install("spark-connect")
    remote = fit(cluster.connect_url)
    assert remote.returncode == 0 and remote.stdout.strip().splitlines()[-1] == "900", remote.stderr
