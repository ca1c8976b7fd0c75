"""What the small choices inside the library save: each numpy idiom the code chose, timed against
the obvious alternative on data of the shapes the library meets (best of --rounds, one process).
The code's comments say which is faster; docs/performance.md gives the figures of a run.

    python scripts/bench_choices.py
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads: one core, as the library's kernels run

import numpy as np  # noqa: E402
import scipy.sparse  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.bench.timing import best_seconds  # noqa: E402


def choices(rng: np.random.Generator) -> list[tuple[str, str, Callable[[], object], str, Callable[[], object]]]:
    """(where, chosen, its action, alternative, its action) for each choice."""
    keys = rng.integers(0, 200, 1_000_000)
    table = np.zeros((20, 1 << 16))
    rows, columns = rng.integers(0, 20, 1_000_000), rng.integers(0, 1 << 16, 1_000_000)
    values = rng.random(1_000_000)
    small = rng.random((10, 784))
    text = scipy.sparse.csr_matrix((np.ones(60_000), rng.integers(0, 1 << 20, 60_000), np.arange(0, 60_001, 30)),
                                   shape=(2_000, 1 << 20))  # 30 hashed words a row
    log_weights = rng.random((20, 1 << 20))
    row_major = np.ascontiguousarray(log_weights.T)
    pixels = rng.integers(0, 256, (10_000, 784), dtype=np.uint8) * (rng.random((10_000, 784)) < 0.2)
    counts = rng.random((100, 1 << 16)) * (rng.random((100, 1 << 16)) < 0.05)

    def pad() -> object:
        padded = np.zeros((11, 784))
        padded[:10] = small
        return padded

    return [
        ("prequential.moments_and_categories: argsort of keys", "as uint8",
         lambda: np.argsort(keys.astype(np.uint8), kind="stable"),
         "as int64", lambda: np.argsort(keys, kind="stable")),
        ("utils.blocked.add_class_sums: np.add.at", "one flat index",
         lambda: np.add.at(table.reshape(-1), rows * table.shape[1] + columns, values),
         "a (row, column) pair", lambda: np.add.at(table, (rows, columns), values)),
        ("stats._pad_rows: 10 x 784 to 11 rows", "zeros and a copy", pad,
         "np.pad", lambda: np.pad(small, [(0, 1), (0, 0)])),
        ("discrete.weights_for_rows: CSR text @ weights", "(n_features, n_classes) row-major",
         lambda: text @ row_major, "a transposed view", lambda: text @ log_weights.T),
        ("prequential.counts: nonzeros of uint8 pixels", "of a bool mask", lambda: np.flatnonzero(pixels != 0),
         "of the pixels", lambda: np.flatnonzero(pixels)),
        ("snapshot: nonzeros of sparse float counts", "of a bool mask", lambda: np.flatnonzero(counts != 0),
         "of the floats", lambda: np.flatnonzero(counts)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="repetitions; the best is kept")
    args = parser.parse_args()
    print("| where | chosen | µs | alternative | µs | alternative ÷ chosen |")
    print("|---|---|---:|---|---:|---:|")
    for where, chosen, action, other, alternative in choices(np.random.default_rng(0)):
        mine, theirs = best_seconds(action, args.rounds), best_seconds(alternative, args.rounds)
        print(f"| {where} | {chosen} | {mine * 1e6:,.0f} | {other} | {theirs * 1e6:,.0f} | {theirs / mine:.1f}x |")


if __name__ == "__main__":
    main()
