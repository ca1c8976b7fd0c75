"""nbstream on Apache Spark: the model of one pass over all rows, whatever the partitions.

Every Spark test is in this module, so that one JVM serves them (a session-scoped ``local[2]``
session; the CLI commands run in-process find it). Select them with ``-m spark``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import nbstream
from nbstream.arrow import FeatureSpec, Pipeline, PipelineLearner, load_pipeline
from tests.helpers.arrays import dense
from tests.helpers.cli import invoke, worker_env
from tests.helpers.paths import SMS

pytest.importorskip("pyspark")
import nbstream.spark  # noqa: E402 - after the skip: it needs pyspark
from nbstream.spark.frames import spark_schema  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable  # before the session starts: executors import nbstream
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("nbstream-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.log.level", "ERROR")
               .config("spark.executorEnv.OPENBLAS_NUM_THREADS", "1").getOrCreate())
    yield session
    session.stop()


def partitioned(spark, table: pa.Table, sizes: list[int]):
    """A DataFrame of the table's rows, in order, in partitions of these sizes (0: an empty one)."""
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()

    def rows_of(batches):
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from table.slice(bounds[index], sizes[index]).to_batches()

    df = spark.range(0, len(sizes), 1, len(sizes)).mapInArrow(rows_of, spark_schema(table.schema))
    assert df.rdd.glom().map(len).collect() == sizes
    return df


def local_pipeline(table: pa.Table, spec: FeatureSpec, model, label="label") -> Pipeline:
    """What `worker train` learns from the table (in batches of 100 rows)."""
    pipeline = Pipeline(model, spec.encoder(), label=label)
    learner = PipelineLearner(pipeline)
    for batch in table.to_batches(max_chunksize=100):
        learner.learn(batch)
    return pipeline


def counts_table(n=600, seed=0, labels=("ham", "spam", "eggs")) -> pa.Table:
    rng = np.random.default_rng(seed)
    y = rng.choice(labels, size=n)
    X = rng.poisson(np.where(np.asarray(y)[:, None] == labels[0], 1.0, 2.5), size=(n, 12))
    return pa.table({"id": np.arange(n), "label": y, "pixels": [row.tolist() for row in X]})


def assert_same_model(spark_pipeline: Pipeline, local: Pipeline, table: pa.Table):
    """The same classes in the same order, the same statistics and bit-identical probabilities."""
    mine, theirs = spark_pipeline.model, local.model
    assert mine.classes_.tolist() == theirs.classes_.tolist()
    state, expected = mine.export_state(tables=False), theirs.export_state(tables=False)
    assert state.statistics.keys() == expected.statistics.keys()
    for name, array in state.statistics.items():
        np.testing.assert_array_equal(array, expected.statistics[name], err_msg=name)
    assert spark_pipeline.features.to_json() == local.features.to_json()
    np.testing.assert_array_equal(spark_pipeline.predict_proba(table), local.predict_proba(table))


# ---- exactness -------------------------------------------------------------------------------
@pytest.mark.parametrize("sizes", [[600], [250, 0, 350], [100, 80, 0, 120, 100, 150, 50]],
                         ids=["1 partition", "3 with an empty one", "7 with an empty one"])
@pytest.mark.parametrize(("kind", "params"), [("bernoulli", {"binarize": 1.0}), ("multinomial", {"alpha": 0.5}),
                                              ("complement", {"norm": True})])
def test_discrete_models_equal_the_local_engine_bit_for_bit(spark, sizes, kind, params):
    table = counts_table()
    fitted = nbstream.spark.fit(partitioned(spark, table, sizes), label="label", features="pixels", model=kind,
                                **params)
    assert_same_model(fitted, local_pipeline(table, FeatureSpec.vector("pixels"),
                                             nbstream.model_class(kind)(**params)), table)
    assert fitted.meta["rows_read"] == 600 and fitted.meta["rows_rejected"] == 0


