"""What one more class costs a hashed-text model: peak memory and snapshot bytes per class.

Each size runs in its own process: a multinomial model over 2^--hash-bits features learns
20 sparse rows per class, predicts, and is written as `worker train` writes its snapshots.
The cost per class is the difference between two class counts, divided by their difference.

    python scripts/bench_class_memory.py [--hash-bits 20] [--classes 10 40]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def measure(n_classes: int, hash_bits: int, folder: Path) -> tuple[float, float]:
    """(peak RSS MiB, snapshot MiB) of a process that trains, predicts and saves such a model."""
    code = f"""
import os, resource, numpy as np, scipy.sparse as sp
import nbstream
from nbstream.arrow import FeatureSpec
from worker.snapshot_meta import SnapshotMeta, write_snapshot
n_classes, n_features, words = {n_classes}, 2 ** {hash_bits}, 20
rows = 20 * n_classes
rng = np.random.default_rng(0)
X = sp.csr_matrix((np.ones(rows * words), rng.integers(0, n_features, rows * words),
                   np.arange(0, rows * words + 1, words)), shape=(rows, n_features))
model = nbstream.MultinomialNB().partial_fit(X, np.arange(rows) % n_classes)
model.predict_proba(X[:10])
path = write_snapshot(model, {str(folder / f"m{n_classes}.nbs")!r},
                      SnapshotMeta(features=FeatureSpec.text("text", hash_bits={hash_bits}).encoder()))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, os.path.getsize(path) / 2 ** 20)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    rss, snapshot = (float(value) for value in done.stdout.split())
    return rss, snapshot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hash-bits", type=int, default=20)
    parser.add_argument("--classes", type=int, nargs=2, default=[10, 40], metavar=("FEW", "MANY"))
    args = parser.parse_args()
    few, many = args.classes
    with tempfile.TemporaryDirectory() as folder:
        (rss_few, snap_few), (rss_many, snap_many) = (measure(n, args.hash_bits, Path(folder)) for n in (few, many))
    per_class = many - few
    print(f"| classes | peak RSS MiB | snapshot MiB |\n|---:|---:|---:|\n| {few} | {rss_few:,.0f} | {snap_few:,.1f} |\n"
          f"| {many} | {rss_many:,.0f} | {snap_many:,.1f} |\n"
          f"| per class | {(rss_many - rss_few) / per_class:.1f} | {(snap_many - snap_few) / per_class:.1f} |")


if __name__ == "__main__":
    main()
