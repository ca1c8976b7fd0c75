"""What --explain asks of a poll: each prediction's weightiest features, as JSON pieces of the
prediction messages (``worker.io.json_predictions``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from nbstream.arrow import FeatureEncoder, Pipeline
from nbstream.naive_bayes import NaiveBayes
from nbstream.utils.ndarrays import Features


@dataclass(frozen=True)
class Explaining:
    """What --explain asks: the features that weigh most in each prediction, ``top`` of them, named
    from the rows as they came (``batch``: the Arrow rows of X, for the words of a text)."""
    top: int
    batch: pa.RecordBatch

    def pieces(self, model: NaiveBayes[Any, Any], encoder: FeatureEncoder, X: Features,
               rows: np.ndarray) -> list[bytes]:
        """The JSON list '[{"feature": ..., "contribution": ...}, ...]' of each of ``rows`` (indices
        into X) by ``model`` ('[]' while it knows no class)."""
        if not len(rows):
            return []
        if not model.is_fitted:
            return [b"[]"] * len(rows)
        explained = Pipeline(model, encoder).explanations_of(self.batch.take(pa.array(rows)), X[rows], self.top)
        return [orjson.dumps(row["features"]) for row in explained.rows]
