"""`worker train` on Parquet against the hand-written alternative, side by side in one run.

Pixels: MNIST replicated 10x (600,000 rows, ten files), Bernoulli with binarize 127.5:
`worker train` against pyarrow ParquetFile.iter_batches + scikit-learn BernoulliNB.partial_fit.
Memory: peak RSS of `worker train` on 1x and on 10x the data.
Text: the SMS Spam Collection replicated 20x, `worker train --text` (multinomial, 2**20
hashed features) against iter_batches + HashingVectorizer + MultinomialNB.partial_fit.

Every contender runs as its own process (start-up and imports included, timed from outside;
peak RSS from the kernel's accounting of that process). Fastest time and median peak RSS
of --rounds runs.

    python scripts/bench_parquet.py --data-dir ../shared/data [--record docs/figures]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.bench import charts  # noqa: E402
from scripts.datasets import default_data_dir, load_mnist, mnist_table  # noqa: E402

HAND_WRITTEN = "hand-written (iter_batches, partial_fit)"  # the contenders below, in a chart's legend
HAND_WRITTEN_PIXELS = """
import sys, numpy as np, pyarrow.parquet as pq
from sklearn.naive_bayes import BernoulliNB
model = BernoulliNB(alpha=1.0, binarize=127.5)
for path in sys.argv[1:]:
    for batch in pq.ParquetFile(path).iter_batches(batch_size=65536, columns=["pixels", "label"]):
        pixels = batch.column("pixels")
        X = pixels.values.to_numpy().reshape(len(pixels), -1)
        model.partial_fit(X, batch.column("label").to_numpy(), classes=np.arange(10))
print(model.class_count_.sum())
"""

HAND_WRITTEN_TEXT = """
import sys, numpy as np, pyarrow.parquet as pq
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.naive_bayes import MultinomialNB
vectorizer = HashingVectorizer(n_features=2**20, alternate_sign=False, norm=None)
model = MultinomialNB()
for path in sys.argv[1:]:
    for batch in pq.ParquetFile(path).iter_batches(batch_size=65536, columns=["text", "label"]):
        X = vectorizer.transform(batch.column("text").to_pylist())
        model.partial_fit(X, batch.column("label").to_numpy(zero_copy_only=False), classes=["ham", "spam"])
print(model.class_count_.sum())
"""


# The kernel counts what a process had mapped before exec in its peak RSS, and a child forked from
# this process (which holds the data sets) starts with all of it. So each contender is started by a
# small launcher of its own, and the launcher reports the contender's peak RSS and time.
LAUNCHER = """
import os, subprocess, sys, time
start = time.perf_counter()
process = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(process.pid, 0)
print(time.perf_counter() - start, usage.ru_maxrss * 1024)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run(command: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", LAUNCHER, *command], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{command[:4]} failed: {done.stderr[-2000:]}")
    seconds, peak_rss = done.stdout.split()
    return float(seconds), int(peak_rss)


def best(command: list[str], rounds: int) -> tuple[float, int]:
    """Fastest time and median peak RSS over the rounds (RSS varies with allocator timing)."""
    results = [run(command) for _ in range(rounds)]
    return min(r[0] for r in results), sorted(r[1] for r in results)[len(results) // 2]


def replicate(table, folder: Path, copies: int, row_group_size: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(copies):
        paths.append(str(folder / f"part-{i:02d}.parquet"))
        pq.write_table(table, paths[-1], row_group_size=row_group_size)
    return paths


def figure_record(rows: list[tuple], rounds: int) -> charts.Record:
    """The figure record of the table printed: rows/s and peak RSS of each contender on each data set."""
    return {"title": f"Training on Parquet, each contender its own process: fastest of {rounds} runs",
            "groups": [name for name, *_ in rows],
            "panels": [{"title": "rows/s, higher is faster", "unit": "rows/s",
                        "series": {"worker train": [round(row[1]) for row in rows],
                                   HAND_WRITTEN: [round(row[2]) for row in rows]}},
                       {"title": "peak RSS (median), lower is smaller", "unit": "MiB",
                        "series": {"worker train": [round(row[3]) for row in rows],
                                   HAND_WRITTEN: [round(row[4]) for row in rows]}}],
            "nbstream": ["worker train"], "note": charts.command_line()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir(),
                        help="folder holding mnist/ and sms_spam/ (default: $NBSTREAM_DATA_DIR or data/)")
    parser.add_argument("--rounds", type=int, default=3)
    charts.add_record_option(parser)
    args = parser.parse_args()
    import pyarrow as pa

    from scripts.datasets import read_sms_spam

    mnist = load_mnist(args.data_dir / "mnist")
    pixels = mnist_table(mnist["train_images"], mnist["train_labels"])
    labels, texts = read_sms_spam(args.data_dir / "sms_spam" / "SMSSpamCollection")
    sms = pa.table({"label": labels, "text": texts})
    worker = [sys.executable, "-m", "worker", "train"]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        one = replicate(pixels, scratch / "mnist1", 1, 10_000)
        ten = replicate(pixels, scratch / "mnist10", 10, 10_000)
        texts20 = replicate(sms, scratch / "sms20", 20, 10_000)
        pixel_flags = ["--label", "label", "--features", "pixels", "--model", "bernoulli", "--binarize", "127.5",
                       "--fresh", "--no-progress"]
        ours_1x, ours_1x_rss = best(worker + one + pixel_flags + ["--out", str(scratch / "a.nbs")], args.rounds)
        ours_10x, ours_10x_rss = best(worker + ten + pixel_flags + ["--out", str(scratch / "b.nbs")], args.rounds)
        theirs_10x, theirs_10x_rss = best([sys.executable, "-c", HAND_WRITTEN_PIXELS] + ten, args.rounds)
        text_flags = ["--label", "label", "--text", "text", "--model", "multinomial", "--fresh", "--no-progress"]
        ours_text, ours_text_rss = best(worker + texts20 + text_flags + ["--out", str(scratch / "c.nbs")], args.rounds)
        theirs_text, theirs_text_rss = best([sys.executable, "-c", HAND_WRITTEN_TEXT] + texts20, args.rounds)

    n10, n_text = 10 * pixels.num_rows, 20 * sms.num_rows
    mib = 2**20
    rows.append(("MNIST 10x (600,000 rows), bernoulli", n10 / ours_10x, n10 / theirs_10x,
                 ours_10x_rss / mib, theirs_10x_rss / mib))
    rows.append((f"SMS 20x ({n_text:,} rows), multinomial, 2^20 hashed", n_text / ours_text, n_text / theirs_text,
                 ours_text_rss / mib, theirs_text_rss / mib))
    print("| data | worker train rows/s | hand-written rows/s | ratio "
          "| worker peak RSS MiB | hand-written peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, ours, theirs, ours_rss, theirs_rss in rows:
        print(f"| {name} | {ours:,.0f} | {theirs:,.0f} | {ours / theirs:.2f}x | {ours_rss:,.0f} | {theirs_rss:,.0f} |")
    growth = (ours_10x_rss - ours_1x_rss) / ours_1x_rss
    print(f"\nworker train peak RSS: {ours_1x_rss / mib:,.0f} MiB on 1x (60,000 rows, {ours_1x:.2f}s), "
          f"{ours_10x_rss / mib:,.0f} MiB on 10x (600,000 rows, {ours_10x:.2f}s): {growth:+.1%}")
    if args.record:
        charts.publish(figure_record(rows, args.rounds), charts.record_file(args.record, "parquet-training"))


if __name__ == "__main__":
    main()
