"""Side-by-side training and prediction speed on MNIST: nbstream vs scikit-learn vs River.

Every contender learns the same 10,000-row chunks of the 60,000 training images, in one
process, nbstream and scikit-learn taking turns round by round; the best of --rounds is
reported as rows/s together with the ratio to scikit-learn's partial_fit. River's learn_many
takes pandas frames: the conversion is done beforehand and not timed. Absolute numbers vary
with the machine's load; read the ratios.

predict_proba is also timed beside its float64 floor, taking turns with it on one BLAS thread:
the matrix product a model's scores cannot do without, of the test rows (already float64) with a
table of their shape, X @ W.T for the count models, two of them (x² and x) for GaussianNB, and the
product of the one-hot rows (a column per category) for CategoricalNB. "÷ floor" is nbstream's time
over the product's: 1.0 means the scores cost what the product alone costs.

--contended runs the same comparison with a busy process on every core, as on a shared
machine, a container with a CPU quota or several replicas per host: a Python loop that never
sleeps, or with --contended numpy a loop of matrix products on numpy's BLAS. BLAS threads are
left as the environment sets them, for both libraries.

    python scripts/bench_core.py --data-dir ../shared/data/mnist
    python scripts/bench_core.py --data-dir ../shared/data/mnist --contended [numpy]

--record PATH writes the figure records of the two tables (estimators.json: rows/s; scoring-floor.json:
predict_proba's time over its float64 floor) into the folder PATH and draws their charts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import nbstream

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.bench import charts  # noqa: E402
from scripts.bench.timing import best_seconds  # noqa: E402
from scripts.datasets import default_data_dir, load_mnist  # noqa: E402

CHUNK = 10_000


@dataclass
class Contenders:
    """One family, built with the same parameters in each library."""
    ours: Callable
    sklearn: Callable
    river: Callable | None = None
    river_sparse: bool = False  # River's multinomial and complement learn_many need sparse frames
    floor: str = "product"  # the float64 product its scores cannot do without: see float64_floor
    inputs: Callable[[np.ndarray], np.ndarray] = lambda pixels: pixels  # what the family learns of the pixels


FAMILIES = {
    "bernoulli (binarize 127.5)": Contenders(
        lambda: nbstream.BernoulliNB(alpha=1.0, binarize=127.5),
        lambda sk: sk.BernoulliNB(alpha=1.0, binarize=127.5),
        lambda rv: rv.BernoulliNB(alpha=1.0, true_threshold=127.5)),
    "multinomial": Contenders(
        lambda: nbstream.MultinomialNB(), lambda sk: sk.MultinomialNB(),
        lambda rv: rv.MultinomialNB(), river_sparse=True),
    "complement": Contenders(
        lambda: nbstream.ComplementNB(), lambda sk: sk.ComplementNB(),
        lambda rv: rv.ComplementNB(), river_sparse=True),
    "gaussian": Contenders(
        lambda: nbstream.GaussianNB(), lambda sk: sk.GaussianNB(), lambda rv: rv.GaussianNB(), floor="two products"),
    "categorical": Contenders(
        lambda: nbstream.CategoricalNB(min_categories=256),
        lambda sk: sk.CategoricalNB(min_categories=256), floor="one-hot product"),
    "categorical (4 categories: pixel // 64)": Contenders(
        lambda: nbstream.CategoricalNB(min_categories=4),
        lambda sk: sk.CategoricalNB(min_categories=4), floor="one-hot product", inputs=lambda pixels: pixels // 64),
}
MOST_FLOOR_BYTES = 2 << 30  # a floor whose float64 rows would take more (256 categories: 16 GB) is not timed


def best_times(actions: list[Callable], rounds: int) -> list[float]:
    """The best seconds of each action over ``rounds`` rounds, the actions taking turns in each."""
    best = [float("inf")] * len(actions)
    for _ in range(rounds):
        for i, action in enumerate(actions):
            start = time.perf_counter()
            action()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


# What a busy process runs: a Python loop that never sleeps, or matrix products on numpy's BLAS
# with its default threads (as another replica or task on the host would).
NEIGHBOURS = {"python": "while True: pass",
              "numpy": "import numpy as np\nmatrix = np.random.rand(300, 300)\nwhile True: matrix @ matrix"}


@contextlib.contextmanager
def busy_cores(n_processes: int, neighbour: str = "python") -> Iterator[None]:
    """``n_processes`` processes that each keep a core busy running ``NEIGHBOURS[neighbour]``,
    for the length of the block."""
    spinners = [subprocess.Popen([sys.executable, "-c", NEIGHBOURS[neighbour]]) for _ in range(n_processes)]
    try:
        time.sleep(0.5)  # until they run
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def trainer(factory: Callable, chunks: list[tuple[np.ndarray, np.ndarray]], classes: np.ndarray) -> Callable:
    """A function that builds a fresh model with ``factory`` and partial_fits it on every (X, y) chunk."""
    def run():
        model = factory()
        for X_chunk, y_chunk in chunks:
            model.partial_fit(X_chunk, y_chunk, classes=classes)
        return model
    return run


@dataclass
class Race:
    """One family's best seconds: training on every chunk, then predict_proba on the test rows,
    for nbstream and scikit-learn; the float64 floor of the scores (None: not timed); and
    whether the two libraries predict the same labels."""
    ours_train: float
    sklearn_train: float
    ours_predict: float
    sklearn_predict: float
    floor: float | None
    same_predictions: bool


def race_sklearn(contenders: Contenders, sk, chunks: list[tuple[np.ndarray, np.ndarray]], classes: np.ndarray,
                 X_test: np.ndarray, rounds: int) -> Race:
    """nbstream and scikit-learn taking turns: training on all chunks, then predict_proba on
    ``X_test`` (n_test, n_features) beside its float64 floor."""
    ours_train = trainer(contenders.ours, chunks, classes)
    sklearn_train = trainer(lambda: contenders.sklearn(sk), chunks, classes)
    ours_seconds, sklearn_seconds = best_times([ours_train, sklearn_train], rounds)
    ours_model, sklearn_model = ours_train(), sklearn_train()
    predictions = [lambda: ours_model.predict_proba(X_test), lambda: sklearn_model.predict_proba(X_test)]
    floor = float64_floor(contenders.floor, X_test, len(classes))
    ours_predict, sklearn_predict, *floor_seconds = best_times(predictions + ([floor] if floor else []), rounds)
    same_predictions = bool((ours_model.predict(X_test) == sklearn_model.predict(X_test)).all())
    return Race(ours_seconds, sklearn_seconds, ours_predict, sklearn_predict,
                floor_seconds[0] if floor_seconds else None, same_predictions)


def float64_floor(kind: str, X_test: np.ndarray, n_classes: int) -> Callable[[], object] | None:
    """The product a family's scores of X_test (n_test, n_features) cannot do without, on one BLAS
    thread, its float64 inputs made beforehand: "product" X @ W.T with W (n_classes, n_features);
    "two products", of x² and of x; "one-hot product", of the rows coded a column per category
    (n_test, n_features x n_categories). None when those rows would take over MOST_FLOOR_BYTES."""
    from threadpoolctl import threadpool_limits

    n_categories = int(X_test.max()) + 1 if kind == "one-hot product" else 1
    if X_test.size * n_categories * 8 > MOST_FLOOR_BYTES:
        return None
    if kind == "one-hot product":
        rows = np.zeros((X_test.shape[0], X_test.shape[1] * n_categories))
        rows[np.arange(X_test.shape[0])[:, None], np.arange(X_test.shape[1]) * n_categories + X_test] = 1.0
    else:
        rows = X_test.astype(np.float64)
    weights = np.random.default_rng(0).random((n_classes, rows.shape[1]))
    squares = rows * rows if kind == "two products" else None

    def product() -> object:
        with threadpool_limits(limits=1, user_api="blas"):
            if squares is not None:
                return squares @ weights.T, rows @ weights.T
            return rows @ weights.T
    return product


def river_rates(factory: Callable, sparse: bool, rv, X: np.ndarray, y: np.ndarray, X_test: np.ndarray,
                n_rows: int) -> tuple[float, float]:
    """River's rows/s for learn_many on the first ``n_rows`` of ``X`` (n_samples, n_features) and
    for predict_proba_many on 2,000 test rows; the conversion to pandas frames (sparse ones if
    ``sparse``) is not timed."""
    import pandas as pd
    import scipy.sparse

    def frame(array):
        if sparse:
            return pd.DataFrame.sparse.from_spmatrix(scipy.sparse.csr_matrix(array))
        return pd.DataFrame(array)

    frames = [(frame(X[i:i + CHUNK]), pd.Series(y[i:i + CHUNK])) for i in range(0, n_rows, CHUNK)]
    river_model = factory(rv)

    def river_learn():
        for features, labels in frames:
            river_model.learn_many(features, labels)
    test_frame = frame(X_test[:2_000])
    learn_rate = n_rows / best_seconds(river_learn, 1)
    predict_rate = 2_000 / best_seconds(lambda: river_model.predict_proba_many(test_frame), 1)
    return learn_rate, predict_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir() / "mnist",
                        help="folder with the four MNIST .gz files (default: $NBSTREAM_DATA_DIR/mnist)")
    parser.add_argument("--rounds", type=int, default=3, help="repetitions; the best is kept")
    parser.add_argument("--river-rows", type=int, default=10_000,
                        help="River is timed on this many training rows (it is much slower); 0: not at all")
    parser.add_argument("--only", nargs="*", help="family names to run (default: all)")
    parser.add_argument("--contended", nargs="?", const="python", choices=sorted(NEIGHBOURS),
                        help="keep every core busy with another process while measuring: a Python loop "
                             "(the default) or numpy's matrix products on its default BLAS threads")
    charts.add_record_option(parser)
    args = parser.parse_args()

    import sklearn.naive_bayes as sk
    try:
        import river.naive_bayes as rv  # brings pandas and scipy, which river_rates uses
    except ImportError:
        print("River not installed (pip install -e '.[bench]'): River columns are n/a")
        rv = None
    warnings.simplefilter("ignore")  # River's pandas code warns about fragmented frames

    mnist = load_mnist(args.data_dir)
    X, y, X_test = mnist["train_images"], mnist["train_labels"], mnist["test_images"]
    chunks = [(X[i:i + CHUNK], y[i:i + CHUNK]) for i in range(0, len(y), CHUNK)]
    classes = np.arange(10)

    load = busy_cores(os.cpu_count() or 1, args.contended) if args.contended else contextlib.nullcontext()
    with load:
        rows = race_all(args, sk, rv, X, y, X_test, chunks, classes)
    if args.contended:
        print(f"With a busy process ({args.contended}) on each of the {os.cpu_count()} cores.")
    print_tables(rows)
    if args.record:
        charts.publish(rates_record(rows), charts.record_file(args.record, "estimators"))
        charts.publish(floor_record(rows), charts.record_file(args.record, "scoring-floor"))


@dataclass
class FamilyRates:
    """One family's rows/s (None: not measured)."""
    name: str
    race: Race
    n_train: int
    n_test: int
    river_train: float | None
    river_predict: float | None

    @property
    def train(self) -> tuple[float, float]:
        return self.n_train / self.race.ours_train, self.n_train / self.race.sklearn_train

    @property
    def predict(self) -> tuple[float, float]:
        return self.n_test / self.race.ours_predict, self.n_test / self.race.sklearn_predict


