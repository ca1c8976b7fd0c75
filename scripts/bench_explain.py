"""What explaining predictions costs: ``explain(X, top=10)`` beside ``predict_proba(X)`` of the same
rows, the two taking turns, best of --rounds each.

Cases: the five families on MNIST, with bench_core.py's parameters, each learning the 60,000
training images and explaining the 10,000 test images; and the SMS messages hashed into 2^20 word
features by a text pipeline (MultinomialNB, sparse counts), which learns all 5,574 messages and
explains them: its model on the hashed rows, and ``Pipeline.explain`` (hashing, and naming each
feature by its words) beside ``Pipeline.predict_proba`` (hashing).

    python scripts/bench_explain.py --data-dir ../shared/data    # holds mnist/ and sms_spam/

Absolute times vary with the machine's load; read the ratios.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# One BLAS thread (the models' scoring runs on one anyway): the comparison is of the work, not of threads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pyarrow as pa  # noqa: E402

import nbstream  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from nbstream.arrow import FeatureSpec, Pipeline, PipelineLearner  # noqa: E402
from scripts.bench_core import FAMILIES, best_times  # noqa: E402
from scripts.datasets import default_data_dir, load_mnist, read_sms_spam  # noqa: E402

TOP = 10


@dataclass
class Case:
    data: str
    model: str
    rows: int
    predict: Callable[[], object]
    explain: Callable[[], object]


def mnist_cases(data_dir: Path) -> Iterator[Case]:
    mnist = load_mnist(data_dir / "mnist")
    X_test = mnist["test_images"]
    for name, contenders in FAMILIES.items():
        model = contenders.ours().fit(mnist["train_images"], mnist["train_labels"])
        yield Case("MNIST", name, len(X_test), lambda model=model: model.predict_proba(X_test),
                   lambda model=model: model.explain(X_test, top=TOP))


def sms_cases(data_dir: Path) -> Iterator[Case]:
    labels, texts = read_sms_spam(data_dir / "sms_spam" / "SMSSpamCollection")
    pipeline = Pipeline(nbstream.MultinomialNB(), FeatureSpec.text("text", hash_bits=20).encoder(), label="label")
    PipelineLearner(pipeline).learn(pa.record_batch({"text": texts, "label": labels}))
    model, X = pipeline.model, pipeline.transform(texts)
    data = "SMS, 2^20 hashed"
    yield Case(data, "multinomial (sparse counts), hashed rows", len(texts), lambda: model.predict_proba(X),
               lambda: model.explain(X, top=TOP))
    yield Case(data, "the pipeline: texts, features named", len(texts), lambda: pipeline.predict_proba(texts),
               lambda: pipeline.explain(texts, top=TOP))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"| data | model | rows | `predict_proba` ms | `explain(top={TOP})` ms | ratio |")
    print("|---|---|---:|---:|---:|---:|")
    for case in [*mnist_cases(args.data_dir), *sms_cases(args.data_dir)]:
        case.explain()  # the tables, computed once before either is timed
        predict, explain = best_times([case.predict, case.explain], args.rounds)
        print(f"| {case.data} | {case.model} | {case.rows:,} | {predict * 1e3:.1f} | {explain * 1e3:.1f} "
              f"| {explain / predict:.2f} |", flush=True)


if __name__ == "__main__":
    main()
