"""A setting declared once: a dataclass that takes another's setting (``setting_like``) takes its
flag, variable, range and check, with a default and words of its own at most; a command that
takes one setting alone (``setting_option``) gets the declaration's option."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import typer.main

from worker.cli import app
from worker.errors import ConfigError
from worker.setting import Checked, field_setting, names, setting, setting_like


@dataclass(frozen=True)
class Owner(Checked):
    every: int = setting(10, "--every", low=1, high=100, help="How often.")


@dataclass(frozen=True)
class Taker(Checked):
    every: int | None = setting_like(Owner, "every", None, help="How often, in the taker's words.")


def test_a_setting_taken_like_another_keeps_its_flag_variable_and_check():
    _, owner = field_setting(Owner, "every")
    _, taker = field_setting(Taker, "every")
    assert (taker.flag, taker.variable, taker.low, taker.high) == (owner.flag, owner.variable, 1, 100)
    assert taker.help == "How often, in the taker's words." and Taker().every is None and Owner().every == 10
    with pytest.raises(ConfigError, match="^--every must be 1 to 100; got 101.$"):
        Taker(101)


def test_a_setting_taken_without_changes_is_the_declaration():
    @dataclass
    class Same:
        every: int = setting_like(Owner, "every")

    assert Same().every == 10 and field_setting(Same, "every")[1] == field_setting(Owner, "every")[1]


@pytest.mark.parametrize("flag, commands", [
    ("--out", ["convert", "export", "merge", "predict", "train"]), ("--input", ["export", "serve"]),
    ("--group", ["export", "serve"]), ("--state-topic", ["export", "serve"]),
    ("--model-name", ["export", "serve", "serve-model"]),
    ("--checkpoint-every", ["serve", "train"]), ("--max-classes", ["serve", "train"]),
    ("--progress", ["evaluate", "predict", "produce", "train"]), ("--json", ["evaluate", "inspect"]),
    ("--http-port", ["serve", "serve-model"]), ("--json-logs", ["serve", "serve-model"]),
])
def test_commands_that_share_a_setting_share_its_variable_and_range(flag, commands):
    found = {name: param for name, command in typer.main.get_command(app).commands.items()
             for param in command.params if param.opts[0] == flag}
    assert sorted(found) == commands
    assert len({(param.envvar, param.min, param.max) for param in found.values()}) == 1


def test_names_are_a_comma_separated_list_blanks_dropped():
    assert names(" a, b ,,c ") == ["a", "b", "c"] and names("") == [] and names(None) == []
