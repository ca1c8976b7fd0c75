"""A flag means one thing in every command: the options --help shows take one kind of value under
one name everywhere, and a former spelling is still taken, hidden, with a warning."""

from __future__ import annotations

import logging

import pytest
import typer.main

from tests.helpers.cli import invoke
from worker.cli import app
from worker.service import serve as serve_module

SERVE = ("serve", "--bootstrap", "127.0.0.1:9", "--input", "in", "--output", "out", "--group", "g")


def shown_options() -> dict[str, dict[str, tuple[str, bool, bool]]]:
    """flag -> command -> (the kind of value it takes, whether it is a yes/no flag, whether it repeats),
    for every option --help shows."""
    found: dict[str, dict[str, tuple[str, bool, bool]]] = {}
    for name, command in typer.main.get_command(app).commands.items():
        for param in command.params:
            if param.param_type_name != "option" or param.hidden:
                continue
            kind = repr(param.type_descriptor.annotation).replace(" | None", "").replace("typing.Optional", "")
            for flag in (*param.opts, *param.secondary_opts):
                found.setdefault(flag, {})[name] = (kind, bool(param.is_flag), bool(param.multiple))
    return found


def test_a_flag_takes_one_kind_of_value_in_every_command():
    differ = {flag: commands for flag, commands in shown_options().items() if len(set(commands.values())) > 1}
    assert not differ, differ


@pytest.fixture
def served(monkeypatch):
    """The ServeConfigs `worker serve` would run (nothing connects); the logging it configured is undone."""
    configs = []
    monkeypatch.setattr(serve_module, "serve", configs.append)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield configs
    root.handlers[:], root.level = handlers, level


def test_serve_takes_text_features(served):
    result = invoke(*SERVE, "--text-features", "--text-field", "body")
    assert result.exit_code == 0, result.output
    assert served[0].features.text and served[0].fields.text == "body"
    assert "deprecated" not in result.output


@pytest.mark.parametrize("given", [("--text",), ()], ids=["--text", "NBSTREAM_SERVE_TEXT"])
def test_serve_still_takes_its_former_text_flag_with_a_warning(served, given):
    result = invoke(*SERVE, *given, env={} if given else {"NBSTREAM_SERVE_TEXT": "true"})
    assert result.exit_code == 0, result.output
    assert served[0].features.text
    assert "--text (NBSTREAM_SERVE_TEXT) is deprecated: give --text-features (NBSTREAM_TEXT_FEATURES)" in result.output


def test_the_former_text_flag_is_hidden_from_help():
    shown = invoke("serve", "--help", env={"COLUMNS": "200"}).output
    assert "--text-features" in shown and "--text " not in shown and "NBSTREAM_SERVE_TEXT" not in shown
