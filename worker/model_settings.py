"""The model parameters the commands take, and a model described in one line by them.

The commands take ten of the library's parameters as options (``MODEL_OPTIONS``: ``--alpha``,
``--half-life``, ``--window``, ...); each one's help, default, range and the kinds that take it
are the library's rules (``Model.parameter_rules()``), read by ``worker.cli.options`` to make the
option, and by ``ModelOptions`` to check what was given. The same names read a SPEC, a model
described in one line (``worker serve --challenger NAME=SPEC``): a comma list of ``KEY=VALUE``,
each KEY an option's words without its dashes, ``model`` for the kind::

    >>> spec = parse_model_spec("model=complement,alpha=0.5,norm=true")
    >>> spec.kind, spec.alpha, spec.norm
    ('complement', 0.5, True)
    >>> parse_model_spec("half-life=10000").half_life
    10000.0

A KEY may be written with dashes or underscores (``half-life``, ``half_life``); a parameter left
out takes its default, and a SPEC without ``model`` leaves the kind to the caller (None).
"""

from __future__ import annotations

import difflib
import math
from typing import Any

import nbstream
from nbstream.utils.parameters import ParameterRule

from .config import ModelOptions
from .errors import ConfigError

# The parameters the commands take (the library's others keep their defaults), each with the
# negative of its flag where it has one.
MODEL_OPTIONS = {"alpha": None, "binarize": None, "fit_prior": "--uniform-prior", "norm": "--no-norm",
                 "var_smoothing": None, "min_categories": None, "half_life": None, "window": None,
                 "window_buckets": None, "counts": None}
KIND_KEY = "model"  # the key of a SPEC that names the kind, as --model does
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


def parameter_rule(name: str) -> tuple[ParameterRule, list[str]]:
    """The library's rule of a parameter the commands take, and the kinds that take it."""
    kinds = [kind for kind in nbstream.MODEL_KINDS if name in nbstream.model_class(kind).parameter_rules()]
    return nbstream.model_class(kinds[0]).parameter_rules()[name], kinds


def parse_model_spec(text: str, what: str = "SPEC") -> ModelOptions:
    """The model ``text`` describes (see the module): its kind (None when the SPEC names none) and
    parameters, checked by the library's rules as their options are. ConfigError, one line
    starting with ``what``, for a KEY that is no model setting or is given twice, or a VALUE its
    parameter does not take: each KEY named as written (``alpha``, ``half-life``), not as its option."""
    kind: str | None = None
    values: dict[str, Any] = {}
    written: dict[str, str] = {}  # each parameter's KEY as written, for the errors to name it so
    for item in text.split(","):
        key, equals, value = (part.strip() for part in item.partition("="))
        name = key.replace("-", "_")
        if not (equals and key and value):
            raise ConfigError(f"{what}: {item.strip()!r} is not KEY=VALUE; a SPEC is a comma list of them, such as "
                              "model=complement,alpha=0.5.")
        if name in values or (name == KIND_KEY and kind is not None):
            raise ConfigError(f"{what}: {key} is given twice.")
        if name == KIND_KEY:
            kind = value
        elif name in MODEL_OPTIONS:
            values[name] = _typed(value, parameter_rule(name)[0], f"{what}: {key}")
            written[name] = key
        else:
            raise ConfigError(f"{what}: {key!r} is no model setting{_closest(name, [KIND_KEY, *MODEL_OPTIONS])}; "
                              f"a SPEC takes {', '.join([KIND_KEY, *MODEL_OPTIONS])}.")
    try:
        return ModelOptions(kind=kind, **values, written=written)
    except ConfigError as error:
        raise ConfigError(f"{what}: {error}") from None


def _typed(text: str, rule: ParameterRule, named: str) -> Any:
    """The value ``text`` gives a parameter of the rule's kind (its range is checked with the others)."""
    if rule.kind == "bool":
        if text.lower() not in _TRUE + _FALSE:
            raise ConfigError(f"{named} must be true or false; got {text!r}.")
        return text.lower() in _TRUE
    if rule.kind == "choice":
        return text
    number: type[int] | type[float] = int if rule.kind == "int" else float
    try:
        value = number(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value):
        raise ConfigError(f"{named} must be {'an integer' if number is int else 'a finite number'}; got {text!r}.")
    return value


def _closest(word: str, words: list[str]) -> str:
    close = difflib.get_close_matches(word, words, n=1)
    return f" (did you mean {close[0]}?)" if close else ""