def test_gaussian_is_within_1e_9_of_the_local_engine(spark):
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, size=500)
    table = pa.table({"x": rng.normal(y, 1.0) * 1e3, "z": rng.normal(-y, 2.0), "label": y})
    fitted = nbstream.spark.fit(partitioned(spark, table, [100, 0, 250, 150]), label="label", features=["x", "z"],
                                model="gaussian")
    local = local_pipeline(table, FeatureSpec.numeric_columns(["x", "z"]), nbstream.GaussianNB())
    assert fitted.classes_.tolist() == local.classes_.tolist()
    np.testing.assert_allclose(fitted.model.theta_, local.model.theta_, rtol=1e-9)
    np.testing.assert_allclose(fitted.model.var_, local.model.var_, rtol=1e-9)
    np.testing.assert_allclose(fitted.predict_proba(table), local.predict_proba(table), rtol=1e-9, atol=1e-12)


def test_a_class_seen_in_one_partition_only_joins_in_partition_order(spark):
    table = counts_table(300, seed=2, labels=("a", "b"))
    rare = pa.table({"id": [300, 301], "label": ["zebra", "zebra"], "pixels": [[9] * 12, [8] * 12]})
    whole = pa.concat_tables([table.slice(0, 200), rare, table.slice(200)])
    fitted = nbstream.spark.fit(partitioned(spark, whole, [100, 100, 2, 100]), label="label", features="pixels")
    assert fitted.classes_.tolist()[-1] == "zebra"
    assert_same_model(fitted, local_pipeline(whole, FeatureSpec.vector("pixels"), nbstream.MultinomialNB()), whole)
    assert fitted.model.class_count_.tolist()[-1] == 2


def test_categorical_codes_first_seen_in_different_partitions_are_aligned(spark):
    rng = np.random.default_rng(3)
    colours = rng.choice(["red", "green", "blue", "cyan"], size=400).tolist()
    colours[350:] = ["violet"] * 50  # only in the last partition
    sizes = rng.choice(["S", "M", "L"], size=400).tolist()
    table = pa.table({"colour": colours, "size": sizes, "label": rng.integers(0, 2, size=400)})
    reordered = pa.concat_tables([table.slice(200).take(np.arange(199, -1, -1)), table.slice(0, 200)])
    fitted = nbstream.spark.fit(partitioned(spark, reordered, [150, 0, 50, 200]), label="label",
                                features=["colour", "size"], model="categorical")
    local = local_pipeline(reordered, FeatureSpec.categorical(["colour", "size"]), nbstream.CategoricalNB())
    assert fitted.features.categories == local.features.categories
    assert fitted.features.categories[0]["violet"] == 0  # first seen in the first partition
    assert_same_model(fitted, local, reordered)


def test_text_equals_the_local_engine(spark):
    table = pq.read_table(SMS / "train.parquet")
    fitted = nbstream.spark.fit(partitioned(spark, table, [2000, 0, 2459]), label="label", text="text",
                                hash_bits=16, ngrams=2)
    local = local_pipeline(table, FeatureSpec.text("text", 16, 2), nbstream.MultinomialNB())
    assert_same_model(fitted, local, table)


def test_a_spark_ml_vector_column_dense_or_sparse_is_a_features_column(spark):
    from pyspark.ml.linalg import Vectors

    table = counts_table(200, seed=4)
    X = np.array(table.column("pixels").to_pylist(), dtype=float)
    rows = [(Vectors.sparse(12, {j: v for j, v in enumerate(x) if v}) if i % 2 else Vectors.dense(x), label)
            for i, (x, label) in enumerate(zip(X, table.column("label").to_pylist(), strict=True))]
    df = spark.createDataFrame(rows, ["features", "label"]).coalesce(1)
    fitted = nbstream.spark.fit(df, label="label", features="features")
    local = local_pipeline(table, FeatureSpec.vector("pixels"), nbstream.MultinomialNB())
    assert fitted.classes_.tolist() == local.classes_.tolist()
    np.testing.assert_array_equal(dense(fitted.model.feature_count_), dense(local.model.feature_count_))
    assert fitted.features.describe() == "list column 'features' of 12 numbers"
    evaluated = nbstream.spark.evaluate(fitted, df)
    assert evaluated["rows"] == 200 and evaluated["accuracy"] == pytest.approx(
        float(np.mean(local.predict(table) == np.asarray(table.column("label")))))


def test_forgetting_is_refused(spark):
    with pytest.raises(ValueError, match="partitions have none"):
        nbstream.spark.fit(partitioned(spark, counts_table(10), [10]), label="label", features="pixels",
                           half_life=100.0)


