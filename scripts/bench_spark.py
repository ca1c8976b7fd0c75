"""nbstream on Spark against Spark ML's own NaiveBayes, in one Spark session, on the same files.

Data: MNIST's training set replicated 10x (600,000 rows) and its test set (10,000 rows), read
from the IDX files and written by Spark as Parquet: ``pixels`` array<smallint> (what Spark
writes for small integers), and for Spark ML the same pixels as a vector column ``features``
and, for its Bernoulli model (which takes only 0/1), ``binary`` (pixels > 127.5).

For each family Spark ML has (bernoulli, multinomial, complement, gaussian): the warm fit time
and the time to transform the test set and count the correct predictions, of Spark ML and of
``nbstream.spark`` (fit on ``pixels``; predict and evaluate through ``nbstream.spark.evaluate``),
the two taking turns for --rounds rounds after one warm-up each (the best time and the range of
the rounds: a shared machine is noisy), their ratio, and both accuracies; then
``worker train --engine local`` on the same files (Bernoulli, one process).

    pip install -e '.[spark,bench]'
    python scripts/bench_spark.py --data-dir "$NBSTREAM_DATA_DIR/mnist" --master 'local[2]'

On a standalone cluster of one two-core worker (scripts/spark_cluster.py), whose executor runs
a Python without nbstream (it is shipped), interleaving the two libraries round by round:

    master=$(python scripts/spark_cluster.py start --workers 1 --cores 2 --memory 4g)
    python scripts/bench_spark.py --master "$master" --executor-python "$(python scripts/spark_cluster.py python)"

--record docs/figures writes the figure record of the table (spark.json for a local master,
spark-cluster.json for another) and draws its chart.
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

from scripts.bench import charts  # noqa: E402
from scripts.datasets import default_data_dir, load_mnist, mnist_table  # noqa: E402

FAMILIES = {  # nbstream's parameters for the same model as Spark ML's NaiveBayes(modelType=...)
    "bernoulli": {"binarize": 127.5}, "multinomial": {}, "complement": {}, "gaussian": {}}


LIBRARIES = ("Spark ML", "nbstream")


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


def timed(run: Callable[[], object]) -> tuple[float, object]:
    """(seconds, result) of one run."""
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


class Contender:
    """One library's fit and predict of one family: ``fit()`` then ``predict()`` -> accuracy."""

    def __init__(self, family: str, train, test, library: str):
        self.family, self.train, self.test, self.library = family, train, test, library
        self.model: object = None

    def fit(self) -> None:
        if self.library == "Spark ML":
            from pyspark.ml.classification import NaiveBayes

            estimator = NaiveBayes(modelType=self.family, featuresCol=self.column, labelCol="label", smoothing=1.0)
            self.model = estimator.fit(self.train)
        else:
            import nbstream.spark

            self.model = nbstream.spark.fit(self.train, label="label", features="pixels", model=self.family,
                                            **FAMILIES[self.family])

    def predict(self) -> float:
        """The accuracy on the test rows (Spark ML: transform and count the right answers;
        nbstream: ``nbstream.spark.evaluate``, which also computes log-loss and the confusion matrix)."""
        if self.library == "Spark ML":
            from pyspark.sql import functions as F

            predicted = self.model.transform(self.test.select("label", self.column))  # type: ignore[attr-defined]
            return predicted.where(F.col("prediction") == F.col("label")).count() / self.test.count()
        import nbstream.spark

        return nbstream.spark.evaluate(self.model, self.test)["accuracy"]  # type: ignore[arg-type]

    @property
    def column(self) -> str:
        return "binary" if self.family == "bernoulli" else "features"


