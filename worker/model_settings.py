"""A model's own parameters, each declared once as a setting, and a model described in one line by them.

``ModelParameters`` holds the parameters `worker train` and `worker serve` take as options
(``--alpha``, ``--half-life``, ``--window``, ...): each field's setting (``worker/setting.py``) is
its option, environment variable, help and range. The same declarations read a SPEC, a model
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

import dataclasses
import difflib
import math
import typing
from dataclasses import dataclass
from typing import Any

from .config import ModelOptions
from .errors import ConfigError
from .setting import Checked, Setting, setting, settings_of

MODEL_PANEL = "Model parameters"  # --help groups these options under their own heading
KIND_KEY = "model"  # the key of a SPEC that names the kind, as --model does
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


@dataclass(frozen=True)
class ModelParameters(Checked):
    """The parameters of a model given as options (None: the model's default); ``given()`` gives
    those set, as ``ModelOptions`` takes them."""
    alpha: float | None = setting(None, "--alpha", low=0, help="Additive smoothing (default: 1.0).",
                                  panel=MODEL_PANEL)
    binarize: float | None = setting(None, "--binarize", help="Bernoulli: features > this become 1 (default: 0.0).",
                                     panel=MODEL_PANEL)
    fit_prior: bool | None = setting(None, "--fit-prior", negative="--uniform-prior",
                                     help="Learn class priors, or use uniform ones (default: learn).",
                                     panel=MODEL_PANEL)
    norm: bool | None = setting(None, "--norm", negative="--no-norm",
                                help="Complement: normalise the weights (default: no).", panel=MODEL_PANEL)
    var_smoothing: float | None = setting(None, "--var-smoothing", low=0,
                                          help="Gaussian: variance smoothing (default: 1e-9).", panel=MODEL_PANEL)
    min_categories: int | None = setting(None, "--min-categories", low=1,
                                         help="Categorical: minimum categories per feature.", panel=MODEL_PANEL)
    half_life: float | None = setting(None, "--half-life", low=0,
                                      help="Forget: an example's weight halves every N newer examples.",
                                      panel=MODEL_PANEL)
    window: int | None = setting(None, "--window", low=2,
                                 help="Keep a sliding window: the model of exactly the last N examples (less at most "
                                      "a bucket).", panel=MODEL_PANEL)
    window_buckets: int | None = setting(None, "--window-buckets", low=1,
                                         help="The window moves a bucket of N/K examples at a time, and costs K + 1 "
                                              "models' memory (default: 10, or N when smaller).", panel=MODEL_PANEL)
    counts: str | None = setting(None, "--counts",
                                 help="Bernoulli, multinomial, complement: hold the counts as a dense table of classes "
                                      "x features, or sparse, only the (class, feature) pairs seen; auto (default): "
                                      "sparse from 2^16 features on (hashed text). Predictions are the same.",
                                 panel=MODEL_PANEL)

    def given(self) -> dict[str, Any]:
        """The parameters set, by name."""
        return {name: value for name, value in dataclasses.asdict(self).items() if value is not None}


def parse_model_spec(text: str, what: str = "SPEC") -> ModelOptions:
    """The model ``text`` describes (see the module): its kind (None when the SPEC names none) and
    parameters, checked as their options are. ConfigError, one line starting with ``what``, for a
    KEY that is no model setting or is given twice, or a VALUE its setting does not take."""
    settings = {rule.parameter: (f, rule) for f, rule in settings_of(ModelParameters)}
    hints = typing.get_type_hints(ModelParameters)
    kind: str | None = None
    values: dict[str, Any] = {}
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
        elif name in settings:
            f, rule = settings[name]
            values[f.name] = _value(value, hints[f.name], rule, what, key)
        else:
            raise ConfigError(f"{what}: {key!r} is no model setting{_closest(name, [KIND_KEY, *settings])}; a SPEC "
                              f"takes {', '.join([KIND_KEY, *settings])}.")
    try:
        return ModelOptions(kind=kind, **values)
    except ConfigError as error:
        raise ConfigError(f"{what}: {error}") from None


def _value(text: str, annotation: Any, rule: Setting, what: str, key: str) -> Any:
    """The value ``text`` gives a setting of type ``annotation`` (``T | None``), in its range;
    key : the setting as the SPEC names it, for errors."""
    value = _typed(text, annotation, f"{what}: {key}")
    problem = dataclasses.replace(rule, flag=key).problem(value)
    if problem is not None:
        raise ConfigError(f"{what}: {problem}")
    return value


def _typed(text: str, annotation: Any, named: str) -> Any:
    kind = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    if kind is bool:
        if text.lower() not in _TRUE + _FALSE:
            raise ConfigError(f"{named} must be true or false; got {text!r}.")
        return text.lower() in _TRUE
    if kind is str:
        return text
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value):
        noun = "an integer" if kind is int else "a finite number"
        raise ConfigError(f"{named} must be {noun}; got {text!r}.")
    return value


def _closest(word: str, words: list[str]) -> str:
    close = difflib.get_close_matches(word, words, n=1)
    return f" (did you mean {close[0]}?)" if close else ""
