"""MultinomialNB's and ComplementNB's test-then-train by compiled loops gives the numbers of the
numpy path, and of the definition (predict a row, then learn it), whatever the rows, weights,
smoothing and counts."""

import copy

import numpy as np
import pytest
import scipy.sparse

import nbstream
from nbstream.prequential import count_cells
from nbstream.utils import compiled
from nbstream.utils.compiled import SWITCH, compiled_available
from tests.helpers.prequential import one_row_at_a_time

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def every_batch_compiled(monkeypatch):
    """The compiled loops take batches of any size here (by default small ones take numpy)."""
    monkeypatch.setattr(compiled, "SMALLEST_BATCH", 0)


def _both_paths(monkeypatch, model, X, y, **kwargs):
    """(compiled proba, numpy proba) of predict_proba_prequential on copies of ``model``."""
    monkeypatch.setenv(SWITCH, "1")
    assert compiled_available()
    compiled = copy.deepcopy(model).predict_proba_prequential(X, y, **kwargs)
    monkeypatch.setenv(SWITCH, "0")
    assert not compiled_available()
    numpy_path = copy.deepcopy(model).predict_proba_prequential(X, y, **kwargs)
    monkeypatch.setenv(SWITCH, "1")
    assert compiled.classes.tolist() == numpy_path.classes.tolist()
    return compiled.proba, numpy_path.proba


def _whole_counts(rng, n_rows, n_features=30):
    return rng.poisson(0.8, size=(n_rows, n_features)).astype(np.uint8)


MODELS = {"complement": nbstream.ComplementNB, "multinomial": nbstream.MultinomialNB,
          "multinomial, sparse counts": lambda: nbstream.MultinomialNB(counts="sparse")}


def _rows_for(kind, X):
    """MultinomialNB scores dense rows by products (``dense_weights``): its cells are CSR rows."""
    return X if kind == "complement" else scipy.sparse.csr_matrix(X)


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("fitted_first", [False, True])
def test_whole_counts_give_the_numpy_paths_numbers_bit_for_bit(monkeypatch, kind, fitted_first):
    rng = np.random.default_rng(11)
    model = MODELS[kind]()
    if fitted_first:
        model.partial_fit(_rows_for(kind, _whole_counts(rng, 40)), rng.integers(0, 3, size=40))
    X, y = _rows_for(kind, _whole_counts(rng, 300)), rng.integers(0, 5, size=300)  # classes 3, 4 new mid-batch
    compiled, numpy_path = _both_paths(monkeypatch, model, X, y)
    np.testing.assert_array_equal(compiled, numpy_path)
    _, expected = one_row_at_a_time(model, X, y)
    np.testing.assert_allclose(compiled, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["complement", "multinomial"])
@pytest.mark.parametrize("case", ["weights", "fractions", "alpha per feature", "learn mask", "sparse counts",
                                  "csr rows", "one class", "float32"])
def test_every_kind_of_batch_gives_the_definitions_numbers(monkeypatch, kind, case):
    rng = np.random.default_rng(5)
    X = _whole_counts(rng, 120, 12).astype(np.float64)
    y = rng.integers(0, 3, size=120)
    family = nbstream.ComplementNB if kind == "complement" else nbstream.MultinomialNB
    model = family()
    kwargs = {}
    if case == "weights":
        kwargs["sample_weight"] = rng.uniform(0.1, 3.0, size=120)
    elif case == "fractions":
        X = X * rng.uniform(0.1, 2.0, size=X.shape)
    elif case == "alpha per feature":
        model = family(alpha=rng.uniform(0.1, 2.0, size=12))
    elif case == "learn mask":
        kwargs["learn"] = rng.random(120) < 0.6
    elif case == "sparse counts":
        model = family(counts="sparse")
        X = scipy.sparse.csr_matrix(X)
    elif case == "csr rows":
        X = scipy.sparse.csr_matrix(X)
    elif case == "one class":
        y = np.zeros(120, dtype=int)
    elif case == "float32":
        X = X.astype(np.float32)
    warm_weights = kwargs["sample_weight"][:20] if "sample_weight" in kwargs else None
    if kind == "multinomial" and not scipy.sparse.issparse(X):  # dense rows are scored by products, not cells
        X = scipy.sparse.csr_matrix(X)
    model.partial_fit(X[:20], y[:20], sample_weight=warm_weights)
    X, y = X[20:], y[20:]
    kwargs = {name: value[20:] for name, value in kwargs.items()}
    compiled, numpy_path = _both_paths(monkeypatch, model, X, y, **kwargs)
    np.testing.assert_allclose(compiled, numpy_path, rtol=1e-12, atol=1e-14)
    _, expected = one_row_at_a_time(model, X, y, sample_weight=kwargs.get("sample_weight"), learn=kwargs.get("learn"))
    np.testing.assert_allclose(compiled, expected, rtol=1e-9, atol=1e-12)


