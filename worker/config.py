"""Typed settings for the batch commands: which model, which features, which data."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

import nbstream
from nbstream.base import NaiveBayes
from nbstream.features import FeatureSpec

MODELS = {"bernoulli": nbstream.BernoulliNB, "multinomial": nbstream.MultinomialNB,
          "complement": nbstream.ComplementNB, "gaussian": nbstream.GaussianNB,
          "categorical": nbstream.CategoricalNB}


class ConfigError(ValueError):
    """Settings that contradict each other or the data."""


@dataclass
class ModelOptions:
    """Model kind and the parameters given on the command line (None: the model's default)."""
    kind: str = "multinomial"
    alpha: float | None = None
    binarize: float | None = None
    fit_prior: bool | None = None
    norm: bool | None = None
    var_smoothing: float | None = None
    min_categories: int | None = None
    half_life: float | None = None

    def parameters(self) -> dict:
        if self.kind not in MODELS:
            raise ConfigError(f"unknown model {self.kind!r}; choose one of {sorted(MODELS)}.")
        accepted = MODELS[self.kind]._param_names()
        given = {name: value for name, value in asdict(self).items() if name != "kind" and value is not None}
        unused = sorted(set(given) - set(accepted))
        if unused:
            raise ConfigError(f"the {self.kind} model takes no {', '.join('--' + n.replace('_', '-') for n in unused)}.")
        return given

    def build(self) -> NaiveBayes:
        return MODELS[self.kind](**self.parameters())


@dataclass
class FeatureOptions:
    """Where the features are: numeric/list/categorical columns, or one text column."""
    columns: list[str] = field(default_factory=list)
    text: str | None = None
    hash_bits: int = 20
    ngrams: int = 1

    def spec_for(self, schema: pa.Schema, model_kind: str, source: str) -> FeatureSpec:
        """The feature spec these options give on data with this schema."""
        if bool(self.columns) == bool(self.text):
            raise ConfigError("give either --features COL[,COL...] or --text COL (exactly one).")
        if self.text:
            if model_kind not in ("bernoulli", "multinomial", "complement"):
                raise ConfigError(f"--text needs a bernoulli, multinomial or complement model; got {model_kind}.")
            spec = FeatureSpec.text(self.text, self.hash_bits, self.ngrams)
        elif model_kind == "categorical":
            spec = FeatureSpec.categorical(self.columns)
        elif len(self.columns) == 1 and self.columns[0] in schema.names and _is_list(schema.field(self.columns[0]).type):
            spec = FeatureSpec.vector(self.columns[0])
        else:
            spec = FeatureSpec.numeric_columns(self.columns)
        spec.check_schema(schema, source)
        return spec


def _is_list(arrow_type: pa.DataType) -> bool:
    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)


@dataclass
class TrainConfig:
    paths: list[str]
    label: str
    out: Path
    model: ModelOptions = field(default_factory=ModelOptions)
    features: FeatureOptions = field(default_factory=FeatureOptions)
    batch_size: int = 65_536
    checkpoint_every: int | None = None
    resume: Path | None = None
    fresh: bool = False
    skip_invalid: bool = False
    rejects: Path | None = None

    @property
    def rejects_dir(self) -> Path:
        return self.rejects or self.out.with_name(self.out.name + ".rejects")


@dataclass
class ScoreConfig:
    """Settings shared by predict and evaluate."""
    snapshot: Path
    paths: list[str]
    batch_size: int = 65_536
    skip_invalid: bool = False


@dataclass
class ServeConfig:
    """Everything `worker serve` needs; see its --help for each setting."""
    bootstrap: str
    input: str
    output: str
    group: str
    snapshot_dir: Path
    model: ModelOptions = field(default_factory=ModelOptions)
    text: bool = False
    feature_names: list[str] = field(default_factory=list)
    hash_bits: int = 20
    ngrams: int = 1
    classes: list[str] = field(default_factory=list)
    dead_letter_topic: str | None = None
    checkpoint_every: int | None = 10_000
    checkpoint_interval: float | None = 30.0
    start: str = "earliest"
    keep_snapshots: int = 3
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    max_message_bytes: int = 1_048_576
    max_poll_records: int = 2_000
    instance_id: str | None = None
    session_timeout: float = 10.0
    id_field: str = "id"
    features_field: str = "features"
    text_field: str = "text"
    label_field: str = "label"

    @property
    def dlq(self) -> str:
        return self.dead_letter_topic or f"{self.input}.dlq"

    def feature_spec(self) -> FeatureSpec:
        """The spec for a fresh model: text, named features (an object) or a list."""
        if self.text:
            if self.model.kind not in ("bernoulli", "multinomial", "complement"):
                raise ConfigError(f"--text needs a bernoulli, multinomial or complement model; got {self.model.kind}.")
            return FeatureSpec.text(self.text_field, self.hash_bits, self.ngrams)
        if self.model.kind == "categorical":
            if not self.feature_names:
                raise ConfigError("--model categorical needs --feature-names: the keys of the features object.")
            return FeatureSpec.categorical(self.feature_names)
        if self.feature_names:
            return FeatureSpec.numeric_columns(self.feature_names)
        return FeatureSpec.vector(self.features_field)
