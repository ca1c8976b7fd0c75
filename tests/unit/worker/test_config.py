"""Typed settings: one feature-spec builder for Parquet and Kafka; model options checked up front."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

import nbstream
from nbstream.arrow import FeatureSpec
from worker.config import FeatureOptions, ModelOptions
from worker.errors import ConfigError
from worker.io.fields import MessageFields
from worker.io.kafka.settings import KafkaSettings
from worker.service.config import ServeConfig, ServeFeatures, ServeModel, TopicsConfig
from worker.service.pending.join import LabelsConfig
from worker.setting import parse_duration


def serve_config(output="out", dead_letter_topic=None, state_topic=None, labels_topic=None, **parts) -> ServeConfig:
    """A ServeConfig of topic in and group g, with these parts (labels on ``labels_topic``)."""
    labels = parts.pop("labels", None) or (LabelsConfig(labels_topic) if labels_topic else None)
    return ServeConfig(KafkaSettings("127.0.0.1:9"), TopicsConfig("in", output, "g", dead_letter_topic, state_topic),
                       labels=labels, **parts)


@pytest.mark.parametrize("options, kind, list_column, expected", [
    (FeatureOptions(text="body", hash_bits=8, ngrams=2), "multinomial", False, FeatureSpec.text("body", 8, 2)),
    (FeatureOptions(columns=["pixels"]), "bernoulli", True, FeatureSpec.vector("pixels")),
    (FeatureOptions(columns=["age"]), "gaussian", False, FeatureSpec.numeric_columns(["age"])),
    (FeatureOptions(columns=["a", "b"]), "gaussian", False, FeatureSpec.numeric_columns(["a", "b"])),
    (FeatureOptions(columns=["colour"]), "categorical", False, FeatureSpec.categorical(["colour"])),
])
def test_the_feature_options_declare_one_spec(options, kind, list_column, expected):
    assert options.spec(kind, list_column=list_column) == expected


def test_feature_options_that_contradict_are_refused():
    with pytest.raises(ConfigError, match="exactly one"):
        FeatureOptions(columns=["a"], text="t").spec("multinomial", list_column=False)
    with pytest.raises(ConfigError, match="--text needs a bernoulli, multinomial or complement model; got gaussian"):
        FeatureOptions(text="t").spec("gaussian", list_column=False)


def test_the_service_uses_the_same_builder_for_its_messages():
    def spec(names=(), **parts):
        return serve_config(fields=MessageFields(feature_names=list(names)), **parts).feature_spec()

    assert spec() == FeatureSpec.vector("features")
    assert spec(names=["age", "income"]) == FeatureSpec.numeric_columns(["age", "income"])
    assert spec(features=ServeFeatures(text=True, hash_bits=10)) == FeatureSpec.text("text", 10)
    assert spec(names=["colour"], model=ServeModel("categorical")) == FeatureSpec.categorical(["colour"])
    with pytest.raises(ConfigError, match="--model categorical needs --feature-names"):
        spec(model=ServeModel("categorical"))


def test_model_options_are_checked_before_any_data():
    assert isinstance(ModelOptions("bernoulli", alpha=0.5).build(), nbstream.BernoulliNB)
    with pytest.raises(ConfigError, match="unknown model 'bernouli'"):
        ModelOptions("bernouli").build()
    with pytest.raises(ConfigError, match="the multinomial model takes no --norm"):
        ModelOptions("multinomial", norm=True).build()
    with pytest.raises(ConfigError, match="--half-life must be None or a finite number > 0"):
        ModelOptions("multinomial", half_life=0.0).build()


@pytest.mark.parametrize("topics, message", [
    (dict(output="in"), "the output topic in (--output) is also the input topic"),
    (dict(dead_letter_topic="in"), "the dead-letter topic in (--dlq) is also the input topic"),
    (dict(output="in.dlq"), "the dead-letter topic in.dlq (--dlq) is also the output topic"),  # the default --dlq
    (dict(state_topic="out"), "the state topic out (--state-topic) is also the output topic"),
    (dict(labels_topic="in"), "the labels topic in (--labels-topic) is also the input topic"),
    (dict(labels_topic="out"), "the labels topic out (--labels-topic) is also the output topic"),
])
def test_each_topic_has_one_role(topics, message):
    """An output that is also the input would be read back as input, forever."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        serve_config(**topics)
    assert serve_config().topics.dlq == "in.dlq"


@pytest.mark.parametrize("fields, text, expected", [
    (dict(features="label"), False, "--features-field 'label' is also the --label-field"),
    (dict(id="label"), False, "--label-field 'label' is also the --id-field"),
    (dict(text="label"), True, "--text-field 'label' is also the --label-field"),
    (dict(text="id"), True, "--text-field 'id' is also the --id-field"),
    (dict(format="arrow", feature_names=["a", "label"]), False, "--feature-names 'label' is also the --label-field"),
    (dict(format="arrow", feature_names=["a", "a"]), False, "--feature-names 'a' is also named by --feature-names"),
])
def test_a_message_field_with_two_roles_is_refused(fields, text, expected):
    with pytest.raises(ConfigError, match=re.escape(expected)):
        serve_config(fields=MessageFields(**fields), features=ServeFeatures(text=text))


def test_a_json_feature_named_like_the_label_field_is_no_overlap():
    """Named JSON features are keys of the features object, not message fields."""
    config = serve_config(fields=MessageFields(feature_names=["a", "label"], label="y"))
    assert list(config.feature_spec().columns) == ["a", "label"]


