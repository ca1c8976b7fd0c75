"""`worker train / predict / evaluate --engine spark`: the same commands run by Apache Spark
(``nbstream.spark``) on anything Spark reads, with the local engine's settings, outputs and
one-line errors.

What cannot mean anything across unordered partitions is refused: forgetting (--half-life),
windows (--window), checkpoints and restarts (--checkpoint-every, --resume).
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbstream.arrow import Pipeline

from ..config import ScoreConfig, TrainConfig
from ..errors import ConfigError, InvalidRowError
from ..setting import setting
from ..snapshot_meta import FilesRead, SnapshotMeta, read_snapshot, write_snapshot
from .spark_console import quiet_unless_asked
from .spark_sources import check_local_paths, first_line, read_parquet, read_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .train import TrainSummary

ENGINES = ("local", "spark")
SKIP_TO_SCORE = "Use --skip-invalid to score the other rows."


@dataclass(frozen=True)
class EngineOptions:
    """Where a batch command runs: ``local`` (this process) or ``spark``, and Spark's settings."""
    engine: str = setting("local", "--engine",
                          help="local (this process) or spark (Apache Spark: pip install 'nbstream\\[spark]').")
    master: str | None = setting(None, "--master",
                                 help="--engine spark: the master URL (local[4], spark://HOST:7077, yarn, sc://HOST "
                                      "for Spark Connect; default: spark-submit's, else local[*]).")
    spark_conf: list[str] = setting(default_factory=list, flag="--spark-conf", many=True, parse=list,
                                    help="--engine spark: a Spark setting KEY=VALUE; repeat the option for more.")
    table: str | None = setting(None, "--table",
                                help="--engine spark: read this catalog table (Hive, Delta, Iceberg) instead of PATHs.")

    def check(self) -> None:
        """Raise ConfigError for settings that contradict each other."""
        if self.engine not in ENGINES:
            raise ConfigError(f"--engine must be local or spark; got {self.engine!r}.")
        if self.engine == "local":
            for option, value in (("--master", self.master), ("--spark-conf", self.spark_conf),
                                  ("--table", self.table)):
                if value:
                    raise ConfigError(f"{option} needs --engine spark.")
        for pair in self.spark_conf:
            if "=" not in pair or not pair.split("=", 1)[0].strip():
                raise ConfigError(f"--spark-conf takes KEY=VALUE; got {pair!r}.")

    @property
    def spark(self) -> bool:
        return self.engine == "spark"

    def check_sources(self, paths: list[str]) -> None:
        """The settings (``check``), and PATHs or --table: exactly one of them. With --engine spark,
        a local path that matches nothing is refused here, before Spark starts: a file: URI, or a
        path without a scheme when the master is local (elsewhere Hadoop's default filesystem may
        resolve it; a Spark Connect server reads its own files)."""
        self.check()
        if self.table and paths:
            raise ConfigError("give PATH... or --table, not both.")
        if not self.table and not paths:
            raise ConfigError("give at least one PATH" + (" (or --table NAME)." if self.spark else "."))
        if self.spark and not self.connect:
            check_local_paths([path for path in paths if "://" in path or self.local_master])

    @property
    def connect(self) -> bool:
        """Whether the master is a Spark Connect server (sc://HOST)."""
        return bool(self.master and self.master.startswith("sc://"))

    @property
    def local_master(self) -> bool:
        """Whether the executors run on this machine: --master local[...], or no master outside spark-submit."""
        if self.master:
            return self.master.startswith("local")
        return "PYSPARK_GATEWAY_PORT" not in os.environ  # not launched by spark-submit: local[*]

    def session(self) -> SparkSession:
        """A Spark session: --master (sc://HOST for Spark Connect), else spark-submit's master, else local[*]."""
        warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
        _require_driver_packages(self.connect)
        from pyspark.sql import SparkSession

        logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)  # errors are reported once
        builder = SparkSession.builder.appName("nbstream")
        settings = dict((key.strip(), value) for key, value in (setting.split("=", 1) for setting in self.spark_conf))
        if self.connect:
            builder = builder.remote(str(self.master))
        else:
            _choose_executor_python(settings.get("spark.pyspark.python"), self.local_master)
            if self.master or self.local_master:
                builder = builder.master(self.master or "local[*]")
                quiet_unless_asked(settings)
                settings.setdefault("spark.ui.showConsoleProgress", "false")  # the command reports what it did
        settings.setdefault("spark.executorEnv.OPENBLAS_NUM_THREADS", "1")  # see docs/spark.md: one core a task
        for key, value in settings.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()

    def read(self, spark: SparkSession, paths: list[str], needed: list[str], label: str | None) -> DataFrame:
        """The rows to work on: a catalog table, or Parquet at the paths (files, directories, globs,
        any URI), read with one type per column (see ``spark_sources``)."""
        return read_table(spark, self.table) if self.table else read_parquet(spark, paths, needed, label)

    @property
    def locates_rows(self) -> bool:
        """Bad rows are named by file and row when the rows come from files."""
        return self.table is None