def compare(family: str, train, test, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Seconds per round of each library's fit and predict, the libraries taking turns within
    each round (after one warm-up of each), and their accuracies."""
    contenders = [Contender(family, train, test, library) for library in LIBRARIES]
    results: dict[str, dict[str, list[float]]] = {library: {"fit": [], "predict": [], "accuracy": []}
                                                  for library in LIBRARIES}
    for contender in contenders:
        contender.fit()
        contender.predict()
    for _ in range(rounds):
        for step in ("fit", "predict"):
            for contender in contenders:
                seconds, outcome = timed(getattr(contender, step))
                results[contender.library][step].append(seconds)
                if step == "predict":
                    results[contender.library]["accuracy"].append(float(outcome))  # type: ignore[arg-type]
    return results


def cell(times: list[float]) -> str:
    """The best time, and the range of the rounds."""
    return f"{min(times):.2f} s ({min(times):.2f}–{max(times):.2f})"


def ratio(theirs: list[float], ours: list[float]) -> str:
    """Best over best, and the range of the rounds' own ratios."""
    rounds = [mine / yours for mine, yours in zip(theirs, ours, strict=True)]
    return f"{min(theirs) / min(ours):.1f}x ({min(rounds):.1f}–{max(rounds):.1f})"


def figure_record(results: list[tuple[str, dict, dict]], master: str, rounds: int) -> charts.Record:
    """The figure record of the table printed: each library's best fit and predict seconds, from
    ``results``, (family, Spark ML's times, nbstream's times) of each family as ``compare`` gave them."""
    def seconds(step: str) -> dict[str, list[float]]:
        return {"nbstream.spark": [round(min(nb[step]), 2) for _, _, nb in results],
                "Spark ML": [round(min(ml[step]), 2) for _, ml, _ in results]}

    where = f"master {master}" if master.startswith("local") else "a standalone cluster"
    return {"title": f"nbstream.spark against Spark ML's NaiveBayes, {where}: seconds, best of {rounds} rounds",
            "groups": [family for family, _, _ in results],
            "panels": [{"title": "fit", "unit": "s", "series": seconds("fit")},
                       {"title": "predict and score the test rows", "unit": "s", "series": seconds("predict")}],
            "note": charts.command_line()}


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
    parser.add_argument("--executor-python", help="the executors' Python (default: this one, for a local master)")
    parser.add_argument("--executor-memory", default="2g")
    charts.add_record_option(parser)
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = args.executor_python or sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("bench_spark").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.log.level", "ERROR")
             .config("spark.executor.memory", args.executor_memory).config("spark.driver.memory", "2g")
             .config("spark.executorEnv.OPENBLAS_NUM_THREADS", "1").getOrCreate())  # one core a task: docs/spark.md
    mnist = load_mnist(args.data_dir)
    with tempfile.TemporaryDirectory() as folder:
        train_path, test_path = write_data(spark, mnist, Path(folder), args.copies)
        train, test = spark.read.parquet(train_path), spark.read.parquet(test_path)
        rows = train.count()
        print(f"Spark {spark.version}, {args.master}, {os.cpu_count()} cores; {rows:,} training rows, "
              f"{test.count():,} test rows; {args.rounds} rounds, the libraries taking turns: best time "
              f"(range of the rounds)\n")
        print("| family | fit: Spark ML | fit: nbstream | ratio | predict: Spark ML | predict: nbstream | ratio "
              "| accuracy: Spark ML | accuracy: nbstream |")
        print("|---|---|---|---|---|---|---|---|---|")
        results = []
        for family in args.only or FAMILIES:
            ml, nb = (compare(family, train, test, args.rounds)[library] for library in LIBRARIES)
            results.append((family, ml, nb))
            print(f"| {family} | {cell(ml['fit'])} | {cell(nb['fit'])} | {ratio(ml['fit'], nb['fit'])} | "
                  f"{cell(ml['predict'])} | {cell(nb['predict'])} | {ratio(ml['predict'], nb['predict'])} | "
                  f"{ml['accuracy'][-1]:.4f} | {nb['accuracy'][-1]:.4f} |", flush=True)
        local = local_engine(train_path, args.rounds)
        print(f"\n`worker train --engine local` (bernoulli, one process, the same files): {local:.2f} s, "
              f"{rows / local:,.0f} rows/s")
    spark.stop()
    if args.record:
        name = "spark" if args.master.startswith("local") else "spark-cluster"
        charts.publish(figure_record(results, args.master, args.rounds), charts.record_file(args.record, name))


if __name__ == "__main__":
    main()
