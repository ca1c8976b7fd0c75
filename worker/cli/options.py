"""How the commands take their options: every one made from a setting declared once on a config
dataclass's field (``worker/setting.py``), the model parameters from the library's rules of them.

``settings_options`` and ``settings_part`` give a command the settings of whole dataclasses (built
inside the command, where an error is one line); ``setting_option`` gives it one setting alone.
Every option can also come from an environment variable NBSTREAM_<OPTION> (shown in --help).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer

import nbstream

from ..io.kafka.options import ConnectionGiven
from ..io.kafka.settings import settings_given
from ..io.registry.settings import RegistryGiven, registry_given
from ..model_settings import MODEL_OPTIONS, parameter_rule
from ..setting import ENV_PREFIX, Setting, field_setting, settings_of

log = logging.getLogger(__name__)


def option_group(name: str, build: Callable[..., Any], options: dict[str, tuple[Any, Any]]
                 ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator adding ``options`` (parameter name -> (type, typer option)) to a command, which
    receives them as one parameter ``name`` = build(**their values); in --help they follow its own."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command)
        own = [p for p in signature.parameters.values() if p.name != name]
        added = [inspect.Parameter(option, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
                 for option, (kind, default) in options.items()]

        @functools.wraps(command)
        def with_group(**values: Any) -> Any:
            group = build(**{option: values.pop(option) for option in options})
            return command(**values, **{name: group})

        with_group.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]
        with_group.__annotations__ = {**{k: v for k, v in command.__annotations__.items() if k != name},
                                      **{option: kind for option, (kind, _) in options.items()}}
        return with_group
    return decorate


@dataclass(frozen=True)
class Given:
    """A config dataclass's options as given, built when asked: inside the command, where its
    errors are reported as one line. ``make`` builds it (the dataclass, or a builder of it);
    ``parsers`` turn the text of the values that are given as text into their value (field name
    -> parse), when it is built too: a value that does not parse is reported as any other error.
    ``old`` : the deprecated spellings given (old -> new, each with its variable), warned of when it
    is built."""
    make: Callable[..., Any]
    values: dict[str, Any]
    parsers: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    old: dict[str, str] = field(default_factory=dict)

    def build(self, **more: Any) -> Any:
        for old, new in self.old.items():
            log.warning(f"{old} is deprecated: give {new}, which means the same")
        parsed = {name: self.parsers[name](value) if name in self.parsers else value
                  for name, value in self.values.items()}
        return self.make(**parsed, **more)


Part = type | tuple[type, Callable[..., Any]]  # a config dataclass, or (it, what builds it from its settings)


def settings_options(name: str, parts: dict[str, Part]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator adding the options of the settings (``worker/setting.py``) of several config
    dataclasses to a command, which receives them as one parameter ``name``: part -> ``Given``.
    A part is a dataclass, or (the dataclass, what builds it from its settings). A setting that
    parses its text and is not given takes the dataclass's default (so does one that may be given
    several times and is not given at all)."""
    options, given = _settings_group(parts)
    return option_group(name, given, options)


def settings_part(name: str, part: Part) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator adding the options of one config dataclass's settings to a command, which
    receives them as one ``Given`` parameter ``name`` (``settings_options`` of one part)."""
    options, given = _settings_group({name: part})
    return option_group(name, lambda **values: given(**values)[name], options)


def _settings_group(parts: dict[str, Part]) -> tuple[dict[str, tuple[Any, Any]], Callable[..., dict[str, Given]]]:
    """The options of the parts' settings (parameter name -> (type, typer option)), and what turns
    their values into a ``Given`` per part."""
    makers = {part: spec if isinstance(spec, tuple) else (spec, spec) for part, spec in parts.items()}
    options: dict[str, tuple[Any, Any]] = {}  # by the option's words (its field's name may be another's too)
    for cls, _ in makers.values():
        hints = typing.get_type_hints(cls)
        for f, rule in settings_of(cls):
            if rule.parameter in options:
                raise ValueError(f"two settings take {rule.flag} ({cls.__name__}.{f.name} and another)")
            options[rule.parameter] = _typer_option(rule, _field_default(f), hints[f.name])
            if rule.deprecated is not None:
                options[_old_parameter(rule)] = _deprecated_option(rule, hints[f.name])

    def given(**values: Any) -> dict[str, Given]:
        return {part: _given(cls, make, values, options) for part, (cls, make) in makers.items()}

    return options, given


def _given(cls: type, make: Callable[..., Any], values: dict[str, Any], options: dict[str, tuple[Any, Any]]
           ) -> Given:
    """The values of ``cls``'s settings among the command's ``values`` (by parameter), as a Given."""
    mine, parsers, old = {}, {}, {}
    for f, rule in settings_of(cls):
        value = values[rule.parameter]
        if rule.deprecated is not None and values[_old_parameter(rule)] is not None:
            old[f"{rule.deprecated[0]} ({ENV_PREFIX}{rule.deprecated[1]})"] = f"{rule.flag} ({rule.variable})"
            if value == options[rule.parameter][1].default:  # the option itself wins
                value = values[_old_parameter(rule)]
        if rule.many and not value:
            value = None
        if rule.parse is not None and value is not None:
            parsers[f.name] = rule.parse
        if rule.parse is None or value is not None:
            mine[f.name] = value
    return Given(make, mine, parsers, old)


def setting_option(cls: type, name: str, default: Any = dataclasses.MISSING, help: str | None = None) -> Any:
    """The Typer option of one setting of ``cls``, for a command that takes it alone (with another
    default, or its own words for it)."""
    f, rule = field_setting(cls, name)
    if rule.deprecated is not None:
        raise ValueError(f"{rule.flag} has a deprecated spelling: give it with settings_part")
    return _typer_option(rule if help is None else dataclasses.replace(rule, help=help),
                         _field_default(f) if default is dataclasses.MISSING else default,
                         typing.get_type_hints(cls)[name])[1]


def _field_default(f: dataclasses.Field[Any]) -> Any:
    """A field's default, ``...`` (required) without one."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return ...


