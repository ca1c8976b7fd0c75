"""Optional dependencies, imported by the functions that need them: one line names the extra to install.

>>> try:
...     optional_module("no_such_package", "onnx")
... except MissingDependency as missing:
...     print(missing)
this needs 'no_such_package', which is not installed: pip install 'nbstream[onnx]'
"""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingDependency(ImportError):
    """An optional package is not installed; the message names the extra of nbstream that installs it."""


def optional_module(name: str, extra: str) -> ModuleType:
    """The module ``name``, imported now; MissingDependency naming ``nbstream[extra]`` when it (or a
    package it needs) is not installed."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        missing = error.name or name
        raise MissingDependency(f"this needs {missing!r}, which is not installed: "
                                f"pip install 'nbstream[{extra}]'") from None
