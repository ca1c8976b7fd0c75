"""Concept drift on real data: how fast a model is right again after the stream changes under it.

Two streams change halfway:

- MNIST, label swap: the 60,000 training images in their file order, pixels > 127.5
  (BernoulliNB, binarize=127.5); from image 30,000 on, every 1 is labelled 7 and every 7 is
  labelled 1.
- SMS, vocabulary change: the 5,574 messages of the SMS Spam Collection, shuffled once (seed 0)
  and streamed 4 times over (22,296 messages), word 1- and 2-grams hashed into 2^20 features
  (MultinomialNB); from message 11,148 on, every word of a spam message is replaced by one of
  the 1,000 most frequent ham words, the same one for the same word (chosen by the word's hash),
  so spam's own words vanish and spam speaks in ham's common words.

Three models learn each stream test-then-train (``predict_then_learn``, chunks of 500): one
without a window, one with ``window=W`` (10 buckets), and the same windowed model with ADWIN
watching its errors (``nbstream.drift``), cutting the window to the examples ADWIN holds
(``keep_newest``) at each detection. Each model's errors also feed an ADWIN that only watches,
so that every model has detections to report; only the last model acts on them. Every model
also learns the stream without the change, where any detection is a false alarm.

The table gives, per stream and model: the accuracy over the 5,000 examples before the change
and over all after it; the examples after the change until the accuracy over the last 1,000 (all
after the change) is back within 2 points of the level before; the examples from the change to
the first detection after it; the detections on the unchanged stream (false alarms) and the
accuracy over all of it. The figure shows the accuracy over the last 1,000 examples, with the
change and the detections.

    python scripts/drift_recovery.py --data ../shared/data --out docs/images/drift_recovery.png

Needs the ``plots`` extra (matplotlib) for the figure.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import nbstream
from nbstream.arrow.hashing import hash_tokens, hashed_counts, tokenize
from nbstream.drift import ADWIN, drift_detector

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.datasets import MNIST_FILES, load_mnist, read_sms_spam  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CHUNK = 500  # rows per predict_then_learn call; the detector learns their errors after each
BEFORE = 5_000  # examples before the change that set the level to recover
ROLLING = 1_000  # examples of the rolling accuracy
TOLERANCE = 0.02  # recovered: within 2 points of the level before the change
BUCKETS = 10
SWAPPED_DIGITS = (1, 7)
SMS_PASSES = 4
SMS_SEED = 0
SMS_FILE = Path("sms_spam") / "SMSSpamCollection"
HAM_WORDS = 1_000  # spam speaks in these most frequent ham words after the change


@dataclass(frozen=True)
class Stream:
    """One data set streamed twice: as it is, and changed from example ``change`` on.

    X, X_changed : features, shape (n_examples, n_features) (numpy or CSR)
    y, y_changed : labels, shape (n_examples,)
    """

    name: str
    change_shown: str  # what changes, for the table and the figure
    X: Any
    y: np.ndarray
    X_changed: Any
    y_changed: np.ndarray
    change: int
    make_model: Callable[..., Any]  # the model family with its parameters, given window parameters
    window: int

    @property
    def n_examples(self) -> int:
        return len(self.y)


@dataclass(frozen=True)
class Contender:
    """One way of learning a stream: a window or not, and whether detections cut the window."""

    windowed: bool
    cuts_on_drift: bool

    def model(self, stream: Stream) -> Any:
        return stream.make_model(window=stream.window, window_buckets=BUCKETS) if self.windowed \
            else stream.make_model()

    def name(self, stream: Stream) -> str:
        if not self.windowed:
            return "no window"
        return f"window={stream.window:,}" + (" + ADWIN cut" if self.cuts_on_drift else "")


CONTENDERS = (Contender(windowed=False, cuts_on_drift=False), Contender(windowed=True, cuts_on_drift=False),
              Contender(windowed=True, cuts_on_drift=True))


@dataclass(frozen=True)
class Run:
    """A model's test-then-train pass over a stream: correct, shape (n_examples,), whether each
    example was predicted right before it was learned; detections, the examples (0-based) at
    which ADWIN detected a drift in the errors."""

    correct: np.ndarray
    detections: list[int]


# ---- the streams ---------------------------------------------------------------------------------
def mnist_stream(data_dir: Path) -> Stream:
    """The MNIST training images in file order; from the middle on, two digits swap labels."""
    mnist = load_mnist(data_dir / "mnist")
    images, digits = mnist["train_images"], mnist["train_labels"].astype(np.int64)
    change = len(digits) // 2
    first, second = SWAPPED_DIGITS
    swapped = digits.copy()
    after = swapped[change:]  # a view: writing it writes swapped
    after[digits[change:] == first] = second
    after[digits[change:] == second] = first
    return Stream(f"MNIST, {first} and {second} swap labels", f"labels {first} and {second} swap",
                  images, digits, images, swapped, change, partial(nbstream.BernoulliNB, binarize=127.5),
                  window=10_000)


def spam_in_ham_words(spam: list[str], ham: list[str]) -> list[str]:
    """Each spam text as its tokens (as the hashing finds them), every one replaced by one of the
    HAM_WORDS most frequent tokens of the ham texts by one fixed rule: the one at the token's hash
    modulo HAM_WORDS. Returns a list as long as ``spam``."""
    counts = Counter(tokenize(pa.array(ham))[0].to_pylist())
    vocabulary = np.array([word for word, _ in counts.most_common(HAM_WORDS)])
    tokens, rows = tokenize(pa.array(spam))
    replaced = vocabulary[hash_tokens(tokens) % np.uint64(len(vocabulary))]
    words: list[list[str]] = [[] for _ in spam]
    for row, word in zip(rows.tolist(), replaced.tolist(), strict=True):
        words[row].append(word)
    return [" ".join(row) for row in words]


def sms_stream(data_dir: Path) -> Stream:
    """The SMS messages shuffled once and repeated; from the middle on, spam speaks in ham's words."""
    labels, texts = read_sms_spam(data_dir / SMS_FILE)
    order = np.tile(np.random.default_rng(SMS_SEED).permutation(len(texts)), SMS_PASSES)
    streamed = [texts[i] for i in order]
    y = np.array(labels)[order]
    change = len(order) // 2
    changed = list(streamed)
    spam_after = [i for i in range(change, len(order)) if y[i] == "spam"]
    ham = [text for text, label in zip(texts, labels, strict=True) if label == "ham"]
    for i, text in zip(spam_after, spam_in_ham_words([streamed[i] for i in spam_after], ham), strict=True):
        changed[i] = text
    return Stream("SMS, spam in ham's words", "spam words replaced", hashed_counts(pa.array(streamed), 20, 2), y,
                  hashed_counts(pa.array(changed), 20, 2), y, change, nbstream.MultinomialNB, window=5_000)


