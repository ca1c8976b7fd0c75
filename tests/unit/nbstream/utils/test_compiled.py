"""Whether the compiled loops are taken: numba installed and importable, and not switched off."""

import importlib.util
import sys

import numpy as np
import pytest

from nbstream.utils import compiled


@pytest.fixture
def fresh():
    compiled._numba_usable.cache_clear()
    yield
    compiled._numba_usable.cache_clear()


def test_a_numba_that_does_not_import_gives_the_numpy_paths_and_one_warning(monkeypatch, fresh):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())  # "installed"
    monkeypatch.setitem(sys.modules, "numba", None)  # but `import numba` raises ImportError
    with pytest.warns(RuntimeWarning, match="numba is installed but does not import"):
        assert not compiled.compiled_available()
    assert not compiled.compiled_available()  # decided once: no second warning (pytest would fail on it)


def test_switched_off_by_the_environment(monkeypatch, fresh):
    pytest.importorskip("numba")
    monkeypatch.setenv(compiled.SWITCH, "0")
    assert not compiled.compiled_available()
    monkeypatch.setenv(compiled.SWITCH, "1")
    assert compiled.compiled_available()


def doubled(x):
    return 2 * x


def summed_doubles(values):
    total = 0.0
    for value in values:
        total += doubled(value)
    return total


def test_a_kernel_sees_the_compiled_functions_it_uses(fresh):
    pytest.importorskip("numba")
    kernel = compiled.Kernel(summed_doubles, uses=(doubled,))
    assert kernel(np.array([1.0, 2.5])) == 7.0
    assert type(kernel._compiled).__name__ == "CPUDispatcher"  # compiled, not the Python function


def test_small_work_takes_the_numpy_paths_without_importing_numba(fresh, monkeypatch):
    def refused():
        raise AssertionError("numba imported for a small batch")
    monkeypatch.setattr(compiled, "_numba_usable", refused)
    assert not compiled.worth_compiling(compiled.SMALLEST_BATCH - 1)
    import pyarrow as pa

    from nbstream.arrow.hashing import hashed_counts
    assert hashed_counts(pa.array(["a few words", "of text"]), 12).sum() == 4  # "a" is too short a token


def test_large_work_takes_the_compiled_loops(fresh):
    pytest.importorskip("numba")
    assert compiled.worth_compiling(compiled.SMALLEST_BATCH)
