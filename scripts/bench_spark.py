"""nbstream on Spark against Spark ML's own NaiveBayes, in one Spark session, on the same files.

Data: MNIST's training set replicated 10x (600,000 rows) and its test set (10,000 rows), read
from the IDX files and written by Spark as Parquet: ``pixels`` array<smallint> (what Spark
writes for small integers), and for Spark ML the same pixels as a vector column ``features``
and, for its Bernoulli model (which takes only 0/1), ``binary`` (pixels > 127.5).

For each family Spark ML has (bernoulli, multinomial, complement, gaussian): the warm fit time
(best of --rounds, after one warm-up fit) and the time to transform the test set and count the
correct predictions, of Spark ML and of ``nbstream.spark`` (fit on ``pixels``; predict and
evaluate through ``nbstream.spark.evaluate``), their ratio, and both accuracies; then
``worker train --engine local`` on the same files (Bernoulli, one process).

    pip install -e '.[spark,bench]'
    python scripts/bench_spark.py --data-dir "$NBSTREAM_DATA_DIR/mnist" --master 'local[2]'
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.datasets import default_data_dir, load_mnist, mnist_table  # noqa: E402

FAMILIES = {  # nbstream's parameters for the same model as Spark ML's NaiveBayes(modelType=...)
    "bernoulli": {"binarize": 127.5}, "multinomial": {}, "complement": {}, "gaussian": {}}


def best_of(rounds: int, run: Callable[[], object]) -> tuple[float, object]:
    """(fastest seconds, last result) of ``rounds`` runs after one warm-up run."""
    result = run()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return min(times), result


def write_data(spark, mnist: dict, folder: Path, copies: int) -> tuple[str, str]:
    """Parquet written by Spark: (train replicated ``copies`` times, test)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    raw = folder / "raw"
    raw.mkdir()
    train = mnist_table(mnist["train_images"], mnist["train_labels"])
    pq.write_table(pa.concat_tables([train] * copies), raw / "train.parquet", row_group_size=60_000)
    pq.write_table(mnist_table(mnist["test_images"], mnist["test_labels"], 60_000), raw / "test.parquet")
    paths = []
    for split in ("train", "test"):
        pixels = F.col("pixels").cast("array<smallint>")
        df = spark.read.parquet(str(raw / f"{split}.parquet")).select(
            "id", F.col("label").cast("double").alias("label"), pixels.alias("pixels"),
            array_to_vector(pixels.cast("array<double>")).alias("features"),
            array_to_vector(F.transform(pixels, lambda p: F.when(p > 127.5, 1.0).otherwise(0.0))).alias("binary"))
        paths.append(str(folder / split))
        df.write.parquet(paths[-1])
    return paths[0], paths[1]


def spark_ml(family: str, train, test, rounds: int) -> tuple[float, float, float]:
    """(fit seconds, predict seconds, accuracy) of Spark ML's NaiveBayes."""
    from pyspark.ml.classification import NaiveBayes
    from pyspark.sql import functions as F

    column = "binary" if family == "bernoulli" else "features"
    estimator = NaiveBayes(modelType=family, featuresCol=column, labelCol="label", smoothing=1.0)
    fit_seconds, model = best_of(rounds, lambda: estimator.fit(train))

    def correct() -> int:
        predicted = model.transform(test.select("label", column))  # type: ignore[attr-defined]
        return predicted.where(F.col("prediction") == F.col("label")).count()

    predict_seconds, right = best_of(rounds, correct)
    return fit_seconds, predict_seconds, right / test.count()  # type: ignore[operator]


def ours(family: str, train, test, rounds: int) -> tuple[float, float, float]:
    """(fit seconds, predict seconds, accuracy) of nbstream.spark."""
    import nbstream.spark

    fit_seconds, pipeline = best_of(rounds, lambda: nbstream.spark.fit(
        train, label="label", features="pixels", model=family, **FAMILIES[family]))
    predict_seconds, report = best_of(rounds, lambda: nbstream.spark.evaluate(pipeline, test))
    return fit_seconds, predict_seconds, report["accuracy"]  # type: ignore[index]


def local_engine(train_path: str, rounds: int) -> float:
    """`worker train --engine local` (Bernoulli) on the same Parquet parts, in this process."""
    from worker.batch.train import train
    from worker.config import FeatureOptions, ModelOptions, TrainConfig

    with tempfile.TemporaryDirectory() as folder:
        def run() -> None:
            config = TrainConfig(paths=[train_path], label="label", out=Path(folder) / "m.nbs", fresh=True,
                                 model=ModelOptions(kind="bernoulli", binarize=127.5),
                                 features=FeatureOptions(columns=["pixels"]))
            train(config, progress=False)
        return best_of(rounds, run)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=default_data_dir() / "mnist")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--copies", type=int, default=10, help="times the training set is replicated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=list(FAMILIES), action="append")
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("bench_spark").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.log.level", "ERROR")
             .config("spark.executorEnv.OPENBLAS_NUM_THREADS", "1").getOrCreate())  # one core a task: docs/spark.md
    mnist = load_mnist(args.data_dir)
    with tempfile.TemporaryDirectory() as folder:
        train_path, test_path = write_data(spark, mnist, Path(folder), args.copies)
        train, test = spark.read.parquet(train_path), spark.read.parquet(test_path)
        rows = train.count()
        print(f"Spark {spark.version}, {args.master}, {os.cpu_count()} cores; {rows:,} training rows, "
              f"{test.count():,} test rows; best of {args.rounds} warm runs\n")
        print("| family | fit: Spark ML | fit: nbstream | ratio | predict: Spark ML | predict: nbstream | ratio "
              "| accuracy: Spark ML | accuracy: nbstream |")
        print("|---|---|---|---|---|---|---|---|---|")
        for family in args.only or FAMILIES:
            ml_fit, ml_predict, ml_accuracy = spark_ml(family, train, test, args.rounds)
            nb_fit, nb_predict, nb_accuracy = ours(family, train, test, args.rounds)
            print(f"| {family} | {ml_fit:.2f} s | {nb_fit:.2f} s | {ml_fit / nb_fit:.1f}x | {ml_predict:.2f} s | "
                  f"{nb_predict:.2f} s | {ml_predict / nb_predict:.1f}x | {ml_accuracy:.4f} | {nb_accuracy:.4f} |",
                  flush=True)
        local = local_engine(train_path, args.rounds)
        print(f"\n`worker train --engine local` (bernoulli, one process, the same files): {local:.2f} s, "
              f"{rows / local:,.0f} rows/s")
    spark.stop()


if __name__ == "__main__":
    main()