# ---- the command line ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sms_local(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sms")
    result = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--model", "complement",
                    "--out", folder / "local.nbs", "--no-progress")
    assert result.exit_code == 0, result.output
    return folder / "local.nbs"


def spark_command(*args):
    result = invoke(*args, "--engine", "spark", "--master", "local[2]")
    return result


def test_worker_train_on_spark_writes_the_local_snapshot(spark, sms_local, tmp_path):
    result = spark_command("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--model",
                           "complement", "--out", tmp_path / "spark.nbs")
    assert result.exit_code == 0, result.output
    assert "learned 4,459 rows (0 rejected in all)" in result.output
    mine, theirs = load_pipeline(tmp_path / "spark.nbs"), load_pipeline(sms_local)
    np.testing.assert_array_equal(dense(mine.model.feature_count_), dense(theirs.model.feature_count_))
    assert mine.classes_.tolist() == theirs.classes_.tolist() and mine.label == "label"
    assert mine.meta["source"] == {"type": "files", "files": [str(SMS / "train.parquet")]}
    merged = invoke("merge", tmp_path / "spark.nbs", sms_local, "--out", tmp_path / "twice.nbs")
    assert f"both learned from {SMS / 'train.parquet'}" in merged.output.replace("\n", "")


def test_predict_and_evaluate_on_spark_equal_the_local_commands(spark, sms_local, tmp_path):
    test = SMS / "test.parquet"
    assert invoke("predict", sms_local, test, "--out", tmp_path / "local.parquet", "--proba", "--id", "id",
                  "--no-progress").exit_code == 0
    result = spark_command("predict", sms_local, test, "--out", tmp_path / "spark", "--proba", "--id", "id")
    assert result.exit_code == 0, result.output
    assert "wrote 1,115 predictions" in result.output
    local = pq.read_table(tmp_path / "local.parquet").sort_by("id")
    mine = pq.read_table(tmp_path / "spark").sort_by("id")
    assert mine.column_names == local.column_names == ["id", "prediction", "proba_ham", "proba_spam"]
    assert mine.equals(local.cast(mine.schema))
    reports = [json.loads(command.output[command.output.index("{"):]) for command in (
        invoke("evaluate", sms_local, test, "--json", "--no-progress"),
        spark_command("evaluate", sms_local, test, "--json"))]
    sums = [(report.pop("log_loss"), report.pop("brier")) for report in reports]  # added in another order
    assert reports[0] == reports[1] and reports[0]["rows"] == 1_115
    assert sums[0] == pytest.approx(sums[1], rel=1e-12) and 0 < sums[0][1] < 0.05


@pytest.fixture
def with_bad_rows(tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3, 4, 5, 6], "y": [0, 1, 0, 1, -1, 0],
                             "label": ["a", "b", "a", None, "b", "a"]}), path, row_group_size=2)
    return path


def test_a_bad_row_fails_training_with_the_local_engines_line(spark, with_bad_rows, tmp_path):
    args = ("train", with_bad_rows, "--label", "label", "--features", "x,y", "--out", tmp_path / "m.nbs")
    local, remote = invoke(*args), spark_command(*args)
    assert local.exit_code == remote.exit_code == 2
    expected = f"error: {with_bad_rows}: row 3, column 'label': null label. Use --skip-invalid to set such rows aside."
    assert local.output.strip() == expected
    assert remote.output.strip().splitlines()[-1] == expected and "Traceback" not in remote.output
    assert not (tmp_path / "m.nbs").exists()


def test_skip_invalid_writes_the_rejects_as_parquet_parts(spark, with_bad_rows, tmp_path, planned):
    result = spark_command("train", with_bad_rows, "--label", "label", "--features", "x,y", "--skip-invalid",
                           "--out", tmp_path / "m.nbs")
    assert result.exit_code == 0, result.output
    assert "learned 4 rows (2 rejected in all)" in result.output
    rejects = pq.read_table(tmp_path / "m.nbs.rejects").sort_by("_row").to_pylist()
    assert rejects == [
        {"x": 4, "y": 1, "label": None, "_file": str(with_bad_rows), "_row": 3, "_column": "label",
         "_error": "null label"},
        {"x": 5, "y": -1, "label": "b", "_file": str(with_bad_rows), "_row": 4, "_column": "y",
         "_error": "negative value (this model needs counts)"}]
    assert nbstream.load(tmp_path / "m.nbs").class_count_.tolist() == [3, 1]
    assert len(planned[0]) == 3  # the worker's read of the file: its tasks read its three row groups themselves