def _require_driver_packages(connect: bool) -> None:
    """ConfigError naming the install line when this machine lacks what the Spark engine needs:
    pyspark, pandas and pyarrow (which PySpark's Arrow path imports on the driver) and, for
    sc://, the Spark Connect client (its import checks its own dependencies)."""
    try:
        from pyspark.sql.pandas.utils import require_minimum_pandas_version, require_minimum_pyarrow_version

        require_minimum_pandas_version()
        require_minimum_pyarrow_version()
        if connect:
            import pyspark.sql.connect.session  # noqa: F401
    except ImportError as error:
        extra = "spark-connect" if connect else "spark"
        raise ConfigError(f"--engine spark{' with sc://' if connect else ''} cannot start here "
                          f"({first_line(error)}): pip install 'nbstream[{extra}]'.") from None


def _choose_executor_python(configured: str | None, local_master: bool) -> None:
    """The executors' Python, which PySpark takes from PYSPARK_PYTHON (spark-submit turns
    spark.pyspark.python into it; a session started from Python does not): the one given with
    --spark-conf spark.pyspark.python, else this interpreter when the executors run on this
    machine, else whatever the cluster has (``python3``, or PYSPARK_PYTHON as set)."""
    if configured:
        os.environ["PYSPARK_PYTHON"] = configured
    elif local_master:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _batch_size(spark: SparkSession, batch_size: int) -> None:
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch_size))


def train(config: TrainConfig, engine: EngineOptions) -> TrainSummary:
    """Learn every row on Spark and write the snapshot at --out (replacing any)."""
    import nbstream.spark
    from nbstream.spark.frames import holds_vectors

    from .train import TrainSummary

    unordered, one_run = "partitions have no order.", "a Spark job is not restarted part way."
    for option, given, reason in (
            ("--half-life", config.model.half_life is not None, f"forgetting weighs rows by their order; {unordered}"),
            ("--window", config.model.window is not None, f"a window keeps the last rows learned; {unordered}"),
            ("--checkpoint-every", config.checkpoint_every is not None, one_run),
            ("--resume", config.resume is not None, one_run),
            ("--model-key", config.model_key is not None, "a model per key is learned by one process (drop "
                                                           "--engine spark).")):
        if given:
            raise ConfigError(f"{option} cannot be used with --engine spark: {reason}")
    engine.check_sources(config.paths)
    kind = config.model.chosen_kind
    parameters = config.model.parameters()
    config.model.build()  # invalid parameter values are refused before Spark starts
    spark = engine.session()
    started = time.monotonic()
    _batch_size(spark, config.batch_size)
    features = config.features
    df = engine.read(spark, config.paths, [*features.columns, *([features.text] if features.text else []),
                                           config.label], config.label)
    columns = config.features.columns
    spec = config.features.spec(kind, list_column=len(columns) == 1 and columns[0] in df.columns
                                and holds_vectors(df, columns[0]))
    rejects = str(config.rejects_dir) if config.skip_invalid else None
    with _reported("Use --skip-invalid to set such rows aside."):
        pipeline = nbstream.spark.fit(df, label=config.label, features=spec, model=kind,
                                      max_classes=config.max_classes, skip_invalid=config.skip_invalid,
                                      rejects=rejects, locate_rows=engine.locates_rows, **parameters)
    meta = _train_meta(pipeline, config, engine)
    write_snapshot(pipeline.model, config.out, meta)
    return TrainSummary(rows_read=meta.rows_read, rows_learned=pipeline.model.n_examples_seen_,
                        rows_rejected=meta.rows_rejected, seconds=time.monotonic() - started, resumed_from=None,
                        snapshot=config.out, model=pipeline.model, features=pipeline.features)