def race_all(args: argparse.Namespace, sk, rv, X: np.ndarray, y: np.ndarray, X_test: np.ndarray,
             chunks: list[tuple[np.ndarray, np.ndarray]], classes: np.ndarray) -> list[FamilyRates]:
    """The rates of each family asked for."""
    rows = []
    for name, contenders in FAMILIES.items():
        if args.only and not any(word in name for word in args.only):
            continue
        inputs = contenders.inputs
        family_chunks = [(inputs(X_chunk), y_chunk) for X_chunk, y_chunk in chunks]
        race = race_sklearn(contenders, sk, family_chunks, classes, inputs(X_test), args.rounds)
        river_train = river_predict = None
        if rv is not None and contenders.river is not None and args.river_rows:
            river_train, river_predict = river_rates(contenders.river, contenders.river_sparse, rv, inputs(X), y,
                                                     inputs(X_test), args.river_rows)
        rows.append(FamilyRates(name, race, len(y), len(X_test), river_train, river_predict))
    return rows


def print_tables(rows: list[FamilyRates]) -> None:
    """Three tables, a family a row: training, predict_proba, and predict_proba beside its float64 floor."""
    for header, rates, river in (("train rows/s: nbstream | scikit-learn partial_fit | River learn_many",
                                  [row.train for row in rows], [row.river_train for row in rows]),
                                 ("predict_proba rows/s: nbstream | scikit-learn | River",
                                  [row.predict for row in rows], [row.river_predict for row in rows])):
        print(f"| model | {header} | ratio |\n|---|---:|---:|---:|---:|")
        for row, (ours, theirs), river_rate in zip(rows, rates, river, strict=True):
            print(f"| {row.name} | {rate(ours)} | {rate(theirs)} | {rate(river_rate)} | {ours / theirs:.2f}x |")
        print()
    print("| model | predict_proba rows/s | float64 floor rows/s | time ÷ the floor's |")
    print("|---|---:|---:|---:|")
    for row in rows:
        floor = row.race.floor
        print(f"| {row.name} | {rate(row.predict[0])} | {rate(None if floor is None else row.n_test / floor)} "
              f"| {'n/a' if floor is None else f'{row.race.ours_predict / floor:.2f}'} |")
    differing = [row.name for row in rows if not row.race.same_predictions]
    print("\nSame predicted labels as scikit-learn: " + ("every family" if not differing
                                                        else "all but " + ", ".join(differing)))