# ---- learning ------------------------------------------------------------------------------------
def prequential(model: Any, X: Any, y: np.ndarray, cuts_on_drift: bool) -> Run:
    """Test-then-train over the stream in chunks of CHUNK rows. ADWIN learns each chunk's errors
    after the chunk; with cuts_on_drift, a detection cuts the window to the examples ADWIN still
    holds plus the chunk's rows after the detection."""
    detector = drift_detector("adwin")
    assert isinstance(detector, ADWIN)  # for its width
    correct = np.zeros(len(y), dtype=bool)
    detections: list[int] = []
    for start in range(0, len(y), CHUNK):
        stop = min(start + CHUNK, len(y))
        predicted = model.predict_then_learn(X[start:stop], y[start:stop])
        right = (predicted == y[start:stop]).filled(False)
        correct[start:stop] = right
        keep: int | None = None
        for offset, wrong in enumerate(~right):
            if detector.update(float(wrong)):
                detections.append(start + offset)
                # ADWIN's window now starts where it found the change; the chunk's later rows are newer
                newest = detector.width + (stop - start - 1 - offset)
                keep = newest if keep is None else min(keep, newest)
        if cuts_on_drift and keep is not None:
            model.keep_newest(keep)
    return Run(correct, detections)


# ---- the figures of a run ------------------------------------------------------------------------
def rolling_accuracy(correct: np.ndarray) -> np.ndarray:
    """Accuracy over the last ROLLING examples, shape (n_examples - ROLLING + 1,): entry i is
    that of examples i .. i + ROLLING - 1."""
    sums = np.cumsum(np.concatenate([[0], correct.astype(np.int64)]))
    return (sums[ROLLING:] - sums[:-ROLLING]) / ROLLING


@dataclass(frozen=True)
class Recovery:
    """What a model's run on the changed stream shows, with its run on the unchanged stream."""

    accuracy_before: float  # over the BEFORE examples before the change
    accuracy_after: float  # over every example after the change
    examples_to_recover: int | None  # None: not within the rest of the stream
    detection_delay: int | None  # None: no detection after the change
    false_alarms: int  # detections on the unchanged stream
    accuracy_unchanged: float  # over the whole unchanged stream


def recovery(changed: Run, unchanged: Run, change: int) -> Recovery:
    before = float(changed.correct[change - BEFORE:change].mean())
    rolling = rolling_accuracy(changed.correct)[change:]  # windows of examples all after the change
    back = np.flatnonzero(rolling >= before - TOLERANCE)
    later = [d for d in changed.detections if d >= change]
    return Recovery(before, float(changed.correct[change:].mean()), int(back[0]) + ROLLING if len(back) else None,
                    later[0] - change + 1 if later else None, len(unchanged.detections),
                    float(unchanged.correct.mean()))


