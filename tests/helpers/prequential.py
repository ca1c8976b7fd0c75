"""Test-then-train by its definition: each row predicted by a copy of the model that learned
the rows before it, one at a time. The library computes the same in bulk."""

import copy

import numpy as np


def one_row_at_a_time(model, X, y, *, classes=None, sample_weight=None, learn=None):
    """(column classes, proba of shape (n_rows, n_classes)) as ``predict_proba_prequential``
    defines them: NaN rows before the model knew a class, 0 for a class not taught yet.
    ``model`` is not changed."""
    model = copy.deepcopy(model)
    n_rows = len(y)
    learn = np.ones(n_rows, dtype=bool) if learn is None else np.asarray(learn)
    scored = []
    for i in range(n_rows):
        if model.is_fitted:
            scored.append(dict(zip(model.classes_.tolist(), model.predict_proba(X[i:i + 1])[0], strict=True)))
        else:
            scored.append(None)
        if learn[i]:
            weight = None if sample_weight is None else np.asarray(sample_weight)[i:i + 1]
            model.partial_fit(X[i:i + 1], np.asarray(y)[i:i + 1], classes=classes if not model.is_fitted else None,
                              sample_weight=weight)
    columns = model.classes_ if model.is_fitted else np.array([])
    proba = np.full((n_rows, len(columns)), np.nan)
    for i, row in enumerate(scored):
        if row is not None:
            proba[i] = [row.get(label, 0.0) for label in columns.tolist()]
    return columns, proba