def _train_meta(pipeline: Pipeline, config: TrainConfig, engine: EngineOptions) -> SnapshotMeta:
    """The snapshot's metadata: the files learned (so that merge can warn of double counting), the
    run (another run's checkpoint never continues it) and the counters."""
    source = pipeline.meta.get("source")
    files = FilesRead(list(source["files"])) if isinstance(source, dict) else None
    run: dict[str, Any] = {"engine": "spark", "sources": {"table": engine.table} if engine.table else config.paths,
                           "label": config.label}
    return SnapshotMeta(features=pipeline.features, label=config.label, source=files, run=run,
                        rows_read=int(pipeline.meta["rows_read"]), rows_rejected=int(pipeline.meta["rows_rejected"]))


def _scored_rows(config: ScoreConfig, engine: EngineOptions, pipeline: Pipeline, label: str | None = None,
                 id_column: str | None = None) -> DataFrame:
    """The rows to score: the pipeline's feature columns, and the label or id column asked for."""
    spark = engine.session()
    _batch_size(spark, config.batch_size)
    needed = [*pipeline.features.columns, *(column for column in (label, id_column) if column)]
    return engine.read(spark, config.paths, needed, label)


def _snapshot_pipeline(config: ScoreConfig, engine: EngineOptions) -> Pipeline:
    engine.check_sources(config.paths)
    model, meta = read_snapshot(config.snapshot)
    return Pipeline(model, meta.features, label=meta.label)


def predict(config: ScoreConfig, out: Path, with_proba: bool, id_column: str | None, engine: EngineOptions) -> int:
    """Write the predictions as Parquet parts under the folder ``out`` (replacing it). Returns rows."""
    import nbstream.spark

    _refuse_replacing_an_input(out, config)
    pipeline = _snapshot_pipeline(config, engine)
    df = _scored_rows(config, engine, pipeline, id_column=id_column)
    with _reported(SKIP_TO_SCORE):
        bad = None if config.skip_invalid else nbstream.spark.first_bad_row(pipeline, df,
                                                                             locate_rows=engine.locates_rows)
        if bad is not None:
            raise InvalidRowError(f"{bad}. {SKIP_TO_SCORE}")
        nbstream.spark.predict(pipeline, df, proba=with_proba, id=id_column, skip_invalid=config.skip_invalid) \
            .write.mode("overwrite").parquet(str(out))
    rows: int = df.sparkSession.read.parquet(str(out)).count()  # from the parts' footers
    if not rows:
        raise ConfigError("the input holds no rows.")
    return rows


def _refuse_replacing_an_input(out: Path, config: ScoreConfig) -> None:
    """The output folder replaces what is there: never the snapshot or a local input."""
    target = out.resolve()
    for source in [str(config.snapshot), *config.paths]:
        if "://" in source:
            continue
        path = Path(source).resolve()
        if path == target or target in path.parents:
            raise ConfigError(f"--out {out} holds an input ({source}); the predictions would replace it.")


def evaluate(config: ScoreConfig, label: str | None, engine: EngineOptions) -> dict[str, Any]:
    """What `worker evaluate` reports, counted by Spark's tasks."""
    import nbstream.spark

    pipeline = _snapshot_pipeline(config, engine)
    label = label or pipeline.label
    if not label:
        raise ConfigError("name the label column with --label.")
    df = _scored_rows(config, engine, pipeline, label=label)
    with _reported(SKIP_TO_SCORE):
        return nbstream.spark.evaluate(pipeline, df, label=label, skip_invalid=config.skip_invalid,
                                       locate_rows=engine.locates_rows)


@contextmanager
def _reported(advice: str) -> Iterator[None]:
    """nbstream.spark's one-line failures as the worker's: a bad row (with ``advice``), and
    executors whose Python cannot run the tasks (also when a lazy DataFrame is written here)."""
    from nbstream.spark import ExecutorEnvironmentError, RowRefused
    from nbstream.spark.executors import explained

    try:
        with explained():
            yield
    except RowRefused as error:
        raise InvalidRowError(f"{error}. {advice}") from None
    except ExecutorEnvironmentError as error:
        raise ConfigError(str(error)) from None