def test_a_csr_row_with_a_feature_twice_counts_it_once_summed(monkeypatch):
    rows = scipy.sparse.csr_matrix((np.array([1.0, 2.0, 3.0, 1.0]), np.array([0, 2, 0, 1]), np.array([0, 3, 4])),
                                   shape=(2, 3))  # row 0 holds feature 0 twice: 1 + 3
    model = nbstream.ComplementNB().partial_fit(np.array([[1, 0, 2], [0, 3, 1]]), [0, 1])
    compiled, numpy_path = _both_paths(monkeypatch, model, rows, np.array([0, 1]))
    np.testing.assert_allclose(compiled, numpy_path, rtol=1e-12)
    _, expected = one_row_at_a_time(model, rows.toarray(), np.array([0, 1]))
    np.testing.assert_allclose(compiled, expected, rtol=1e-9)


def test_a_table_of_complement_counts_too_large_takes_the_numpy_path(monkeypatch):
    rng = np.random.default_rng(2)
    model = nbstream.ComplementNB().partial_fit(_whole_counts(rng, 30), rng.integers(0, 4, size=30))
    X, y = _whole_counts(rng, 50), rng.integers(0, 4, size=50)
    expected = copy.deepcopy(model).predict_proba_prequential(X, y).proba
    monkeypatch.setattr(count_cells, "MOST_TABLE_VALUES", 4 * 30 - 1)

    def refused(*args, **kwargs):
        raise AssertionError("the compiled loops ran with a table beyond MOST_TABLE_VALUES")
    monkeypatch.setattr(count_cells, "log_count_sums", refused)
    np.testing.assert_array_equal(copy.deepcopy(model).predict_proba_prequential(X, y).proba, expected)


def test_chunks_of_cells_cut_between_rows_give_the_same_sums(monkeypatch):
    rng = np.random.default_rng(9)
    model = nbstream.ComplementNB().partial_fit(_whole_counts(rng, 30), rng.integers(0, 3, size=30))
    X, y = _whole_counts(rng, 200), rng.integers(0, 3, size=200)
    whole = copy.deepcopy(model).predict_proba_prequential(X, y).proba
    monkeypatch.setattr(count_cells, "CHUNK_VALUES", 7)  # fewer than one row's cells: a row a chunk
    np.testing.assert_array_equal(copy.deepcopy(model).predict_proba_prequential(X, y).proba, whole)


def test_norm_keeps_the_numpy_path(monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("norm=True went through the compiled loops")
    monkeypatch.setattr(count_cells, "log_count_sums", refused)
    rng = np.random.default_rng(4)
    model = nbstream.ComplementNB(norm=True).partial_fit(_whole_counts(rng, 30), rng.integers(0, 3, size=30))
    X, y = _whole_counts(rng, 40), rng.integers(0, 3, size=40)
    _, expected = one_row_at_a_time(model, X, y)
    np.testing.assert_allclose(model.predict_proba_prequential(X, y).proba, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, np.dtype(">f8"), np.dtype(">i4"), np.int8, np.bool_])
def test_dense_rows_of_any_dtype_numpy_takes_are_taken(monkeypatch, dtype):
    rng = np.random.default_rng(6)
    X = _whole_counts(rng, 60, 8).astype(dtype)
    y = rng.integers(0, 3, size=60)
    model = nbstream.ComplementNB().partial_fit(X[:10], y[:10])
    compiled, numpy_path = _both_paths(monkeypatch, model, X[10:], y[10:])
    np.testing.assert_allclose(compiled, numpy_path, rtol=1e-12)