def test_a_bad_row_fails_predict_in_one_line_unless_skipped(spark, with_bad_rows, tmp_path):
    model = tmp_path / "m.nbs"
    assert invoke("train", with_bad_rows, "--label", "label", "--features", "x,y", "--skip-invalid",
                  "--out", model).exit_code == 0
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"x": [1, None, 3], "y": [0, 1, 0]}), nulls)
    refused = spark_command("predict", model, nulls, "--out", tmp_path / "p")
    assert refused.exit_code == 2
    assert refused.output.strip().splitlines()[-1] == \
        f"error: {nulls}: row 1, column 'x': null value. Use --skip-invalid to score the other rows."
    kept = spark_command("predict", model, nulls, "--out", tmp_path / "p", "--skip-invalid")
    assert kept.exit_code == 0, kept.output
    assert pq.read_table(tmp_path / "p").column("error").to_pylist() == [None, "x: null value", None]


@pytest.mark.parametrize(("option", "value"), [("--half-life", "10"), ("--window", "10"), ("--checkpoint-every", "10"),
                                               ("--resume", "base.nbs")])
def test_options_that_mean_nothing_across_partitions_are_refused_in_one_line(option, value, with_bad_rows, tmp_path):
    result = invoke("train", with_bad_rows, "--label", "label", "--features", "x,y", "--out", tmp_path / "m.nbs",
                    option, value, "--engine", "spark")
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {option} cannot be used with --engine spark: ")
    assert len(result.output.strip().splitlines()) == 1


def test_spark_options_need_the_spark_engine(with_bad_rows, tmp_path):
    result = invoke("train", with_bad_rows, "--label", "label", "--features", "x,y", "--out", tmp_path / "m.nbs",
                    "--table", "t")
    assert result.exit_code == 2 and result.output.strip() == "error: --table needs --engine spark."


# ---- Spark's own data: MNIST written by Spark ----------------------------------------------------------
@pytest.mark.parametrize("pixel_type", ["smallint", "int"])
def test_mnist_written_by_spark_gives_the_textbook_bernoulli(spark, mnist_parquet, tmp_path, pixel_type):
    from pyspark.sql import functions as F

    written = tmp_path / "train"
    spark.read.parquet(str(mnist_parquet["train"])) \
        .select("id", "label", F.col("pixels").cast(f"array<{pixel_type}>").alias("pixels")) \
        .write.parquet(str(written))
    result = spark_command("train", written, "--label", "label", "--features", "pixels", "--model", "bernoulli",
                           "--binarize", "127.5", "--out", tmp_path / "spark.nbs")
    assert result.exit_code == 0, result.output
    local = invoke("train", mnist_parquet["train"], "--label", "label", "--features", "pixels", "--model",
                   "bernoulli", "--binarize", "127.5", "--out", tmp_path / "local.nbs", "--no-progress")
    assert local.exit_code == 0, local.output
    mine, theirs = nbstream.load(tmp_path / "spark.nbs"), nbstream.load(tmp_path / "local.nbs")
    np.testing.assert_array_equal(dense(mine.feature_count_)[np.argsort(mine.classes_)],
                                  dense(theirs.feature_count_)[np.argsort(theirs.classes_)])
    report = spark_command("evaluate", tmp_path / "spark.nbs", mnist_parquet["test"], "--json")
    assert json.loads(report.output[report.output.index("{"):])["accuracy"] == pytest.approx(0.8427, abs=5e-5)


