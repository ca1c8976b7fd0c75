"""Typed settings of the batch commands: which model, which features, which data.

The command line builds these; the commands take nothing else. Each setting is declared once, on
its field (``worker/setting.py``): the model's kind, the features, what train reads and writes;
`worker serve` and the other commands take those they share from here.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import InitVar, asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import nbstream
from nbstream.arrow import LONGEST_NGRAMS, FeatureSpec
from nbstream.metrics.quality import MOST_LABELS
from nbstream.naive_bayes import NaiveBayes

from .errors import ConfigError
from .setting import Checked, check_settings, names, setting, setting_like

TEXT_MODELS = ("bernoulli", "multinomial", "complement")


@dataclass
class ModelOptions:
    """Model kind and the parameters given on the command line (None: the model's default)."""
    kind: str | None = setting("multinomial", "--model",
                               help="bernoulli, multinomial, complement, gaussian or categorical.")
    alpha: float | None = None
    binarize: float | None = None
    fit_prior: bool | None = None
    norm: bool | None = None
    var_smoothing: float | None = None
    min_categories: int | None = None
    half_life: float | None = None
    window: int | None = None
    window_buckets: int | None = None
    counts: str | None = None
    written: InitVar[Mapping[str, str] | None] = None

    def __post_init__(self, written: Mapping[str, str] | None) -> None:
        """Any letter case; an unknown kind is refused here, with the closest name suggested.
        (None: the kind of the snapshot resumed.) The parameters given are checked by the
        library's rules before any data is read (resuming, by the rules of every kind that
        takes them). written : the parameters' names as the user wrote them (a SPEC's keys,
        ``half-life``), for errors to name them so; without it, errors name their options
        (``--half-life``)."""
        self._written = None if written is None else dict(written)
        if self.kind is not None:
            kind = self.kind.strip().lower()
            if kind not in nbstream.MODEL_KINDS:
                close = difflib.get_close_matches(kind, nbstream.MODEL_KINDS, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise ConfigError(f"unknown model {self.kind!r}{hint}; choose one of "
                                  f"{', '.join(nbstream.MODEL_KINDS)}.")
            self.kind = kind
        given = self._given()
        kinds = [self.kind] if self.kind is not None else list(nbstream.MODEL_KINDS)
        for kind in kinds:  # without a kind, each parameter by the rules of the kinds that take it
            rules = nbstream.model_class(kind).parameter_rules()
            taken = {name: value for name, value in given.items() if name in rules}
            try:
                rules.check(taken, given=set(taken), spell=self._spell)
            except ValueError as error:
                raise ConfigError(str(error)) from None

    def _spell(self, name: str) -> str:
        """A parameter's name as errors show it: as written, else as its option."""
        return option_name(name) if self._written is None else self._written.get(name, name)

    def _given(self) -> dict[str, object]:
        """The parameters given (not None), by name."""
        return {name: value for name, value in asdict(self).items() if name != "kind" and value is not None}

    def of_kind(self, kind: str) -> ModelOptions:
        """These parameters for a model of ``kind``, their errors spelled as these are."""
        return replace(self, kind=kind, written=self._written)

    @property
    def chosen_kind(self) -> str:
        """The kind, where one is needed (None, "the kind of the snapshot resumed", is no kind to build)."""
        if self.kind is None:
            raise ValueError("no model kind: it comes from the snapshot resumed")
        return self.kind

    def parameters(self) -> dict[str, Any]:
        """The parameters given, checked against what the kind accepts."""
        model_class = nbstream.model_class(self.chosen_kind)
        accepted = model_class.param_names()
        given = self._given()
        if self.window is not None and self.window_buckets is None:  # the default, or one example a bucket
            given["window_buckets"] = min(self.window, model_class().window_buckets)
        unused = sorted(set(given) - set(accepted))
        if unused:
            options = ", ".join(self._spell(name) for name in unused)
            raise ConfigError(f"the {self.kind} model takes no {options}.")
        return given

    def build(self) -> NaiveBayes[Any, Any]:
        """A fresh model with these parameters, checked before any data is read."""
        parameters = self.parameters()
        model = nbstream.model_class(self.chosen_kind)(**parameters)
        try:
            model.check_params()
        except ValueError as error:
            raise ConfigError(str(error)) from None
        return model


def option_name(parameter: str) -> str:
    """A model parameter as the command line names it: ``window_buckets`` is ``--window-buckets``."""
    return "--" + parameter.replace("_", "-")


@dataclass
class FeatureOptions:
    """Where the features are: numeric, list or categorical columns, or one text column."""
    columns: list[str] = setting(default_factory=list, flag="--features", parse=names,
                                 help="Feature columns, comma-separated: one list column (e.g. pixels), numeric "
                                      "columns, or string columns for --model categorical.")
    text: str | None = setting(None, "--text", help="A text column: lowercased word tokens, hashed.")
    hash_bits: int = setting(20, "--hash-bits", low=1, high=31, help="Text is hashed into 2**hash_bits features.")
    ngrams: int = setting(1, "--ngrams", low=1, high=LONGEST_NGRAMS, help="Use word n-grams up to this length.")

    def __post_init__(self) -> None:
        check_settings(self)

    def spec(self, model_kind: str, *, list_column: bool, text_option: str = "--text") -> FeatureSpec:
        """The feature spec these options declare, for both Parquet and Kafka.

        list_column : whether a single feature column holds lists of numbers (from the
            Parquet schema; for Kafka messages, whether "features" is a list).
        text_option : the option that asks for text, as an error names it.
        """
        if bool(self.columns) == bool(self.text):
            raise ConfigError("give either --features COL[,COL...] or --text COL (exactly one).")
        if self.text:
            if model_kind not in TEXT_MODELS:
                raise ConfigError(f"{text_option} needs a bernoulli, multinomial or complement model; got "
                                  f"{model_kind}.")
            return FeatureSpec.text(self.text, self.hash_bits, self.ngrams)
        if model_kind == "categorical":
            return FeatureSpec.categorical(self.columns)
        if len(self.columns) == 1 and list_column:
            return FeatureSpec.vector(self.columns[0])
        return FeatureSpec.numeric_columns(self.columns)


@dataclass
class TrainConfig(Checked):
    """What `worker train` reads, learns and writes."""
    paths: list[str]
    label: str = setting(flag="--label", help="Column holding the class label.")
    out: Path = setting(flag="--out", help="Snapshot to write (and to continue from).")
    model: ModelOptions = field(default_factory=ModelOptions)
    features: FeatureOptions = field(default_factory=FeatureOptions)
    batch_size: int = setting(65_536, "--batch-size", low=1, help="Rows per record batch; bounds memory.")
    checkpoint_every: int | None = setting(None, "--checkpoint-every", low=1,
                                           help="Write the snapshot every N rows (the run can then be restarted "
                                                "where it stopped).")
    resume: Path | None = setting(None, "--resume", help="Keep training this snapshot's model on new data.")
    fresh: bool = setting(False, "--fresh", help="Start over even if --out holds a checkpoint of this run.")
    skip_invalid: bool = setting(False, "--skip-invalid",
                                 help="Set bad rows aside (counted, written out) instead of stopping.")
    rejects: Path | None = setting(None, "--rejects",
                                   help="Folder for rows set aside by --skip-invalid (default: OUT.rejects).")
    max_classes: int = setting(1_000, "--max-classes", low=1, high=MOST_LABELS,
                               help="Most classes the model may hold: a label that would add one more is a bad row "
                                    "(train: an error, or set aside with --skip-invalid; serve: a dead letter). With "
                                    "sparse counts (hashed text) a class costs 16 bytes per (class, feature) pair its "
                                    "examples bring, and about 20 bytes in every prediction (each carries every "
                                    "class's probability); with dense counts 8 to 24 bytes per feature.")
    model_key: str | None = setting(None, "--model-key",
                                    help="Column naming each row's key (a user, a tenant, an author; strings or "
                                         "integers): one model per key, each backed off to the group's model. The "
                                         "snapshot holds the group's model with every key's counts beside it.")
    key_prior_weight: float | None = setting(None, "--key-prior-weight", low=0,
                                             help="m: a key's model is its own counts plus m pseudo-examples drawn "
                                                  "from the group's model (0: the key's own model; a key never seen "
                                                  "gets the group's). Default 10; a resumed model keeps its own.")

    @property
    def rejects_dir(self) -> Path:
        return self.rejects or self.out.with_name(self.out.name + ".rejects")


@dataclass
class ScoreConfig(Checked):
    """Settings shared by predict and evaluate."""
    snapshot: Path
    paths: list[str]
    batch_size: int = setting_like(TrainConfig, "batch_size")
    skip_invalid: bool = setting_like(TrainConfig, "skip_invalid")


def parse_classes(values: list[str]) -> list[int | float | str]:
    """Class labels given on the command line: integers if all are, else numbers if all are, else text.

    >>> parse_classes(["0", "1"]), parse_classes(["0.5", "1"]), parse_classes(["ham", "spam"])
    ([0, 1], [0.5, 1.0], ['ham', 'spam'])

    A class listed twice (``1`` and ``1.0`` among numbers too) is a ConfigError.
    """
    classes: list[int | float | str] = list(values)
    for convert in (int, float):
        try:
            classes = [convert(value) for value in values]
            break
        except ValueError:
            continue
    repeated = [value for i, value in enumerate(values) if classes[i] in classes[:i]]
    if repeated:
        raise ConfigError(f"--classes lists {repeated[0]!r} more than once.")
    return classes
