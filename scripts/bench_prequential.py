"""What exact test-then-train scores cost: ``predict_proba_prequential`` (each row scored by the
model that learned the rows before it) against ``predict_proba`` (every row scored by the model
of the poll's start) and against the definition, one row at a time (predict, then partial_fit).

A stream is cut into polls. For each poll the model first scores it, both ways, then learns
it, as the service does; the scoring alone is timed, best of --rounds over the whole stream, in
µs a row. The definition is timed on the first --loop-rows rows of the first poll. Cases: MNIST pixels
(polls of 10,000 rows) and the SMS messages hashed into 2^20 word and bigram features (polls of
4,500), with the families and parameters the service meets, and some it rarely does (many
classes: the SMS messages given 100 random labels).

    python scripts/bench_prequential.py --data-dir ../shared/data    # holds mnist/ and sms_spam/
    python scripts/bench_prequential.py --only MNIST --baseline-root ../before --record docs/figures

With --baseline-root CHECKOUT, the same cases are then timed with that checkout's nbstream (an
earlier commit's worktree, say) in a process of its own, and its test-then-train column is printed
beside this one's. A summary line gives ComplementNB's test-then-train over MultinomialNB's on each
data set. --record PATH writes the figure record of the test-then-train column(s) (PATH, or
PATH/test-then-train-in-bulk.json for a folder) and draws its chart.

Absolute times vary with the machine's load; read the ratios.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# One BLAS thread (unless set): a product split among threads that wait on a busy machine's other
# work takes 10 to 100 times longer, and the comparison would measure that instead.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import nbstream  # noqa: E402
from nbstream.arrow.hashing import hashed_counts  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.bench import charts  # noqa: E402
from scripts.datasets import default_data_dir, load_mnist, read_sms_spam  # noqa: E402


@dataclass
class Case:
    data: str
    make: Callable[[], Any]
    shown: str
    X: Any
    y: np.ndarray
    poll: int
    warm: int  # rows learned before the first poll


@dataclass
class Timing:
    prequential: float  # µs a row
    predict: float
    one_by_one: float


def scoring_times(case: Case, rounds: int) -> tuple[float, float]:
    """(µs a row of predict_proba_prequential, of predict_proba): each poll is scored both ways,
    back to back (so that the machine's load weighs on both alike) by twins of the model that
    learned the polls before it, then learned. Each pays what learning left to the first read
    (folding new sparse pairs in; predict_proba, refreshing the tables), as in a service."""
    best = [np.inf, np.inf]
    for _ in range(rounds):
        model = case.make().partial_fit(case.X[:case.warm], case.y[:case.warm])
        elapsed, rows = [0.0, 0.0], 0
        for first in range(case.warm, case.X.shape[0] - case.poll + 1, case.poll):
            X, y = case.X[first:first + case.poll], case.y[first:first + case.poll]
            twin = copy.deepcopy(model)
            for which, score in enumerate((lambda: model.predict_proba_prequential(X, y),  # noqa: B023
                                           lambda: twin.predict_proba(X))):  # noqa: B023
                start = time.perf_counter()
                score()
                elapsed[which] += time.perf_counter() - start
            rows += X.shape[0]
            model.partial_fit(X, y)
        best = [min(b, e / rows * 1e6) for b, e in zip(best, elapsed, strict=True)]
    return best[0], best[1]


def one_by_one_time(case: Case, n_rows: int) -> float:
    """µs a row of the definition: predict a row, learn it, then the next."""
    model = case.make().partial_fit(case.X[:case.warm], case.y[:case.warm])
    model = copy.deepcopy(model)
    start = time.perf_counter()
    for i in range(case.warm, case.warm + n_rows):
        model.predict_proba(case.X[i:i + 1])
        model.partial_fit(case.X[i:i + 1], case.y[i:i + 1])
    return (time.perf_counter() - start) / n_rows * 1e6


def cases(data_dir: Path) -> list[Case]:
    mnist = load_mnist(data_dir / "mnist")
    pixels, digits = mnist["train_images"], mnist["train_labels"]
    labels, texts = read_sms_spam(data_dir / "sms_spam" / "SMSSpamCollection")
    words, spam = hashed_counts(pa.array(texts * 4), 20, 2), np.array(labels * 4)  # 22,296 messages
    topics = np.random.default_rng(0).integers(0, 100, size=len(spam))
    mnist_case = dict(data="MNIST", X=pixels, y=digits, poll=10_000, warm=5_000)
    sms_case = dict(data="SMS, 2^20 hashed", X=words, y=spam, poll=4_500, warm=1_000)
    return [
        Case(make=lambda: nbstream.BernoulliNB(binarize=127.5), shown="BernoulliNB binarize=127.5", **mnist_case),
        Case(make=nbstream.MultinomialNB, shown="MultinomialNB", **mnist_case),
        Case(make=nbstream.ComplementNB, shown="ComplementNB", **mnist_case),
        Case(make=nbstream.MultinomialNB, shown="MultinomialNB (sparse counts)", **sms_case),
        Case(make=lambda: nbstream.MultinomialNB(counts="dense"), shown="MultinomialNB counts=dense", **sms_case),
        Case(make=nbstream.BernoulliNB, shown="BernoulliNB (sparse counts)", **sms_case),
        Case(make=nbstream.ComplementNB, shown="ComplementNB (sparse counts)", **sms_case),
        Case(make=lambda: nbstream.ComplementNB(norm=True), shown="ComplementNB norm=True", **sms_case),
        Case(make=nbstream.MultinomialNB, shown="MultinomialNB, 100 random classes",
             **{**sms_case, "y": topics, "data": "SMS, 2^20 hashed"}),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loop-rows", type=int, default=300)
    parser.add_argument("--only", default="", help="run the cases whose model or data contains this text")
    parser.add_argument("--baseline-root", type=Path, help="another checkout, timed after this one")
    parser.add_argument("--json", action="store_true", help="print each case's timing as a JSON line instead")
    charts.add_record_option(parser)
    args = parser.parse_args()
    timings = {}
    if not args.json:
        print(f"best of {args.rounds}; µs a row (the definition: {args.loop_rows} rows)\n")
        print("| data | model | poll | predict_proba | predict_proba_prequential | ratio | one row at a time "
              "| speed-up |\n|---|---|---:|---:|---:|---:|---:|---:|")
    for case in cases(args.data_dir):
        if args.only not in f"{case.data} {case.shown}":
            continue
        prequential, predict = scoring_times(case, args.rounds)
        timing = Timing(prequential, predict, one_by_one_time(case, args.loop_rows))
        timings[case.data, case.shown] = timing
        if args.json:
            print(json.dumps([case.data, case.shown, timing.prequential, timing.predict, timing.one_by_one]),
                  flush=True)
            continue
        print(f"| {case.data} | {case.shown} | {case.poll:,} | {timing.predict:.2f} | {timing.prequential:.2f} | "
              f"{timing.prequential / timing.predict:.1f} | {timing.one_by_one:.0f} | "
              f"{timing.one_by_one / timing.prequential:.0f} |", flush=True)
    if args.json:
        return
    print_complement_over_multinomial(timings, "this checkout")
    baseline = baseline_timings(args) if args.baseline_root else None
    if baseline is not None:
        name = checkout_name(args.baseline_root)
        print(f"\n| data | model | predict_proba_prequential: this checkout | {name} | ratio |")
        print("|---|---|---:|---:|---:|")
        for (data, shown), timing in timings.items():
            before = baseline.get((data, shown))
            print(f"| {data} | {shown} | {timing.prequential:.2f} | "
                  f"{'-' if before is None else f'{before.prequential:.2f}'} | "
                  f"{'-' if before is None else f'{before.prequential / timing.prequential:.2f}x'} |")
        print_complement_over_multinomial(baseline, name)
    if args.record:
        charts.publish(prequential_record(timings, baseline, args), charts.record_file(args.record,
                                                                                        "test-then-train-in-bulk"))


def print_complement_over_multinomial(timings: dict[tuple[str, str], Timing], name: str) -> None:
    """ComplementNB's test-then-train time over MultinomialNB's, on each data set timed with both."""
    for data in dict.fromkeys(data for data, _ in timings):
        complement = timings.get((data, "ComplementNB")) or timings.get((data, "ComplementNB (sparse counts)"))
        multinomial = timings.get((data, "MultinomialNB")) or timings.get((data, "MultinomialNB (sparse counts)"))
        if complement and multinomial:
            print(f"{name}, {data}: ComplementNB's test-then-train {complement.prequential:.2f} µs a row, "
                  f"{complement.prequential / multinomial.prequential:.2f}x MultinomialNB's "
                  f"({multinomial.prequential:.2f})")


def baseline_timings(args: argparse.Namespace) -> dict[tuple[str, str], Timing]:
    """The same cases timed with the checkout at --baseline-root: this script run with its nbstream
    first on the path, printing JSON lines."""
    command = [sys.executable, str(Path(__file__).resolve()), "--data-dir", str(args.data_dir), "--rounds",
               str(args.rounds), "--loop-rows", str(args.loop_rows), "--only", args.only, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=7200,
                          env={**os.environ, "PYTHONPATH": str(args.baseline_root.resolve())})
    timings = {}
    for line in done.stdout.splitlines():
        data, shown, prequential, predict, one_by_one = json.loads(line)
        timings[data, shown] = Timing(prequential, predict, one_by_one)
    return timings


def checkout_name(root: Path) -> str:
    """The short commit of the checkout at ``root`` (its folder's name where git cannot tell)."""
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else root.name


def prequential_record(timings: dict[tuple[str, str], Timing], baseline: dict[tuple[str, str], Timing] | None,
                       args: argparse.Namespace) -> charts.Record:
    """The figure record of the test-then-train column: µs a row of each case, this checkout's and
    the baseline's."""
    keys = list(timings)
    series = {"nbstream": [round(timings[key].prequential, 2) for key in keys]}
    record: charts.Record = {"title": "Test-then-train in bulk: µs a row, lower is faster", "unit": "µs a row",
                             "groups": [f"{data}: {shown}" for data, shown in keys], "note": charts.command_line()}
    if baseline is not None:
        name = f"previous release ({checkout_name(args.baseline_root)})"
        series[name] = [round(baseline[key].prequential, 2) if key in baseline else None for key in keys]
    record["series"] = series
    return record


if __name__ == "__main__":
    main()