# ---- files that disagree on a column's type --------------------------------------------------------
def test_labels_of_numbers_in_one_file_and_strings_in_another_are_one_line_on_both_engines(spark, tmp_path):
    pq.write_table(pa.table({"label": pa.array([1, 2, 1], pa.int64()), "x": [1, 2, 3]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"label": ["x", "y", "x"], "x": [1, 2, 3]}), tmp_path / "b.parquet")
    args = ("train", tmp_path, "--label", "label", "--features", "x", "--out", tmp_path / "m.nbs")
    local, remote = invoke(*args, "--no-progress"), spark_command(*args)
    assert local.exit_code == remote.exit_code == 2
    for result in (local, remote):
        assert len(result.output.strip().splitlines()) == 1
        assert result.output.startswith(f"error: {tmp_path / 'b.parquet'}: "), result.output
        assert "column 'label': labels mix numbers and strings" in result.output
    assert remote.output.strip().endswith(f"(string here, bigint in {tmp_path / 'a.parquet'}).")


def test_integer_and_double_feature_arrays_train_alike_on_both_engines(spark, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"label": ["a", "b", "a"], "pixels": pa.array([[1, 2], [3, 0], [0, 1]],
                                                                          pa.list_(pa.int32()))}),
                   data / "a.parquet")
    pq.write_table(pa.table({"label": ["b", "a", "b"], "pixels": pa.array([[1.5, 2], [3, 4], [0, 1]],
                                                                          pa.list_(pa.float64()))}),
                   data / "b.parquet")
    args = ("train", data, "--label", "label", "--features", "pixels")
    local = invoke(*args, "--out", tmp_path / "local.nbs", "--no-progress")
    remote = spark_command(*args, "--out", tmp_path / "spark.nbs")
    assert local.exit_code == remote.exit_code == 0, remote.output
    mine, theirs = nbstream.load(tmp_path / "spark.nbs"), nbstream.load(tmp_path / "local.nbs")
    order = np.argsort(mine.classes_), np.argsort(theirs.classes_)
    np.testing.assert_array_equal(dense(mine.feature_count_)[order[0]], dense(theirs.feature_count_)[order[1]])
    assert dense(theirs.feature_count_).sum() == 18.5


def test_a_local_path_that_is_not_there_fails_before_spark_starts(tmp_path):
    missing = tmp_path / "nowhere"
    local = invoke("train", missing, "--label", "label", "--features", "x", "--out", tmp_path / "m.nbs")
    environment = {**worker_env(), "SPARK_HOME": str(tmp_path / "no-spark"), "JAVA_HOME": str(tmp_path / "no-java")}
    remote = subprocess.run([sys.executable, "-m", "worker", "train", str(missing), "--label", "label",
                             "--features", "x", "--out", str(tmp_path / "m.nbs"), "--engine", "spark"],
                            capture_output=True, text=True, env=environment, timeout=120)
    assert local.exit_code == remote.returncode == 2
    assert remote.stderr == local.output == f"error: {missing}: no such Parquet file, directory or matching glob.\n"


# ---- what "exact" means: the statement of docs/spark.md, family by family ----------------------------
@pytest.mark.parametrize("kind", ["bernoulli", "multinomial", "complement", "gaussian", "categorical"])
def test_every_family_is_exact_as_the_docs_state(spark, kind, tmp_path):
    from nbstream.arrow.predictions import prediction_table
    from nbstream.arrow.problems import RowProblems
    from tests.helpers.exactness import assert_exact_pipeline, assert_exact_predictions

    rng = np.random.default_rng(11)
    y = rng.choice(["a", "b", "c"], size=900)
    X = rng.poisson(np.where(y[:, None] == "a", 3.0, 40.0), size=(900, 30)) * 1.0
    columns = {"pixels": X.tolist()} if kind not in ("gaussian", "categorical") else \
        {f"f{j}": X[:, j].astype(int) % 7 if kind == "categorical" else X[:, j] for j in range(4)}
    table = pa.table({"id": np.arange(900), "label": y, **columns})
    spec = FeatureSpec.vector("pixels") if "pixels" in columns else \
        (FeatureSpec.categorical if kind == "categorical" else FeatureSpec.numeric_columns)(list(columns))
    features = "pixels" if "pixels" in columns else list(columns)
    fitted = nbstream.spark.fit(partitioned(spark, table, [300, 0, 250, 350]), label="label", features=features,
                                model=kind)
    local = local_pipeline(table, spec, nbstream.model_class(kind)())
    fitted.save(tmp_path / "spark.nbs")
    local.save(tmp_path / "local.nbs")
    assert_exact_pipeline(tmp_path / "spark.nbs", tmp_path / "local.nbs")

    predicted = nbstream.spark.predict(local, partitioned(spark, table, [450, 450]), proba=True, id="id")
    mine = pa.Table.from_pylist([row.asDict() for row in predicted.collect()]).sort_by("id")
    theirs = prediction_table(local.classes_, local.predict_proba(table), RowProblems(900), id_column="id",
                              ids=table.column("id"), with_proba=True, with_errors=False)
    largest = assert_exact_predictions(mine.select(theirs.column_names), theirs)
    print(f"{kind}: largest difference of a probability, Spark's tasks against the local engine: {largest:.3g}")


