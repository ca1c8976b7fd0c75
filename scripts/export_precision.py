"""How far the models that leave nbstream predict from nbstream itself, on MNIST.

Each family learns the 60,000 training images (Bernoulli: pixels > 127.5; categorical: pixels in
four levels, pixel // 64, every level a category of every pixel; Gaussian: pixels / 255) and
predicts the 10,000 test images; for each route out (scikit-learn's estimator from ``to_sklearn``,
ONNX Runtime on ``to_onnx`` in float64 and float32) the table gives the largest absolute difference
of a probability from nbstream's and how many predicted labels differ. docs/elsewhere.md shows the table.

    python scripts/export_precision.py --data-dir ../shared/data/mnist
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

import nbstream
from nbstream.naive_bayes import NaiveBayes
from nbstream.onnx import to_onnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.datasets import default_data_dir, load_mnist  # noqa: E402

ROWS_PER_CALL = 1_000  # the Gaussian graph holds rows x classes x features values per call

FAMILIES: dict[str, tuple[Callable[[], NaiveBayes], Callable[[np.ndarray], np.ndarray]]] = {
    "bernoulli": (lambda: nbstream.BernoulliNB(binarize=127.5), lambda pixels: pixels),
    "multinomial": (nbstream.MultinomialNB, lambda pixels: pixels),
    "complement": (nbstream.ComplementNB, lambda pixels: pixels),
    "gaussian": (nbstream.GaussianNB, lambda pixels: pixels / 255.0),
    "categorical": (lambda: nbstream.CategoricalNB(min_categories=4), lambda pixels: pixels // 64),
}


def onnx_predictions(model: NaiveBayes, X: np.ndarray,
                     dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Labels (n,) and probabilities (n, n_classes) of ONNX Runtime on the model's graph."""
    import onnxruntime

    session = onnxruntime.InferenceSession(to_onnx(model, dtype=dtype).SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    parts = [session.run(None, {"X": X[start:start + ROWS_PER_CALL].astype(dtype)})
             for start in range(0, len(X), ROWS_PER_CALL)]
    return np.concatenate([labels for labels, _ in parts]), np.concatenate([proba for _, proba in parts])


def measure(mnist: dict[str, np.ndarray]) -> list[tuple[str, str, float, int]]:
    """(family, route, largest probability difference, labels that differ) for each family and route."""
    rows = []
    for family, (make, features) in FAMILIES.items():
        train = features(mnist["train_images"].reshape(len(mnist["train_images"]), -1))
        test = features(mnist["test_images"].reshape(len(mnist["test_images"]), -1))
        model = make().fit(train, mnist["train_labels"])
        proba, labels = model.predict_proba(test), model.predict(test)
        estimator = nbstream.to_sklearn(model)
        routes = {"to_sklearn": (estimator.predict(test), estimator.predict_proba(test)),
                  "ONNX float64": onnx_predictions(model, test, np.float64),
                  "ONNX float32": onnx_predictions(model, test, np.float32)}
        for route, (their_labels, their_proba) in routes.items():
            rows.append((family, route, float(np.abs(their_proba - proba).max()),
                         int((their_labels != labels).sum())))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=default_data_dir() / "mnist")
    args = parser.parse_args()
    print("| family | route | largest probability difference | labels that differ (of 10,000) |")
    print("|---|---|---|---|")
    for family, route, difference, differing in measure(load_mnist(args.data_dir)):
        print(f"| {family} | {route} | {difference:.1e} | {differing} |")


if __name__ == "__main__":
    main()