def _typer_option(rule: Setting, default: Any, annotation: Any) -> tuple[Any, Any]:
    """(the parameter's type, its typer.Option) for one setting."""
    if rule.many:  # the texts given, each time the option was
        annotation, default = list[str] | None, None
    elif rule.parse is not None:  # the text given, or shown: the default as one would write it
        annotation, default = str | None, rule.shown
    flag = f"{rule.flag}/{rule.negative}" if rule.negative else rule.flag
    numeric = rule.parse is None  # a parsed value's range is checked once parsed, by the dataclass
    option = typer.Option(default, flag, *rule.aliases, min=rule.low if numeric else None,
                          max=rule.high if numeric else None, envvar=rule.variable, help=rule.help or None,
                          rich_help_panel=rule.panel)
    return annotation, option


def _old_parameter(rule: Setting) -> str:
    """The parameter of a setting's deprecated spelling."""
    return "deprecated_" + rule.parameter


def _deprecated_option(rule: Setting, annotation: Any) -> tuple[Any, Any]:
    """(type, typer.Option) of a setting's deprecated spelling: hidden, None when not given."""
    assert rule.deprecated is not None
    old, variable = rule.deprecated
    return annotation | None, typer.Option(None, old, envvar=ENV_PREFIX + variable, hidden=True)


MODEL_PANEL = "Model parameters"  # --help groups these options under their own headings

SNAPSHOT = typer.Argument(..., help="Snapshot written by worker train.", show_default=False)
PATHS = typer.Argument(..., help="Parquet files, directories or globs.", show_default=False)
_STRICTER_MINIMUM = {"window": 2}  # the commands' own: a window of one example keeps nothing to learn from
_ANNOTATIONS = {"bool": bool | None, "int": int | None, "float": float | None, "choice": str | None}


def _parameter_option(name: str, negative: str | None) -> tuple[Any, Any]:
    """(type, typer.Option) of one model parameter, from the library's rule of it: its help, default,
    least value (where that end is a number that belongs to it), and the kinds that take it. A value
    over the rule's high end (--min-categories past what the tables hold) is refused by the rule
    itself, in one line that gives the bound."""
    rule, kinds = parameter_rule(name)
    takers = "" if len(kinds) == len(nbstream.MODEL_KINDS) else f"{', '.join(k.capitalize() for k in kinds)}: "
    choices = f" ({', '.join(rule.choices)})" if rule.choices else ""
    bounds = rule.bounds
    low = bounds.low if bounds and isinstance(bounds.low, int | float) and bounds.closed in ("both", "left") else None
    low = _STRICTER_MINIMUM.get(name, low)
    flag = f"--{name.replace('_', '-')}" + (f"/{negative}" if negative else "")
    return _ANNOTATIONS[rule.kind], typer.Option(
        None, flag, min=low, envvar=ENV_PREFIX + name.upper(), rich_help_panel=MODEL_PANEL,
        help=f"{takers}{rule.help}{choices}" + ("" if rule.default is None else f" Default: {rule.default}."))


model_parameters = option_group("model_parameters", dict, {
    name: _parameter_option(name, negative) for name, negative in MODEL_OPTIONS.items()})
"""Gives a command the model parameters, received as one dict ``model_parameters`` (ModelOptions' fields)."""


kafka_options = settings_part("kafka", (ConnectionGiven, settings_given))
"""Gives a command the Kafka connection options (``worker/io/kafka/options.py``), received as one
``kafka: Given`` that builds their ``KafkaSettings``."""

registry_options = settings_part("registry", (RegistryGiven, registry_given))
"""Gives a command the Schema Registry options, received as one ``registry: Given`` that builds
their ``RegistrySettings`` (None without --schema-registry)."""
