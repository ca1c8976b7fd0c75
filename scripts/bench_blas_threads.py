"""What one BLAS thread is worth to nbstream's scoring: each model's predict_joint_log_proba and
predict_proba_prequential as released (their matrix products on one BLAS thread, threadpoolctl)
against the same methods unwrapped (on the threads BLAS is set to: by default one per core),
taking turns in one process, quiet and with a busy process on every core (--contended: a Python
loop; --contended numpy: matrix products on numpy's default BLAS threads).

Models learn the 60,000 MNIST training images; they score the 10,000 test images (test-then-train:
the first 2,000, with their labels). Rows/s, best of --rounds.

    python scripts/bench_blas_threads.py --data-dir ../shared/data/mnist [--contended [numpy]]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

import numpy as np

import nbstream
from nbstream.naive_bayes import NaiveBayes

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.bench_core import NEIGHBOURS, best_times, busy_cores  # noqa: E402
from scripts.datasets import default_data_dir, load_mnist  # noqa: E402

MODELS = {"bernoulli (binarize 127.5)": lambda: nbstream.BernoulliNB(binarize=127.5),
          "multinomial": nbstream.MultinomialNB, "gaussian": nbstream.GaussianNB}
PREQUENTIAL_ROWS = 2_000


def race(model: NaiveBayes, X: np.ndarray, y: np.ndarray, rounds: int) -> list[float]:
    """Rows/s of scoring X and of test-then-train on its first rows: as released, then unwrapped."""
    scores, prequential = NaiveBayes.predict_joint_log_proba, NaiveBayes.predict_proba_prequential
    first = X[:PREQUENTIAL_ROWS], y[:PREQUENTIAL_ROWS]
    seconds = best_times([lambda: scores(model, X), lambda: scores.__wrapped__(model, X),
                          lambda: prequential(model, *first), lambda: prequential.__wrapped__(model, *first)], rounds)
    return [len(X) / seconds[0], len(X) / seconds[1], PREQUENTIAL_ROWS / seconds[2], PREQUENTIAL_ROWS / seconds[3]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir() / "mnist",
                        help="folder with the four MNIST .gz files (default: $NBSTREAM_DATA_DIR/mnist)")
    parser.add_argument("--rounds", type=int, default=5, help="repetitions; the best is kept")
    parser.add_argument("--contended", nargs="?", const="python", choices=sorted(NEIGHBOURS),
                        help="keep every core busy with another process while measuring: a Python loop "
                             "(the default) or numpy's matrix products on its default BLAS threads")
    args = parser.parse_args()
    mnist = load_mnist(args.data_dir)
    X, y = mnist["test_images"], mnist["test_labels"]
    load = busy_cores(os.cpu_count() or 1, args.contended) if args.contended else contextlib.nullcontext()
    print("| model | predict: one BLAS thread | BLAS threads as set | ratio "
          "| test-then-train: one BLAS thread | BLAS threads as set | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with load:
        for name, factory in MODELS.items():
            model = factory().fit(mnist["train_images"], mnist["train_labels"])
            one, as_set, one_p, as_set_p = race(model, X, y, args.rounds)
            print(f"| {name} | {one:,.0f} | {as_set:,.0f} | {one / as_set:.1f}x "
                  f"| {one_p:,.0f} | {as_set_p:,.0f} | {one_p / as_set_p:.1f}x |", flush=True)
    if args.contended:
        print(f"With a busy process ({args.contended}) on each of the {os.cpu_count()} cores.")


if __name__ == "__main__":
    main()
