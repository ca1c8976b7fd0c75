"""What pending examples (delayed labels) cost per partition: bytes per example and the time of
each operation, at 10,000 and 100,000 pending.

A store is filled in polls of 10,000 messages (``add``: the mean time of a poll), then a poll of
10,000 labels for random pending ids joins (``add_labels``), and the store goes to bytes and back
(``to_bytes``, ``from_bytes``); each figure is the best of --rounds. Data: MNIST pixels as Arrow messages give them
(uint8) and as JSON messages give them (float64, stored as uint8), with 10 served probabilities;
the SMS messages hashed into 2^20 word counts as ``worker serve --text-features`` encodes them, with 2. The
datasets are repeated to reach 100,000 rows. A second table gives what commits by chunk
(``pending_segments``) write at a steady state, and a last one compares ways to look 10,000 ids
up among 100,000.

    python scripts/bench_pending.py --data-dir ../shared/data    # holds mnist/ and sms_spam/
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from nbstream.arrow import FeatureSpec  # noqa: E402
from scripts.bench.timing import best_seconds  # noqa: E402
from scripts.datasets import default_data_dir, load_mnist, read_sms_spam  # noqa: E402
from worker.service.pending.segments import SegmentWriter  # noqa: E402
from worker.service.pending.store import PendingExamples  # noqa: E402

POLL = 10_000


def datasets(data_dir: Path, most: int) -> dict[str, tuple[Any, int]]:
    """name -> (rows, classes served), ``most`` rows each."""
    pixels = load_mnist(data_dir / "mnist")["train_images"]
    pixels = np.tile(pixels, (-(-most // len(pixels)), 1))[:most]
    _, texts = read_sms_spam(data_dir / "sms_spam" / "SMSSpamCollection")
    texts = (texts * -(-most // len(texts)))[:most]
    words, _ = FeatureSpec.text("text", hash_bits=20).encoder().encode(pa.record_batch({"text": texts}), learn=False)
    return {"MNIST, uint8 (Arrow)": (pixels, 10), "MNIST, float64 (JSON)": (pixels.astype(np.float64), 10),
            "SMS, 2^20 hashed (CSR)": (words, 2)}


def best_of(rounds: int, work: Callable[[], object]) -> float:
    """The shortest of ``rounds`` runs, in ms."""
    return best_seconds(work, rounds) * 1e3


def measure(X: Any, classes: int, n: int, rounds: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    ids = [f"msg-{i:09d}" for i in range(n)]
    proba = rng.dirichlet(np.ones(classes), n)
    best, offsets = proba.argmax(axis=1), np.arange(n)

    def filled() -> tuple[PendingExamples, float]:
        """A store of n examples, and the mean ms of a poll's ``add``."""
        store, spent = PendingExamples(max_pending=n), 0.0
        for start in range(0, n, POLL):
            rows = slice(start, start + POLL)
            began = time.perf_counter()
            store.add(ids[rows], X[rows], best[rows], proba[rows], 1_000 + start, offsets[rows])
            spent += time.perf_counter() - began
        return store, spent * 1e3 / -(-n // POLL)

    fills = [filled() for _ in range(rounds)]
    store, data = fills[0][0], fills[0][0].to_bytes()
    labeled = [ids[i] for i in rng.choice(n, min(POLL, n), replace=False)]
    copies = [PendingExamples.from_bytes(data, n) for _ in range(rounds)]
    return {"bytes": len(data) / n, "add": min(spent for _, spent in fills),
            "add_labels": best_of(rounds, lambda: copies.pop().add_labels(labeled, np.zeros(len(labeled)), 9_000)),
            "to_bytes": best_of(rounds, store.to_bytes),
            "from_bytes": best_of(rounds, lambda: PendingExamples.from_bytes(data, n))}


def by_chunk(X: Any, classes: int, n: int, polls: int) -> tuple[float, float, float]:
    """Commits by chunk (``pending_segments``) of a store held at n pending: each of ``polls``
    polls adds 10,000 examples (the 10,000 that came first are evicted) and 1,000 labels, then
    commits. (kB written a commit, ms to make them, kB of the directory), means over the polls."""
    rng = np.random.default_rng(0)
    total = n + polls * POLL
    rows = np.arange(total) % X.shape[0]
    proba = rng.dirichlet(np.ones(classes), POLL)
    store, writer = PendingExamples(max_pending=n), SegmentWriter()

    def poll(start: int) -> None:
        ids = list(range(start, start + POLL))
        store.add(ids, X[rows[start:start + POLL]], proba.argmax(axis=1), proba, start, np.arange(POLL))

    for start in range(0, n, POLL):
        poll(start)
    writer.changes(store)
    written, spent, directory = 0, 0.0, 0
    for start in range(n, total, POLL):
        poll(start)
        store.add_labels(rng.integers(start - n, start, 1_000).tolist(), np.zeros(1_000), start)
        began = time.perf_counter()
        changes = writer.changes(store)
        spent += time.perf_counter() - began
        written += len(changes.directory) + sum(len(value) for value in changes.written.values())
        directory += len(changes.directory)
    return written / polls / 1e3, spent / polls * 1e3, directory / polls / 1e3


def lookup_times(ids: list[Any], queries: list[Any], rounds: int) -> dict[str, float]:
    """way -> ms to find where each of ``queries`` sits among ``ids`` (-1: not held)."""
    where = {key: i for i, key in enumerate(ids)}
    array = np.array(ids)
    order = np.argsort(array)
    in_order, held = array[order], pa.array(ids)

    def sorted_lookup() -> np.ndarray:
        asked = np.array(queries)
        at = np.minimum(np.searchsorted(in_order, asked), len(in_order) - 1)
        return np.where(in_order[at] == asked, order[at], -1)

    return {"dict": best_of(rounds, lambda: [where.get(key, -1) for key in queries]),
            "sorted numpy array (searchsorted)": best_of(rounds, sorted_lookup),
            "pyarrow index_in": best_of(rounds, lambda: pc.index_in(pa.array(queries), value_set=held))}


def lookups(rounds: int) -> dict[str, tuple[float, float]]:
    """way -> ms for 10,000 string ids, and for 10,000 integer ids, among 100,000 (half of them held)."""
    held = np.random.default_rng(0).permutation(10**8)[:100_000]
    strings = [f"msg-{i:09d}" for i in held]
    integers = held.tolist()
    by_strings = lookup_times(strings, strings[:5_000] + [f"other-{i}" for i in range(5_000)], rounds)
    by_integers = lookup_times(integers, integers[:5_000] + [-i - 1 for i in range(5_000)], rounds)
    return {way: (by_strings[way], by_integers[way]) for way in by_strings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="10000,100000", help="pending examples per partition, comma-separated")
    parser.add_argument("--polls", type=int, default=20, help="polls committed by chunk at a steady state")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"ms, best of {args.rounds}; add: the mean of a poll of {POLL:,} (merges of chunks included); "
          f"add_labels: a poll of {POLL:,} labels\n")
    print("| data | pending | bytes per example | add | add_labels | to_bytes | from_bytes |\n"
          "|---|---:|---:|---:|---:|---:|---:|")
    data = datasets(args.data_dir, max(sizes))
    figures = {}
    for name, (X, classes) in data.items():
        for n in sizes:
            f = figures[name, n] = measure(X, classes, n, args.rounds)
            print(f"| {name} | {n:,} | {f['bytes']:,.0f} | {f['add']:.1f} | {f['add_labels']:.1f} | "
                  f"{f['to_bytes']:.0f} | {f['from_bytes']:.0f} |", flush=True)
    print(f"\ncommits by chunk at a steady state: each poll adds {POLL:,} examples (evicting as many) and 1,000 "
          f"labels, then commits; means over {args.polls} polls\n\n"
          "| data | pending | kB written a commit | of which the directory | ms to encode |\n|---|---:|---:|---:|---:|")
    for name, (X, classes) in data.items():
        for n in sizes:
            kilobytes, ms, directory = by_chunk(X, classes, n, args.polls)
            full = n * figures[name, n]["bytes"] / 1e3
            print(f"| {name} | {n:,} | {kilobytes:,.0f} (whole store: {full:,.0f}) | {directory:,.1f} | {ms:.0f} |",
                  flush=True)
    print("\nlooking 10,000 ids up among 100,000 (half of them held), ms\n\n| way | string ids | integer ids |\n"
          "|---|---:|---:|")
    for way, (strings, integers) in lookups(args.rounds).items():
        print(f"| {way} | {strings:.2f} | {integers:.2f} |")


if __name__ == "__main__":
    main()
