"""--window and --window-buckets on worker train and serve, --drift-detector and --on-drift on serve:
they reach the model and the service's config, and settings that contradict each other are
refused at start in one line with exit status 2."""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import nbstream
from tests.helpers.cli import invoke
from tests.helpers.serve_config import serve_config
from worker.config import ModelOptions
from worker.errors import ConfigError
from worker.service import serve as serve_module
from worker.service.config import ServeConfig

SERVE = ("serve", "--bootstrap", "127.0.0.1:9", "--input", "in", "--output", "out", "--group", "g")


@pytest.fixture
def rows(tmp_path):
    """A Parquet file of 3,000 rows of counts x, y and a label, and its columns."""
    rng = np.random.default_rng(5)
    table = pa.table({"x": rng.integers(0, 4, 3_000), "y": rng.integers(0, 4, 3_000),
                      "label": rng.choice(["a", "b", "c"], 3_000)})
    pq.write_table(table, tmp_path / "rows.parquet")
    return tmp_path / "rows.parquet", table


@pytest.fixture
def served(monkeypatch):
    """The ServeConfigs `worker serve` would run (nothing connects); the logging it configured is undone."""
    configs: list[ServeConfig] = []
    monkeypatch.setattr(serve_module, "serve", configs.append)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield configs
    root.handlers[:], root.level = handlers, level


def one_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_train_with_a_window_writes_the_model_of_the_last_rows(rows, tmp_path):
    path, table = rows
    out = tmp_path / "m.nbs"
    result = invoke("train", path, "--label", "label", "--features", "x,y", "--out", out, "--window", 1000)
    assert result.exit_code == 0, result.output
    model = nbstream.load(out)
    assert (model.window, model.window_buckets, model.n_examples_in_window_) == (1000, 10, 1000)
    X = np.column_stack([table["x"].to_numpy(), table["y"].to_numpy()])[-1000:]
    fresh = nbstream.MultinomialNB().partial_fit(X, table["label"].to_numpy()[-1000:], classes=model.classes_)
    order = np.searchsorted(fresh.classes_, model.classes_)
    np.testing.assert_array_equal(model.feature_count_, fresh.feature_count_[order])
    shown = invoke("inspect", out)
    assert "MultinomialNB(window=1000)" in shown.output and "examples seen:  3,000" in shown.output


@pytest.mark.parametrize("options, expected", [
    (("--window", 5), (5, 5)),  # fewer examples than the default buckets: one a bucket
    (("--window", 500, "--window-buckets", 4), (500, 4)),
    (("--window", 500, "--model", "gaussian"), (500, 10)),
])
def test_the_window_options_reach_the_model(options, expected, rows, tmp_path):
    result = invoke("train", rows[0], "--label", "label", "--features", "x,y", "--out", tmp_path / "m.nbs", *options)
    assert result.exit_code == 0, result.output
    model = nbstream.load(tmp_path / "m.nbs")
    assert (model.window, model.window_buckets) == expected


def test_the_window_comes_from_the_environment_too(rows, tmp_path):
    result = invoke("train", rows[0], "--label", "label", "--features", "x,y", "--out", tmp_path / "m.nbs",
                    env={"NBSTREAM_WINDOW": "300", "NBSTREAM_WINDOW_BUCKETS": "3"})
    assert result.exit_code == 0, result.output
    model = nbstream.load(tmp_path / "m.nbs")
    assert (model.window, model.window_buckets) == (300, 3)


@pytest.mark.parametrize("options, line", [
    (("--window", 10, "--half-life", 5), "error: --half-life and --window cannot be used together (--half-life=5.0, "
                                         "--window=10): a model either forgets gradually or keeps a window."),
    (("--window-buckets", 5), "error: --window-buckets needs --window: it sets how finely the window moves."),
    (("--window", 10, "--window-buckets", 20), "error: --window must be None or an integer >= --window-buckets (20); "
                                               "got 10."),
])
def test_train_refuses_window_options_that_contradict_in_one_line(options, line, rows, tmp_path):
    result = invoke("train", rows[0], "--label", "label", "--features", "x,y", "--out", tmp_path / "m.nbs", *options)
    assert one_line(result) == line
    assert not (tmp_path / "m.nbs").exists()


@pytest.mark.parametrize("value", ["1", "0", "-5", "1.5"])
def test_a_window_of_fewer_than_two_examples_is_refused(value, rows, tmp_path):
    result = invoke("train", rows[0], "--label", "label", "--features", "x,y", "--out", tmp_path / "m.nbs",
                    "--window", value)
    assert result.exit_code == 2 and "Invalid value for '--window'" in " ".join(result.output.split())


def test_serve_takes_the_window_and_the_drift_options_into_its_config(served):
    assert invoke(*SERVE, "--window", 500, "--drift-detector", "adwin", "--on-drift", "reset-to-window").exit_code == 0
    assert invoke(*SERVE, env={"NBSTREAM_DRIFT_DETECTOR": "page-hinkley"}).exit_code == 0
    assert invoke(*SERVE).exit_code == 0
    windowed, from_env, default = served
    assert (windowed.drift.detector, windowed.drift.on_drift) == ("adwin", "reset-to-window")
    model = windowed.model.options().build()
    assert (model.window, model.window_buckets) == (500, 10)
    assert (from_env.drift.detector, from_env.drift.on_drift) == ("page-hinkley", "report")
    assert (default.drift, default.model.options().window) == (None, None)


@pytest.mark.parametrize("options, message", [
    (("--on-drift", "reset-to-window", "--drift-detector", "adwin"),
     "--on-drift reset-to-window needs --window: only a windowed model can drop its examples from before a drift."),
    (("--on-drift", "reset-to-window", "--window", 100),
     "--on-drift reset-to-window needs a --drift-detector (adwin or page-hinkley)."),
    (("--drift-detector", "kswin"), "--drift-detector must be one of adwin, page-hinkley, none; got 'kswin'."),
    (("--on-drift", "restart"), "--on-drift must be one of report, reset-to-window; got 'restart'."),
    (("--window", 100, "--half-life", 50), "--half-life and --window cannot be used together"),
])
def test_serve_refuses_drift_settings_that_cannot_work_in_one_line(options, message, served):
    line = one_line(invoke(*SERVE, *options))
    assert " ERROR worker.serve: " in line and message in line
    assert served == []


def test_the_config_checks_the_drift_settings_itself():
    config = serve_config(parameters={"window": 100}, drift_detector="page-hinkley", on_drift="reset-to-window")
    assert config.drift.reset_to_window
    with pytest.raises(ConfigError, match="needs --window"):
        serve_config(drift_detector="adwin", on_drift="reset-to-window")
    with pytest.raises(ConfigError, match="--window-buckets needs --window: it sets how finely"):
        ModelOptions(None, window_buckets=3)  # refused on resume too, where the kind comes later


@pytest.mark.parametrize("command, options", [("train", ["--window", "--window-buckets"]),
                                              ("serve", ["--window", "--window-buckets", "--drift-detector",
                                                         "--on-drift"])])
def test_help_names_each_option(command, options):
    shown = invoke(command, "--help", env={"COLUMNS": "200"}).output
    for option in options:
        assert f" {option} " in shown