@pytest.mark.parametrize("values, repeated", [(["ham", "ham", "spam"], "'ham'"), (["1", "2", "1.0"], "'1.0'")])
def test_a_class_listed_twice_is_refused(values, repeated):
    from worker.config import parse_classes

    with pytest.raises(ConfigError, match=f"--classes lists {repeated} more than once"):
        parse_classes(values)


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("15m", 900), ("36h", 129_600),
                                           ("7d", 604_800), ("1.5h", 5_400), (" 2D ", 172_800)])
def test_a_duration_is_read_as_a_user_writes_it(text, seconds):
    assert parse_duration(text, "--label-ttl") == seconds


@pytest.mark.parametrize("text", ["", "0", "0s", "-5m", "7 days", "1e9", "inf", "nan", "5w", "٣d"])
def test_a_duration_that_is_not_one_is_refused_in_one_line(text):
    with pytest.raises(ConfigError, match="--label-ttl must be a positive duration such as 90s"):
        parse_duration(text, "--label-ttl")


@pytest.mark.parametrize("settings, message", [
    (dict(labels=lambda: LabelsConfig.given(dlq_unmatched=True)), "--dlq-unmatched-labels needs --labels-topic"),
    (dict(labels_topic="labels", model=ServeModel(learn=False)), "--labels-topic needs learning"),
    (dict(labels_topic="labels", fields=MessageFields(format="arrow")), "not --format arrow"),
    (dict(labels=lambda: LabelsConfig("labels", ttl=-1.0)), "--label-ttl must be 0 to 315,360,000; got -1.0"),
    (dict(labels=lambda: LabelsConfig("labels", ttl=3651 * 86400.0)), "--label-ttl must be 0 to 315,360,000"),
    (dict(labels=lambda: LabelsConfig.given(ttl=3651 * 86400.0)), "--label-ttl must be 0 to"),  # without a topic too
    (dict(labels=lambda: LabelsConfig("labels", max_pending=0)), "--max-pending must be 1 to 10,000,000"),
    (dict(labels_topic="labels", model=ServeModel("categorical"), fields=MessageFields(feature_names=["a"])),
     "--labels-topic does not take --model categorical"),
])
def test_delayed_label_settings_that_cannot_work_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        labels = settings.pop("labels", None)
        serve_config(**settings, labels=labels() if labels else None)
    assert serve_config(labels_topic="labels").labels.ttl == 7 * 86400
    assert LabelsConfig.given() is None


@pytest.mark.parametrize("options, message", [
    (dict(promote="auto"), "--promote auto needs a --challenger."),
    (dict(output_challengers=True), "--output-challengers needs a --challenger."),
    (dict(model_name="a b"), "--model-name: a model's name is a letter or digit"),
    (dict(challenger="x=alpha=1", learn=False), "--challenger needs learning"),
    (dict(challenger="x=alpha=1", output_challengers=True, format="arrow"),
     "--output-challengers answers messages of one example each: not --format arrow."),
    (dict(challenger="x=model=categorical", feature_names=["a"]), "--challenger x: categorical models learn"),
    (dict(challenger="x=model=gaussian", text_features=True),
     "--challenger x: --text-features needs a bernoulli, multinomial or complement model; got gaussian."),
    (dict(challenger="x=model=multinomial,binarize=1"), "--challenger x: the multinomial model takes no binarize."),
    (dict(challenger="x=alpha=1", promote_margin=1.0), "--promote-margin must be 0 to 0.99; got 1.0."),
    (dict(challenger="x=alpha=1", promote_window=10), "--promote-window must be 100 to 1,000,000; got 10."),
])
def test_challenger_settings_that_cannot_work_are_refused(options, message):
    from tests.helpers.serve_config import serve_config as by_options
    from worker.service.models.config import parse_challengers

    if "challenger" in options:
        options["challenger"] = parse_challengers([options["challenger"]])
    with pytest.raises(ConfigError) as refused:
        by_options(**options)
    assert str(refused.value).startswith(message), str(refused.value)


def test_predictions_that_name_their_model_are_not_avro():
    from tests.helpers.serve_config import serve_config as by_options
    from worker.io.registry.settings import RegistrySettings
    from worker.service.config import OutputConfig
    from worker.service.models.config import parse_challengers

    registry = RegistrySettings("http://127.0.0.1:9")
    for options, option in ((dict(challenger=parse_challengers(["x=alpha=1"])), "--challenger"),
                            (dict(model_name="x"), "--model-name")):
        with pytest.raises(ConfigError, match=f"^{option} needs --output-format json: the Avro predictions' schema"):
            replace(by_options(**options), output=OutputConfig("avro"), schema_registry=registry)
    assert replace(by_options(), output=OutputConfig("avro"), schema_registry=registry).models.name == "main"


def test_a_challenger_without_a_kind_is_of_the_served_models():
    from tests.helpers.serve_config import serve_config as by_options
    from worker.service.models.config import parse_challengers

    config = by_options(model="bernoulli", challenger=parse_challengers(["late=alpha=0.5", "m=model=multinomial"]))
    models = config.models.challenger_models(config.model.kind)
    assert {name: options.kind for name, options in models.items()} == {"late": "bernoulli", "m": "multinomial"}
    assert config.models.named and config.models.name == "main"
    assert not by_options().models.named and by_options(model_name="x").models.named