# ---- plain Parquet reads: the tasks read the files themselves (nbstream.spark.parquet_pieces) ------------
def written_files(folder, tables: list[pa.Table], row_group_size: int) -> list[str]:
    folder.mkdir(exist_ok=True)
    paths = [str(folder / f"part-{number}.parquet") for number in range(len(tables))]
    for table, path in zip(tables, paths, strict=True):
        pq.write_table(table, path, row_group_size=row_group_size)
    return paths


@pytest.fixture
def planned(monkeypatch):
    """What each call of parquet_pieces.plan returned, in order (a piece per row group)."""
    from nbstream.spark import parquet_pieces

    monkeypatch.setattr(parquet_pieces, "LEAST_PIECE_BYTES", 1)
    results, plan = [], parquet_pieces.plan

    def recorded(df, columns):
        results.append(plan(df, columns))
        return results[-1]

    monkeypatch.setattr(parquet_pieces, "plan", recorded)
    return results


def test_a_plain_parquet_read_is_cut_into_pieces_of_row_groups_in_file_order(spark, tmp_path):
    from nbstream.spark import parquet_pieces

    paths = written_files(tmp_path / "data", [counts_table(250, seed=5), counts_table(100, seed=6)], 40)
    footers = []  # a _metadata file of every row group, as Dask writes: Spark's scan leaves it out
    for path in paths:
        footers.append(pq.read_metadata(path))
        footers[-1].set_file_path(os.path.basename(path))
    pq.write_metadata(pq.read_schema(paths[0]), tmp_path / "data" / "_metadata", metadata_collector=footers)
    pq.write_metadata(pq.read_schema(paths[0]), tmp_path / "data" / "_common_metadata")
    folder = str(tmp_path / "data")
    merged = spark.read.option("mergeSchema", "true").parquet(folder)  # as the worker's commands read
    some = spark.read.parquet(folder).select("pixels", "label")
    for df in (spark.read.parquet(folder), spark.read.parquet(*paths), some, merged):
        pieces = parquet_pieces.plan(df, ["label", "pixels"])
        spans = [span for piece in pieces for span in piece.spans]
        assert [(parquet_pieces.local_path(span.uri), group) for span in spans for group in span.row_groups] == \
            [(paths[0], group) for group in range(7)] + [(paths[1], group) for group in range(3)]
        assert sum(batch.num_rows for piece in pieces for batch, _, _ in piece.batches()) == 350


def not_plain(spark, folder):
    """DataFrames over the Parquet of ``folder`` that are more than a plain read of its files."""
    from pyspark.sql import functions as F

    read = spark.read.parquet(str(folder))
    spark.sql(f"CREATE TABLE pieces_table USING parquet LOCATION '{folder}'")
    return {"filtered": read.where("label != 'ham'"), "limited": read.limit(10), "sampled": read.sample(0.5, seed=1),
            "a column computed": read.withColumn("label", F.upper("label")), "unioned": read.union(read),
            "read twice": spark.read.parquet(str(folder), str(folder)),
            "read with an option": spark.read.option("recursiveFileLookup", "true").parquet(str(folder)),
            "a table": spark.table("pieces_table"), "not from files": spark.createDataFrame(read.toPandas())}


def test_anything_but_a_plain_parquet_read_keeps_sparks_own_reading(spark, tmp_path):
    from nbstream.spark import parquet_pieces

    written_files(tmp_path / "data", [counts_table(50)], 40)
    try:
        for name, df in not_plain(spark, tmp_path / "data").items():
            assert parquet_pieces.plan(df, ["label", "pixels"]) is None, name
    finally:
        spark.sql("DROP TABLE IF EXISTS pieces_table")


