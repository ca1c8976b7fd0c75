"""A model's parameters: the options of train and serve, and a SPEC of one line, both read by the library's rules."""

from __future__ import annotations

import pytest

from worker.cli.options import model_parameters
from worker.config import ModelOptions
from worker.errors import ConfigError
from worker.model_settings import MODEL_OPTIONS, parse_model_spec


def test_a_spec_reads_each_setting_in_its_type_dashes_or_underscores():
    spec = parse_model_spec("model=Complement, alpha=0.5 ,norm=yes,window-buckets=4,window=100,counts=sparse")
    assert (spec.kind, spec.alpha, spec.norm, spec.window, spec.window_buckets, spec.counts) == (
        "complement", 0.5, True, 100, 4, "sparse")
    assert spec.parameters() == {"alpha": 0.5, "norm": True, "window": 100, "window_buckets": 4, "counts": "sparse"}


def test_a_spec_without_a_kind_leaves_it_to_the_caller_and_the_rest_to_the_defaults():
    spec = parse_model_spec("half_life=10000,fit_prior=false")
    assert spec.kind is None and spec.half_life == 10000.0 and spec.fit_prior is False and spec.alpha is None


def test_every_model_option_is_a_key_of_a_spec():
    assert set(MODEL_OPTIONS) == {"alpha", "binarize", "fit_prior", "norm", "var_smoothing", "min_categories",
                                  "half_life", "window", "window_buckets", "counts"}

    def command(model_parameters):
        return model_parameters

    options = set(model_parameters(command).__signature__.parameters)
    assert options == set(MODEL_OPTIONS)  # each one an option of the commands too


@pytest.mark.parametrize("text, message", [
    ("alpha", "SPEC: 'alpha' is not KEY=VALUE"),
    ("alpha=", "SPEC: 'alpha=' is not KEY=VALUE"),
    ("alpha=1,,model=multinomial", "SPEC: '' is not KEY=VALUE"),
    ("model=a,model=b", "SPEC: model is given twice."),
    ("window=2.5", "SPEC: window must be an integer; got '2.5'."),
    ("alpha=nan", "SPEC: alpha must be a finite number; got 'nan'."),
    ("min_categories=0", "SPEC: min_categories must be None or an integer >= 1"),
    ("alpha=-1", "SPEC: alpha must be a finite number >= 0"),
    ("half-life=0", "SPEC: half-life must be None or a finite number > 0; got 0.0."),
    ("half_life=-2,window=10", "SPEC: half_life must be None or a finite number > 0; got -2.0."),
    ("window=100,half_life=5", "SPEC: half_life and window cannot be used together (half_life=5.0, window=100)"),
    ("window_buckets=3", "SPEC: window_buckets needs window: it sets how finely the window moves."),
])
def test_a_spec_that_cannot_be_read_is_one_line_naming_what(text, message):
    with pytest.raises(ConfigError) as refused:
        parse_model_spec(text)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_a_spec_s_key_keeps_its_spelling_when_the_kind_comes_later():
    """A SPEC without a kind takes the served model's; its errors still name the keys as written."""
    spec = parse_model_spec("binarize=0.5,half-life=100", "--challenger b")
    with pytest.raises(ConfigError, match=r"^the multinomial model takes no binarize\.$"):
        spec.of_kind("multinomial").parameters()
    assert spec.of_kind("bernoulli").build().half_life == 100.0


def test_the_options_of_the_commands_are_still_named_as_flags():
    with pytest.raises(ConfigError, match=r"^--half-life must be None or a finite number > 0; got 0\.0\.$"):
        ModelOptions("multinomial", half_life=0.0)
