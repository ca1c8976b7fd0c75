"""Side-by-side training and prediction speed on MNIST: nbstream vs scikit-learn vs River.

Every contender learns the same 10,000-row chunks of the 60,000 training images, in one
process, nbstream and scikit-learn taking turns round by round; the best of --rounds is
reported as rows/s together with the ratio to scikit-learn's partial_fit. River's learn_many
takes pandas frames: the conversion is done beforehand and not timed. Absolute numbers vary
with the machine's load; read the ratios.

--contended runs the same comparison with a busy process on every core, as on a shared
machine, a container with a CPU quota or several replicas per host: a Python loop that never
sleeps, or with --contended numpy a loop of matrix products on numpy's BLAS. BLAS threads are
left as the environment sets them, for both libraries.

    python scripts/bench_core.py --data-dir ../shared/data/mnist
    python scripts/bench_core.py --data-dir ../shared/data/mnist --contended [numpy]
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
        lambda: nbstream.GaussianNB(), lambda sk: sk.GaussianNB(), lambda rv: rv.GaussianNB()),
    "categorical": Contenders(
        lambda: nbstream.CategoricalNB(min_categories=256),
        lambda sk: sk.CategoricalNB(min_categories=256)),
}


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


def race_sklearn(contenders: Contenders, sk, chunks: list[tuple[np.ndarray, np.ndarray]], classes: np.ndarray,
                 X_test: np.ndarray, rounds: int) -> tuple[float, float, float, float, bool]:
    """Best seconds of nbstream and scikit-learn: training on all chunks, then predict_proba on
    ``X_test`` (n_test, n_features); and whether the two predict the same labels."""
    ours_train = trainer(contenders.ours, chunks, classes)
    sklearn_train = trainer(lambda: contenders.sklearn(sk), chunks, classes)
    ours_seconds, sklearn_seconds = best_times([ours_train, sklearn_train], rounds)
    ours_model, sklearn_model = ours_train(), sklearn_train()
    ours_predict, sklearn_predict = best_times([lambda: ours_model.predict_proba(X_test),
                                                lambda: sklearn_model.predict_proba(X_test)], rounds)
    same_predictions = bool((ours_model.predict(X_test) == sklearn_model.predict(X_test)).all())
    return ours_seconds, sklearn_seconds, ours_predict, sklearn_predict, same_predictions


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
    print_table(rows)


def race_all(args: argparse.Namespace, sk, rv, X: np.ndarray, y: np.ndarray, X_test: np.ndarray,
             chunks: list[tuple[np.ndarray, np.ndarray]], classes: np.ndarray) -> list[tuple]:
    """One table row per family asked for: its name, rows/s of each contender and whether
    nbstream and scikit-learn predict the same labels."""
    rows = []
    for name, contenders in FAMILIES.items():
        if args.only and not any(word in name for word in args.only):
            continue
        ours_seconds, sklearn_seconds, ours_predict, sklearn_predict, same_predictions = race_sklearn(
            contenders, sk, chunks, classes, X_test, args.rounds)
        river_train = river_predict = None
        if rv is not None and contenders.river is not None and args.river_rows:
            river_train, river_predict = river_rates(contenders.river, contenders.river_sparse, rv, X, y, X_test,
                                                       args.river_rows)
        rows.append((name, len(y) / ours_seconds, len(y) / sklearn_seconds, river_train,
                     len(X_test) / ours_predict, len(X_test) / sklearn_predict, river_predict,
                     same_predictions))
    return rows


def print_table(rows: list[tuple]) -> None:
    header = ("| model | train rows/s: nbstream | scikit-learn partial_fit | River learn_many | ratio "
              "| predict_proba rows/s: nbstream | scikit-learn | River | ratio | same predictions |")
    print(header)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, ours, theirs, river, ours_p, theirs_p, river_p, same in rows:
        print(f"| {name} | {rate(ours)} | {rate(theirs)} | {rate(river)} | {ours / theirs:.2f}x "
              f"| {rate(ours_p)} | {rate(theirs_p)} | {rate(river_p)} | {ours_p / theirs_p:.2f}x | {same} |")


def rate(rows_per_second: float | None) -> str:
    return "n/a" if rows_per_second is None else f"{rows_per_second:,.0f}"


if __name__ == "__main__":
    main()
