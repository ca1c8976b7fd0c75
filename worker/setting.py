"""One setting of a command, declared once: on a config dataclass's field, with its option.

A field made by ``setting(...)`` carries its command-line option, environment variable, help and
the values it takes (``Setting``). From that one declaration come the Typer option (``worker.cli.
options.settings_options``), the environment-variable table of the docs (``scripts/env_table.py``
reads the options), and the check of the value (``check_settings``, called by the dataclass
itself, so a config built in code is held to the same rules as one built from a command line).
A setting that several commands take is declared on one dataclass; the others take it with
``setting_like`` (the same flag, variable, range and check; a help in their own words, at most).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
SETTING = "nbstream.setting"  # the key of a field's metadata that holds its Setting
ENV_PREFIX = "NBSTREAM_"
_SAME = object()  # setting_like: the declaration's default


@dataclass(frozen=True)
class Setting:
    """flag : the option ("--checkpoint-every"); ``negative`` makes it a pair ("--learn/--no-learn");
    env : the environment variable without its prefix (default: the flag's words, "CHECKPOINT_EVERY");
    low, high : the range a number takes (inclusive); choices : the words a text takes;
    parse : turns the text given on the command line into the value (a duration, a list), with
        ``shown`` the default as one would write it (parsed as the value given, and shown by --help);
    many : the option may be given several times: ``parse`` turns the list of their texts into the value;
    panel : the heading --help shows the option under (None: the command's own options);
    aliases : more spellings of the option, shown by --help ("--bootstrap-server");
    deprecated : an old spelling still taken, with its own environment variable (without its prefix),
        hidden from --help: a value given so is used when the option is not given, with a warning."""
    flag: str
    help: str = ""
    env: str | None = None
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    negative: str | None = None
    parse: Callable[[str], Any] | None = None
    shown: str | None = None
    many: bool = False
    panel: str | None = None
    aliases: tuple[str, ...] = ()
    deprecated: tuple[str, str] | None = None

    @property
    def parameter(self) -> str:
        """The option's words as a Python name: the command's parameter ("checkpoint_every")."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def variable(self) -> str:
        return ENV_PREFIX + (self.env or self.flag.lstrip("-").replace("-", "_").upper())

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this setting, if anything (None is always taken: not given)."""
        if value is None:
            return None
        if self.choices is not None and value not in self.choices:
            return f"{self.flag} must be one of {', '.join(self.choices)}; got {value!r}."
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            return f"{self.flag} must be {_range(self.low, self.high)}; got {value!r}."
        return None


class Checked:
    """A config dataclass whose settings are checked as it is made."""

    def __post_init__(self) -> None:
        check_settings(self)


def setting(default: Any = dataclasses.MISSING, flag: str = "", help: str = "", *,
            default_factory: Callable[[], Any] | None = None, **rules: Any) -> Any:
    """A dataclass field whose value a command-line option gives (see ``Setting`` for ``rules``).
    Without a default the option is required."""
    metadata = {SETTING: Setting(flag, help, **rules)}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def setting_like(cls: type, name: str, default: Any = _SAME, help: str | None = None) -> Any:
    """A dataclass field taking the setting of ``cls``'s field ``name``: its flag, variable, range
    and check, and its default unless another is given. ``help`` : the command's own words for it
    (what the option means stays the declaration's)."""
    f, rule = field_setting(cls, name)
    metadata = {SETTING: rule if help is None else dataclasses.replace(rule, help=help)}
    if default is not _SAME:
        return dataclasses.field(default=default, metadata=metadata)
    if f.default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=f.default_factory, metadata=metadata)
    return dataclasses.field(default=f.default, metadata=metadata)


def field_setting(cls: type, name: str) -> tuple[dataclasses.Field[Any], Setting]:
    """The field ``name`` of a config dataclass, with its setting."""
    return next((f, rule) for f, rule in settings_of(cls) if f.name == name)


def settings_of(cls: type) -> list[tuple[dataclasses.Field[Any], Setting]]:
    """The fields of a config dataclass that options give, with their settings, in declaration order."""
    return [(f, f.metadata[SETTING]) for f in dataclasses.fields(cls) if SETTING in f.metadata]


def check_settings(config: Any) -> None:
    """Refuse (ConfigError) a value outside what its setting takes."""
    for f, rule in settings_of(type(config)):
        problem = rule.problem(getattr(config, f.name))
        if problem is not None:
            raise ConfigError(problem)


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"{low:,} to {high:,}"
    return f"at least {low:,}" if low is not None else f"at most {high:,}"


def names(text: str | None) -> list[str]:
    """A comma-separated list of names, blanks dropped (none without a text)."""
    return [name.strip() for name in text.split(",") if name.strip()] if text else []


def parse_duration(text: str, option: str) -> float:
    """Seconds in a duration as a user writes it: 90, 90s, 15m, 36h, 7d (decimals allowed)."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None or float(match[1]) <= 0:
        raise ConfigError(f"{option} must be a positive duration such as 90s, 15m, 36h or 7d; got {text!r}.")
    return float(match[1]) * _UNIT_SECONDS[match[2]]
