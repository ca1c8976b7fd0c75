"""What classes cost a hashed-text model, dense counts against sparse: peak memory, snapshot
bytes, training and prediction rows/s.

Each run is its own process, so its peak RSS is its own. A run trains a multinomial model
over 2^--hash-bits features on synthetic documents (each class has its own words, drawn from a
Zipf law over a large vocabulary, plus common words shared by all classes), one partial_fit
per 1,000 documents, predicts them all (the time to compute the tables included), and writes
the snapshot as `worker train` does.

    python scripts/bench_class_memory.py                  # 1,000 classes, 2^22 features, 50,000 documents
    python scripts/bench_class_memory.py --classes 20 --hash-bits 20   # where the dense table fits too

Dense counts are run only where their (classes x features) tables fit in --dense-limit-mib;
where both run, their predictions are compared (largest difference in log-probability).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

RUN = """
import json, os, resource, sys, time, numpy as np, scipy.sparse as sp
import nbstream
from nbstream.arrow import FeatureSpec
from worker.snapshot_meta import SnapshotMeta, write_snapshot
n_classes, hash_bits, n_documents, counts, out = {n_classes}, {hash_bits}, {documents}, {counts!r}, {out!r}
n_features, words, batch = 2 ** hash_bits, 30, 1_000
rng = np.random.default_rng(0)
y = rng.integers(0, n_classes, n_documents)
own = rng.zipf(1.3, (n_documents, words * 2 // 3)) % 200_000           # a class's own words ...
common = rng.zipf(1.3, (n_documents, words - own.shape[1])) % 20_000  # ... and words every class uses
word_ids = np.concatenate([own * 1_000 + y[:, None], common + 10 ** 9], axis=1)
columns = (word_ids * 0x9E3779B1 % n_features).astype(np.int32)       # hashed
X = sp.csr_matrix((np.ones(columns.size), columns.ravel(), np.arange(0, columns.size + 1, words)),
                  shape=(n_documents, n_features))
X.sum_duplicates()
model = nbstream.MultinomialNB(counts=counts)
start = time.perf_counter()
for s in range(0, n_documents, batch):
    model.partial_fit(X[s:s + batch], y[s:s + batch], classes=np.arange(n_classes) if s == 0 else None)
trained = time.perf_counter() - start
start = time.perf_counter()  # the first prediction computes the tables: counted with predicting
log_proba = model.predict_log_proba(X[:batch])  # kept to compare layouts; the rest is only predicted
for s in range(batch, n_documents, batch):
    model.predict(X[s:s + batch])
predicted = time.perf_counter() - start
np.save(out + ".npy", log_proba)
meta = SnapshotMeta(features=FeatureSpec.text("text", hash_bits=hash_bits).encoder())
path = write_snapshot(model, out + ".nbs", meta)
print(json.dumps({{"rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "snapshot_mib": os.path.getsize(path) / 2 ** 20, "train_rows_s": n_documents / trained,
                  "predict_rows_s": n_documents / predicted, "sparse": bool(model.sparse_counts_)}}))
"""


def run(counts: str, n_classes: int, hash_bits: int, documents: int, folder: Path) -> dict:
    """The figures of one process that trains, predicts and saves such a model."""
    out = str(folder / f"{counts}-{n_classes}")
    code = RUN.format(n_classes=n_classes, hash_bits=hash_bits, documents=documents, counts=counts, out=out)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"})
    if done.returncode:
        sys.exit(f"the {counts} run failed:\n{done.stderr}")
    figures = json.loads(done.stdout)
    figures["log_proba"] = out + ".npy"
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classes", type=int, default=1_000)
    parser.add_argument("--hash-bits", type=int, default=22)
    parser.add_argument("--documents", type=int, default=50_000)
    parser.add_argument("--dense-limit-mib", type=float, default=4_096,
                        help="run dense counts only when their table is at most this large")
    args = parser.parse_args()
    import numpy as np

    dense_mib = args.classes * 2 ** args.hash_bits * 8 / 2 ** 20
    layouts = ["sparse"] + (["dense"] if dense_mib <= args.dense_limit_mib else [])
    print(f"multinomial, {args.classes:,} classes, 2^{args.hash_bits} features, {args.documents:,} documents "
          f"(a dense table: {dense_mib:,.0f} MiB)\n")
    print("| counts | peak RSS MiB | snapshot MiB | train rows/s | predict rows/s |\n|---|---:|---:|---:|---:|")
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for counts in layouts:
            figures = results[counts] = run(counts, args.classes, args.hash_bits, args.documents, Path(folder))
            print(f"| {counts} | {figures['rss_mib']:,.0f} | {figures['snapshot_mib']:,.2f} | "
                  f"{figures['train_rows_s']:,.0f} | {figures['predict_rows_s']:,.0f} |")
        if "dense" in results:
            sparse, dense = results["sparse"], results["dense"]
            difference = np.abs(np.load(sparse["log_proba"]) - np.load(dense["log_proba"])).max()
            print(f"\nsparse / dense: train {sparse['train_rows_s'] / dense['train_rows_s']:.2f}x, predict "
                  f"{sparse['predict_rows_s'] / dense['predict_rows_s']:.2f}x, peak RSS "
                  f"{sparse['rss_mib'] / dense['rss_mib']:.2f}x; largest log-probability difference {difference:.1e}")
        else:
            print(f"\n(dense counts not run: their table would take {dense_mib:,.0f} MiB)")


if __name__ == "__main__":
    main()