def table(results: list[tuple[Stream, Contender, Recovery]]) -> str:
    """The results as markdown: for each stream a heading, then a table of one row per model."""
    lines: list[str] = []
    previous = None
    for stream, contender, found in results:
        if stream is not previous:
            lines += ([""] if lines else []) + [f"### {stream.name}", "",
                                               "| model | before | after | to recover | detection delay | "
                                               "false alarms | no change |", "|---|---:|---:|---:|---:|---:|---:|"]
            previous = stream
        rest = stream.n_examples - stream.change
        recovered = f"{found.examples_to_recover:,}" if found.examples_to_recover is not None \
            else f"not within {rest:,}"
        delay = f"{found.detection_delay:,}" if found.detection_delay is not None else "none"
        lines.append(f"| {contender.name(stream)} | {found.accuracy_before:.4f} | {found.accuracy_after:.4f} | "
                     f"{recovered} | {delay} | {found.false_alarms} | {found.accuracy_unchanged:.4f} |")
    return "\n".join(lines)


def plot(streams: list[tuple[Stream, list[tuple[Contender, Run]]]], out: Path) -> None:
    """One panel per stream: each model's accuracy over the last ROLLING examples against the
    examples seen, the change (dashed) and each model's detections (triangles)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    figure, axes = plt.subplots(len(streams), 1, figsize=(9, 3.4 * len(streams)), squeeze=False)
    for axis, (stream, runs) in zip(axes[:, 0], streams, strict=True):
        for contender, run in runs:
            rolling = rolling_accuracy(run.correct)
            x = np.arange(ROLLING, stream.n_examples + 1)
            line, = axis.plot(x, rolling, linewidth=1.2, label=contender.name(stream))
            detected = np.array([d for d in run.detections if d >= ROLLING - 1], dtype=np.int64)
            axis.plot(detected + 1, rolling[detected - (ROLLING - 1)], "v", color=line.get_color(), markersize=6,
                      markeredgecolor="black", markeredgewidth=0.5)
        axis.axvline(stream.change, color="black", linestyle="--", linewidth=1)
        axis.annotate(stream.change_shown, (stream.change, 0.02), xycoords=("data", "axes fraction"),
                      xytext=(4, 0), textcoords="offset points", fontsize=9)
        axis.set_title(stream.name, fontsize=11)
        axis.set_xlabel("examples")
        axis.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        axis.set_ylabel(f"accuracy, last {ROLLING:,}")
        axis.grid(alpha=0.3)
        axis.legend(loc="lower left", fontsize=9, title="▼ ADWIN detection", title_fontsize=8)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)


def measure(data_dir: Path) -> tuple[list[tuple[Stream, Contender, Recovery]],
                                     list[tuple[Stream, list[tuple[Contender, Run]]]]]:
    """Every model on both streams, changed and unchanged: the results (for ``table``) and each
    stream's runs with the change (for ``plot``)."""
    results, plotted = [], []
    for stream in (mnist_stream(data_dir), sms_stream(data_dir)):
        runs = []
        for contender in CONTENDERS:
            changed = prequential(contender.model(stream), stream.X_changed, stream.y_changed,
                                  contender.cuts_on_drift)
            unchanged = prequential(contender.model(stream), stream.X, stream.y, contender.cuts_on_drift)
            results.append((stream, contender, recovery(changed, unchanged, stream.change)))
            runs.append((contender, changed))
        plotted.append((stream, runs))
    return results, plotted


# ---- the command ---------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, metavar="DIR", default=REPO.parent / "shared" / "data",
                        help="folder holding mnist/ and sms_spam/ (docs/data.md; default: ../shared/data "
                             "beside the checkout)")
    parser.add_argument("--out", type=Path, metavar="PNG", default=REPO / "docs" / "images" / "drift_recovery.png",
                        help="the figure to write (PNG; default: docs/images/drift_recovery.png)")
    args = parser.parse_args()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit("drift_recovery.py: the figure needs matplotlib: pip install 'nbstream[plots]'")
    needed = [args.data / "mnist" / name for name in MNIST_FILES.values()] + [args.data / SMS_FILE]
    missing = [str(path) for path in needed if not path.is_file()]
    if missing:
        sys.exit(f"drift_recovery.py: missing {', '.join(missing)}; docs/data.md says how to fetch MNIST and "
                 f"the SMS Spam Collection (--data names the folder holding mnist/ and sms_spam/).")
    started = time.perf_counter()
    results, plotted = measure(args.data)
    print(table(results))
    plot(plotted, args.out)
    print(f"\nfigure: {args.out} ({time.perf_counter() - started:.1f} s in all, reading the data included)")


if __name__ == "__main__":
    main()