def rates_record(rows: list[FamilyRates]) -> charts.Record:
    """The figure record of the rows/s: learning and predict_proba, a panel each."""
    def series(rates: list[tuple[float, float]], river: list[float | None]) -> dict[str, list]:
        return {"nbstream": [round(ours) for ours, _ in rates], "scikit-learn": [round(theirs) for _, theirs in rates],
                "River": [None if value is None else round(value) for value in river]}
    return {"title": "The estimators on MNIST: rows/s, higher is faster", "groups": [row.name for row in rows],
            "panels": [{"title": "learning (partial_fit, River: learn_many)", "unit": "rows/s",
                        "series": series([row.train for row in rows], [row.river_train for row in rows])},
                       {"title": "predict_proba", "unit": "rows/s",
                        "series": series([row.predict for row in rows], [row.river_predict for row in rows])}],
            "note": charts.command_line()}


def floor_record(rows: list[FamilyRates]) -> charts.Record:
    """The figure record of predict_proba's time over its float64 floor, for the families timed beside one."""
    floored = [row for row in rows if row.race.floor is not None]
    return {"title": "predict_proba against its float64 floor, one BLAS thread: time ÷ the product's",
            "unit": "x", "groups": [row.name for row in floored], "reference": 1,
            "series": {"nbstream ÷ float64 floor": [round(row.race.ours_predict / row.race.floor, 2)
                                                    for row in floored]},
            "note": charts.command_line()}


def rate(rows_per_second: float | None) -> str:
    return "n/a" if rows_per_second is None else f"{rows_per_second:,.0f}"


if __name__ == "__main__":
    main()
