"""The estimators' parameter rules, as data: what each parameter takes (its kind, bounds,
choices, whether None is a value, a default and a line of help) and the relations that tie
parameters together. Each model class declares its rules once (``_parameter_rules``, the part
scikit-learn's ``_parameter_constraints`` plays there); ``check_params`` reads them, and a
command line can too: ``Model.parameter_rules()`` gives what it needs to build its options,
and ``ParameterRules.check`` checks what was given, in the option names it spells.

>>> rules = ParameterRules((ParameterRule("alpha", "float", "Additive smoothing.", bounds=Interval(0, None)),
...                         ParameterRule("window", "int", "Examples kept.", bounds=Interval(1, None),
...                                       optional=True),
...                         ParameterRule("half_life", "float", "Forgetting.", optional=True,
...                                       bounds=Interval(0, None, closed="neither"))),
...                        (Exclusive(("half_life", "window"), "one or the other"),))
>>> rules.problems({"alpha": -1.0, "window": 1.5})
['alpha must be a finite number >= 0; got -1.0.', 'window must be None or an integer >= 1; got 1.5.']
>>> rules.check({"window": 10, "half_life": 5.0}, spell=lambda name: "--" + name.replace("_", "-"))
Traceback (most recent call last):
...
ValueError: --half-life and --window cannot be used together (--half-life=5.0, --window=10): one or the other.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias

import numpy as np

Kind: TypeAlias = Literal["bool", "int", "float", "choice", "probabilities"]
Spell: TypeAlias = Callable[[str], str]  # a parameter's name as messages show it (a command line's option, say)
NO_DEFAULT = inspect.Parameter.empty  # the default of a rule not read from a constructor


def as_named(name: str) -> str:
    """A parameter's name as the library's messages show it: as it is."""
    return name


@dataclass(frozen=True)
class Interval:
    """Numbers from ``low`` to ``high``. An end that is None is unbounded; an end that is a
    string names another parameter, whose value is the bound (no bound while it is None).
    ``closed`` says which ends belong to the interval: "both", "left", "right" or "neither"."""

    low: float | str | None = None
    high: float | str | None = None
    closed: Literal["both", "left", "right", "neither"] = "both"

    @functools.cached_property
    def references(self) -> tuple[str, ...]:
        """The parameters whose values are bounds."""
        return tuple(end for end in (self.low, self.high) if isinstance(end, str))

    def contains(self, number: float, values: Mapping[str, object]) -> bool:
        low = _resolved(self.low, values) if isinstance(self.low, str) else self.low
        high = _resolved(self.high, values) if isinstance(self.high, str) else self.high
        if low is not None and (number < low if self.closed in ("both", "left") else number <= low):
            return False
        return high is None or (number <= high if self.closed in ("both", "right") else number < high)

    def describe(self, values: Mapping[str, object], spell: Spell = as_named) -> str:
        """The bounds in words, e.g. ">= 0", "> 0 and <= 1", ">= window_buckets (10)"."""
        parts = []
        for end, symbol, inclusive in ((self.low, ">", self.closed in ("both", "left")),
                                       (self.high, "<", self.closed in ("both", "right"))):
            if end is None or (isinstance(end, str) and values.get(end) is None):
                continue
            shown = f"{spell(end)} ({values[end]})" if isinstance(end, str) else \
                str(end) if isinstance(end, int) else f"{end:g}"
            parts.append(f"{symbol}{'=' if inclusive else ''} {shown}")
        return " and ".join(parts)


def _resolved(end: str, values: Mapping[str, object]) -> float | None:
    """The value of the parameter an end names (None: no bound)."""
    bound = values.get(end)
    return None if bound is None else float(bound)  # type: ignore[arg-type]  # checked by its own rule first


@dataclass(frozen=True)
class ParameterRule:
    """What one parameter takes.

    name : the constructor's parameter
    kind : "bool" (True or False), "int", "float" (finite), "choice" (one of ``choices``), or
        "probabilities" (non-negative numbers summing to 1, one per class)
    help : one line on what it does
    bounds : the numbers an "int" or "float" may take (None: any)
    choices : the strings a "choice" may take
    optional : None is a value too (``help`` says what it means)
    per_feature : an array of one value per feature is accepted too; its length and values are
        checked against the data when it comes
    why : said after an error, when the bounds alone do not explain themselves
    default : the constructor's default (``parameter_rules()`` fills it in; NO_DEFAULT before)
    """

    name: str
    kind: Kind
    help: str
    bounds: Interval | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False
    per_feature: bool = False
    why: str = ""
    default: object = NO_DEFAULT

    def expects(self, values: Mapping[str, object], spell: Spell = as_named) -> str:
        """What a value must be, in words (``values``: the others, for bounds that name them)."""
        if self.kind == "bool":
            what = "True or False"
        elif self.kind == "choice":
            what = "one of " + ", ".join(self.choices)
        elif self.kind == "probabilities":
            what = "non-negative numbers that sum to 1, one per class"
        else:
            bounds = self.bounds.describe(values, spell) if self.bounds else ""
            what = ("an integer" if self.kind == "int" else "a finite number") + (f" {bounds}" if bounds else "")
        if self.per_feature:
            what += ", or one per feature"
        return f"None or {what}" if self.optional else what

    def problem(self, value: object, values: Mapping[str, object], spell: Spell = as_named) -> str | None:
        """What is wrong with ``value`` (None: nothing), in one line."""
        if (value is None and self.optional) or self._takes(value, values):
            return None
        array = value is not None and not isinstance(value, str) and np.ndim(value) > 0  # type: ignore[arg-type]
        if array and self.per_feature:
            return None
        one = " (one value, not an array)" if array and self.kind in ("int", "float") else ""
        why = f" ({self.why})" if self.why else ""
        return f"{spell(self.name)} must be {self.expects(values, spell)}{one}; got {value!r}{why}."

    def _takes(self, value: object, values: Mapping[str, object]) -> bool:
        if self.kind == "bool":
            return isinstance(value, (bool, np.bool_))
        if self.kind == "choice":
            return isinstance(value, str) and value in self.choices
        if self.kind == "probabilities":
            return _is_distribution(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral if self.kind == "int" else numbers.Real):
            return False
        number = float(value)
        return math.isfinite(number) and (self.bounds is None or self.bounds.contains(number, values))


def _is_distribution(value: object) -> bool:
    """Non-negative numbers along one axis that sum to 1."""
    try:
        numbers_ = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return numbers_.ndim == 1 and bool(np.isfinite(numbers_).all() and (numbers_ >= 0).all()
                                        and np.isclose(numbers_.sum(), 1.0))


class Relation(Protocol):
    """A rule between parameters: ``names`` those it ties together."""

    @property
    def names(self) -> tuple[str, ...]: ...

    def problem(self, values: Mapping[str, object], given: Collection[str] | None,
                spell: Spell = as_named) -> str | None:
        """What is wrong (None: nothing) with these values; ``given``: the names set explicitly,
        None when that is not known (then rules about what was given are not checked)."""


@dataclass(frozen=True)
class Exclusive:
    """At most one of two parameters is set (not None)."""

    names: tuple[str, str]
    why: str

    def problem(self, values: Mapping[str, object], given: Collection[str] | None,
                spell: Spell = as_named) -> str | None:
        first, second = self.names
        if values.get(first) is None or values.get(second) is None:
            return None
        return (f"{spell(first)} and {spell(second)} cannot be used together ({spell(first)}={values[first]!r}, "
                f"{spell(second)}={values[second]!r}): {self.why}.")


@dataclass(frozen=True)
class Requires:
    """A parameter means something only with another set: given without it, it is refused.
    A model cannot tell a default from a value given, so only a caller that knows what was
    given (a command line) checks this."""

    name: str
    needs: str
    why: str

    @property
    def names(self) -> tuple[str, str]:
        return self.name, self.needs

    def problem(self, values: Mapping[str, object], given: Collection[str] | None,
                spell: Spell = as_named) -> str | None:
        if given is None or self.name not in given or values.get(self.needs) is not None:
            return None
        return f"{spell(self.name)} needs {spell(self.needs)}: {self.why}."


@dataclass(frozen=True)
class ParameterRules:
    """The rules of a model's parameters: one per parameter, in the constructor's order once
    read through ``parameter_rules()``, and the relations between them."""

    parameters: tuple[ParameterRule, ...]
    relations: tuple[Relation, ...] = ()

    def __iter__(self) -> Iterator[ParameterRule]:
        return iter(self.parameters)

    @functools.cached_property
    def _checking_order(self) -> tuple[ParameterRule, ...]:
        """The rules, those whose bounds name other parameters last."""
        return tuple(sorted(self.parameters, key=lambda rule: bool(rule.bounds and rule.bounds.references)))

    def __contains__(self, name: object) -> bool:
        return any(rule.name == name for rule in self.parameters)

    def __getitem__(self, name: str) -> ParameterRule:
        for rule in self.parameters:
            if rule.name == name:
                return rule
        raise KeyError(name)

    def extended(self, *parameters: ParameterRule, relations: tuple[Relation, ...] = ()) -> ParameterRules:
        """These rules and more: a parameter of a name already here replaces its rule."""
        replaced = {rule.name: rule for rule in parameters}
        kept = tuple(replaced.pop(rule.name, rule) for rule in self.parameters)
        return ParameterRules(kept + tuple(replaced.values()), self.relations + relations)

    def of_constructor(self, constructor: Callable[..., object]) -> ParameterRules:
        """The rules of the constructor's parameters, in its order, with its defaults;
        ValueError when a parameter has no rule."""
        parameters = [p for p in inspect.signature(constructor).parameters.values() if p.name != "self"]
        missing = [p.name for p in parameters if p.name not in self]
        if missing:
            raise ValueError(f"the parameters {missing} have no rule")
        return ParameterRules(tuple(dataclasses.replace(self[p.name], default=p.default) for p in parameters),
                              self.relations)

    def problems(self, values: Mapping[str, object], *, given: Collection[str] | None = None,
                 spell: Spell = as_named) -> list[str]:
        """What is wrong with these values, one line each: each parameter's own rule (those in
        ``values`` only; a bound naming a parameter found wrong is not checked), then, when they
        all hold, the relations. given : the names set explicitly (None: not known)."""
        found: dict[str, str] = {}
        for rule in self._checking_order:
            if rule.name in values and not (found and rule.bounds and set(rule.bounds.references) & set(found)):
                problem = rule.problem(values[rule.name], values, spell)
                if problem:
                    found[rule.name] = problem
        if found:
            return list(found.values())
        return [problem for relation in self.relations
                for problem in [relation.problem(values, given, spell)] if problem]

    def check(self, values: Mapping[str, object], *, given: Collection[str] | None = None,
              spell: Spell = as_named) -> None:
        """Raise ValueError naming the first thing wrong with these values (see ``problems``)."""
        found = self.problems(values, given=given, spell=spell)
        if found:
            raise ValueError(found[0])
