"""What a sliding window costs: rows/s of the same model with window=N (K buckets) and without,
on MNIST pixels and on the SMS messages hashed into 2^20 word and bigram features.

Two ways of learning are timed, each the best of --rounds, windowed and plain interleaved:

- learn: partial_fit on every batch, then one prediction (work a model defers to its first
  read, such as sorting sparse counts or merging a window's buckets, is part of learning);
- prequential: each batch predicted with the model of the batches before it, then learned
  (every read merges the buckets again).

    python scripts/bench_window.py --data-dir ../shared/data    # holds mnist/ and sms_spam/

Absolute rows/s vary with the machine's load; read the ratios.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import nbstream
from nbstream.arrow.hashing import hashed_counts

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.datasets import default_data_dir, load_mnist, read_sms_spam  # noqa: E402


def learn_rate(make: Callable[[], Any], X: Any, y: np.ndarray, batch: int) -> float:
    """rows/s of partial_fit over all batches and one prediction after."""
    model = make()
    start = time.perf_counter()
    for first in range(0, X.shape[0], batch):
        model.partial_fit(X[first:first + batch], y[first:first + batch])
    model.predict(X[:1])
    return X.shape[0] / (time.perf_counter() - start)


def prequential_rate(make: Callable[[], Any], X: Any, y: np.ndarray, batch: int) -> float:
    """rows/s of predicting each batch with the model of the batches before it, then learning it."""
    model = make().partial_fit(X[:batch], y[:batch])
    start = time.perf_counter()
    for first in range(batch, X.shape[0], batch):
        model.predict(X[first:first + batch])
        model.partial_fit(X[first:first + batch], y[first:first + batch])
    return (X.shape[0] - batch) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--buckets", type=int, default=10)
    args = parser.parse_args()
    mnist = load_mnist(args.data_dir / "mnist")
    pixels, digits = mnist["train_images"], mnist["train_labels"]
    labels, texts = read_sms_spam(args.data_dir / "sms_spam" / "SMSSpamCollection")
    words, spam = hashed_counts(pa.array(texts * 4), 20, 2), np.array(labels * 4)  # 22,296 messages
    mnist_cases = [("BernoulliNB", dict(binarize=127.5)), ("MultinomialNB", {}), ("ComplementNB", {}),
                   ("GaussianNB", {}), ("CategoricalNB", {})]
    cases = [  # (data, model, parameters, X, y, batch, window)
        *[("MNIST", name, params, pixels, digits, 1_000, 10_000) for name, params in mnist_cases],
        ("MNIST", "CategoricalNB", {}, pixels, digits, 1_000, 50_000),
        ("MNIST", "MultinomialNB", {}, pixels, digits, 100, 1_000),
        *[("SMS x4, 2^20 hashed", name, {}, words, spam, 500, 2_000)
          for name in ("MultinomialNB", "BernoulliNB", "ComplementNB")],
        ("SMS x4, 2^20 hashed", "MultinomialNB", {}, words, spam, 100, 1_000),
        ("SMS x4, 2^20 hashed", "MultinomialNB", dict(counts="dense"), words, spam, 500, 2_000),
        ("SMS x4, 2^20 hashed", "MultinomialNB", dict(counts="dense"), words, spam, 500, 20_000),
    ]
    print(f"window_buckets={args.buckets}, best of {args.rounds}\n")
    print("| data | model | batch | window | learning | rows/s | with window | ratio |\n"
          "|---|---|---:|---:|---|---:|---:|---:|")
    for data, name, params, X, y, batch, window in cases:
        family = getattr(nbstream, name)
        shown = name + "".join(f" {key}={value}" for key, value in params.items())
        for mode, measure in (("learn", learn_rate), ("prequential", prequential_rate)):
            plain = windowed = 0.0
            for _ in range(args.rounds):
                plain = max(plain, measure(partial(family, **params), X, y, batch))
                windowed = max(windowed, measure(partial(family, window=window, window_buckets=args.buckets, **params),
                                                 X, y, batch))
            print(f"| {data} | {shown} | {batch:,} | {window:,} | {mode} | {plain:,.0f} | {windowed:,.0f} | "
                  f"{windowed / plain:.2f} |", flush=True)


if __name__ == "__main__":
    main()