def test_files_spark_would_read_otherwise_keep_sparks_own_reading(spark, tmp_path):
    from nbstream.spark import parquet_pieces

    table = counts_table(50)
    pq.write_to_dataset(table, tmp_path / "by-label", partition_cols=["label"])
    assert parquet_pieces.plan(spark.read.parquet(str(tmp_path / "by-label")), ["label", "pixels"]) is None
    narrow = table.set_column(2, "pixels", table.column("pixels").cast(pa.list_(pa.int32())))
    written_files(tmp_path / "narrow", [narrow], 40)  # read by Spark as the schema says; pyarrow would not widen
    widened = spark.read.schema("id bigint, label string, pixels array<bigint>").parquet(str(tmp_path / "narrow"))
    assert widened.collect()[0]["pixels"] == table.column("pixels")[0].as_py()
    assert parquet_pieces.plan(widened, ["label", "pixels"]) is None


def test_learning_the_pieces_equals_the_local_engine_with_classes_in_file_order(spark, tmp_path, planned):
    first, second = counts_table(120, seed=7, labels=("a", "b")), counts_table(900, seed=8, labels=("c", "a", "b"))
    paths = written_files(tmp_path / "data", [first, second], 100)
    fitted = nbstream.spark.fit(spark.read.parquet(str(tmp_path / "data")), label="label", features="pixels",
                                model="multinomial")
    assert len(planned[0]) == 11  # a piece per row group
    whole = pa.concat_tables([first, second])
    assert_same_model(fitted, local_pipeline(whole, FeatureSpec.vector("pixels"), nbstream.MultinomialNB()), whole)
    assert fitted.classes_.tolist()[-1] == "c"  # Spark's own partitions would have read the larger file first
    assert fitted.meta["rows_read"] == 1020 and fitted.meta["source"]["files"] == paths


def test_a_bad_row_of_a_piece_is_named_by_its_file_and_row(spark, tmp_path, planned):
    good = counts_table(300, seed=9)
    bad = good.set_column(1, "label", pa.array(["ham"] * 250 + [None] + ["spam"] * 49))
    paths = written_files(tmp_path / "data", [good, bad], 64)
    with pytest.raises(nbstream.spark.RowRefused, match=f"^{re.escape(paths[1])}: row 250, column 'label': null label"):
        nbstream.spark.fit(spark.read.parquet(str(tmp_path / "data")), label="label", features="pixels")
    assert planned[0] is not None


def test_rows_set_aside_from_pieces_are_written_with_their_file_and_row(spark, tmp_path, planned):
    table = counts_table(200, seed=10)
    pixels = table.column("pixels").to_pylist()
    pixels[130] = [-1] * 12
    paths = written_files(tmp_path / "data", [table.set_column(2, "pixels", pa.array(pixels))], 64)
    fitted = nbstream.spark.fit(spark.read.parquet(str(tmp_path / "data")), label="label", features="pixels",
                                skip_invalid=True, rejects=str(tmp_path / "rejects"))
    assert planned[0] is not None and fitted.meta["rows_rejected"] == 1
    rejected = pq.read_table(tmp_path / "rejects").to_pylist()
    assert [(row["_file"], row["_row"], row["_column"]) for row in rejected] == [(paths[0], 130, "pixels")]


def test_a_file_that_changes_after_planning_is_one_line_naming_it(spark, tmp_path, monkeypatch):
    from nbstream.spark import parquet_pieces

    paths = written_files(tmp_path / "data", [counts_table(100, seed=11)], 50)
    df = spark.read.parquet(str(tmp_path / "data"))
    pieces = parquet_pieces.plan(df, ["label", "pixels"])
    monkeypatch.setattr(parquet_pieces, "plan", lambda df, columns: pieces)
    with open(paths[0], "r+b") as damaged:  # the footer the driver read no longer matches the file
        damaged.truncate(os.path.getsize(paths[0]) // 2)
    with pytest.raises(nbstream.spark.RowRefused) as refused:
        nbstream.spark.fit(df, label="label", features="pixels")
    assert str(refused.value).startswith(f"{paths[0]}: cannot be read on the executor: ")
    assert "\n" not in str(refused.value)
