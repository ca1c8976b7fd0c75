"""The parameter rules: declared once per model, read by check_params and by a command line."""

import inspect

import numpy as np
import pytest
import sklearn.naive_bayes as reference
from sklearn.utils._param_validation import InvalidParameterError

import nbstream
from nbstream.utils.parameters import Exclusive, Interval, ParameterRule, ParameterRules, Requires

MODELS = [nbstream.model_class(kind) for kind in nbstream.MODEL_KINDS]
WRONG = {"bool": [1, "yes", None], "int": [0, 1.5, True, "3"], "float": [-1.0, float("nan"), float("inf"), True, "1"],
         "choice": ["bogus", None], "probabilities": [[0.5, 0.2], [2.0, -1.0], "uniform"]}


def option(name: str) -> str:
    return "--" + name.replace("_", "-")


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_constructor_parameter_has_one_rule_with_its_default(model):
    rules = model.parameter_rules()
    signature = inspect.signature(model.__init__).parameters
    assert [rule.name for rule in rules] == [name for name in signature if name != "self"] == model.param_names()
    for rule in rules:
        assert rule.default is signature[rule.name].default or rule.default == signature[rule.name].default
        assert rule.help.endswith(".") and rule.kind in WRONG
        assert rule.problem(rule.default, model().get_params()) is None, rule.name


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_check_params_refuses_what_a_rule_refuses_with_the_rule_s_words(model):
    rules = model.parameter_rules()
    for rule in rules:
        wrong = [value for value in WRONG[rule.kind] if not (value is None and rule.optional)]
        if rule.name == "window":  # its bound is another parameter: below window_buckets
            wrong = [5, 5.0]
        for value in wrong:
            params = {**model().get_params(), rule.name: value}
            expected = rule.problem(value, params)
            assert expected is not None and expected.startswith(f"{rule.name} must be "), (rule.name, value)
            with pytest.raises(ValueError) as refused:
                model(**{rule.name: value}).check_params()
            assert str(refused.value) == expected


@pytest.mark.parametrize("model, name, value", [
    (reference.MultinomialNB, "alpha", -1.0), (reference.MultinomialNB, "fit_prior", 1),
    (reference.MultinomialNB, "force_alpha", "yes"), (reference.ComplementNB, "norm", 0),
    (reference.GaussianNB, "var_smoothing", -1e-9), (reference.CategoricalNB, "min_categories", 0),
])
def test_values_scikit_learn_refuses_are_refused_too(model, name, value):
    X, y = np.array([[1, 0], [0, 1]]), [0, 1]
    with pytest.raises(InvalidParameterError):
        model(**{name: value}).fit(X, y)
    ours = nbstream.model_class(model.__name__.removesuffix("NB").lower())
    with pytest.raises(ValueError, match=f"^{name} must be "):
        ours(**{name: value}).fit(X, y)


def test_a_command_line_reads_kinds_bounds_choices_and_defaults():
    rules = nbstream.BernoulliNB.parameter_rules()
    alpha, counts, window = rules["alpha"], rules["counts"], rules["window"]
    assert (alpha.kind, alpha.bounds, alpha.default, alpha.per_feature) == ("float", Interval(0, None), 1.0, True)
    assert (counts.kind, counts.choices, counts.default) == ("choice", ("auto", "dense", "sparse"), "auto")
    assert (window.kind, window.optional, window.bounds.references) == ("int", True, ("window_buckets",))
    assert "binarize" in rules and "var_smoothing" not in rules
    assert {type(relation) for relation in rules.relations} >= {Exclusive, Requires}


def test_relations_speak_in_the_caller_s_names_and_requires_needs_to_know_what_was_given():
    rules = nbstream.MultinomialNB.parameter_rules()
    given = {"window_buckets": 3}
    assert rules.problems(given) == []  # a model cannot tell what was given: the default is a value
    assert rules.problems(given, given=given, spell=option) == [
        "--window-buckets needs --window: it sets how finely the window moves."]
    assert rules.problems({"window": 5, "window_buckets": 20}, given={"window", "window_buckets"}, spell=option) == [
        "--window must be None or an integer >= --window-buckets (20); got 5."]
    assert rules.problems({"window": 10, "half_life": 3.0}, spell=option) == [
        "--half-life and --window cannot be used together (--half-life=3.0, --window=10): a model either forgets "
        "gradually or keeps a window."]
    assert rules.problems({"counts": "sparse", "alpha": 0.0}, spell=option) == [
        "--counts='sparse' needs one --alpha > 0 for all features; got --alpha=0.0 (--force-alpha=True). "
        "Use --counts='dense'."]


def test_a_model_with_window_buckets_and_no_window_is_not_refused(rng):
    """What window_buckets means without window is nothing: a model keeps it, as scikit-learn keeps
    parameters it does not use, so set_params(window=None) on a fitted model still predicts."""
    model = nbstream.MultinomialNB(window=20, window_buckets=4).fit(rng.integers(0, 3, (30, 4)), rng.integers(0, 2, 30))
    model.set_params(window=None).check_params()


def test_a_bound_naming_a_wrong_parameter_is_not_read():
    rules = nbstream.GaussianNB.parameter_rules()
    assert rules.problems({"window_buckets": "ten", "window": 5}) == [
        "window_buckets must be an integer >= 1; got 'ten'."]


def test_extended_rules_replace_those_of_the_same_name():
    base = ParameterRules((ParameterRule("alpha", "float", "Smoothing.", bounds=Interval(0, None), per_feature=True),))
    scalar = base.extended(ParameterRule("alpha", "float", "Smoothing.", bounds=Interval(0, None)),
                           ParameterRule("norm", "bool", "Normalise."))
    assert [rule.name for rule in scalar] == ["alpha", "norm"] and not scalar["alpha"].per_feature
    assert base["alpha"].problem([1.0, 2.0], {}) is None
    assert scalar["alpha"].problem([1.0, 2.0], {}) == (
        "alpha must be a finite number >= 0 (one value, not an array); got [1.0, 2.0].")
