"""Typed settings: which model, which features, which data, and how the service runs.

The command line builds these; the commands take nothing else.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbstream
from nbstream.arrow import FeatureSpec
from nbstream.drift import DETECTORS

from .errors import ConfigError
from .io.fields import FORMATS, REGISTRY_FORMATS, MessageFields
from .io.kafka.settings import KafkaSettings
from .io.kafka.state_topic import state_topic_name
from .io.registry.settings import RegistrySettings

TEXT_MODELS = ("bernoulli", "multinomial", "complement")
LONGEST_NGRAMS = 5  # --ngrams at most: a text's n-grams grow with it, and few models gain past 3
MOST_CLASSES = 1 << 20  # --max-classes at most: the service's quality keeps counts per class
MOST_PENDING = 10_000_000  # --max-pending at most: each pending example is kept in memory (a few hundred bytes)
WEEK_SECONDS = 7 * 24 * 3600  # --label-ttl's default
LONGEST_TTL = 3650 * 24 * 3600  # --label-ttl at most: ten years, far inside what milliseconds in int64 hold
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass
class ModelOptions:
    """Model kind and the parameters given on the command line (None: the model's default)."""
    kind: str | None = "multinomial"
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

    def __post_init__(self):
        """Any letter case; an unknown kind is refused here, with the closest name suggested.
        (None: the kind of the snapshot resumed.) Window options that contradict each other or
        --half-life are refused here too."""
        self._check_window()
        if self.kind is None:
            return
        kind = self.kind.strip().lower()
        if kind not in nbstream.MODEL_KINDS:
            close = difflib.get_close_matches(kind, nbstream.MODEL_KINDS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown model {self.kind!r}{hint}; choose one of {', '.join(nbstream.MODEL_KINDS)}.")
        self.kind = kind

    def _check_window(self) -> None:
        if self.window is not None and self.half_life is not None:
            raise ConfigError("--window and --half-life cannot be used together: a model either keeps a window of "
                              "examples or forgets them gradually.")
        if self.window_buckets is not None and self.window is None:
            raise ConfigError("--window-buckets sets how finely --window moves; give --window too.")
        if self.window is not None and self.window_buckets is not None and self.window_buckets > self.window:
            raise ConfigError(f"--window-buckets ({self.window_buckets}) must be at most --window ({self.window}).")

    @property
    def chosen_kind(self) -> str:
        """The kind, where one is needed (None, "the kind of the snapshot resumed", is no kind to build)."""
        if self.kind is None:
            raise ValueError("no model kind: it comes from the snapshot resumed")
        return self.kind

    def parameters(self) -> dict:
        """The parameters given, checked against what the kind accepts."""
        model_class = nbstream.model_class(self.chosen_kind)
        accepted = model_class.param_names()
        given = {name: value for name, value in asdict(self).items() if name != "kind" and value is not None}
        if self.window is not None and self.window_buckets is None:  # the default, or one example a bucket
            given["window_buckets"] = min(self.window, model_class().window_buckets)
        unused = sorted(set(given) - set(accepted))
        if unused:
            options = ", ".join("--" + name.replace("_", "-") for name in unused)
            raise ConfigError(f"the {self.kind} model takes no {options}.")
        return given

    def build(self) -> nbstream.base.NaiveBayes:
        """A fresh model with these parameters, checked before any data is read."""
        parameters = self.parameters()
        model = nbstream.model_class(self.chosen_kind)(**parameters)
        try:
            model.check_params()
        except ValueError as error:
            raise ConfigError(str(error)) from None
        return model


@dataclass
class FeatureOptions:
    """Where the features are: numeric, list or categorical columns, or one text column."""
    columns: list[str] = field(default_factory=list)
    text: str | None = None
    hash_bits: int = 20
    ngrams: int = 1

    def spec(self, model_kind: str, *, list_column: bool) -> FeatureSpec:
        """The feature spec these options declare, for both Parquet and Kafka.

        list_column : whether a single feature column holds lists of numbers (from the
            Parquet schema; for Kafka messages, whether "features" is a list).
        """
        if bool(self.columns) == bool(self.text):
            raise ConfigError("give either --features COL[,COL...] or --text COL (exactly one).")
        if self.text:
            if model_kind not in TEXT_MODELS:
                raise ConfigError(f"--text needs a bernoulli, multinomial or complement model; got {model_kind}.")
            return FeatureSpec.text(self.text, self.hash_bits, self.ngrams)
        if model_kind == "categorical":
            return FeatureSpec.categorical(self.columns)
        if len(self.columns) == 1 and list_column:
            return FeatureSpec.vector(self.columns[0])
        return FeatureSpec.numeric_columns(self.columns)


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
    max_classes: int = 1_000

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


GUARANTEES = ("exactly-once", "at-least-once")
OUTPUT_FORMATS = ("json", "avro")
OUTPUT_TIMESTAMPS = ("input", "now")  # a prediction's timestamp: its input's, or the time it is sent
DRIFT_DETECTORS = (*DETECTORS, "none")  # what watches each partition's prequential errors
ON_DRIFT = ("report", "reset-to-window")  # what a detected drift does beside its log line and counter


@dataclass
class ServeConfig:
    """Everything `worker serve` needs; see its --help for each setting."""
    kafka: KafkaSettings
    input: str
    output: str
    group: str
    snapshot_dir: Path | None = None
    model: ModelOptions = field(default_factory=ModelOptions)
    fields: MessageFields = field(default_factory=MessageFields)
    text: bool = False
    hash_bits: int = 20
    ngrams: int = 1
    classes: list = field(default_factory=list)
    dead_letter_topic: str | None = None
    state_topic: str | None = None
    guarantee: str = "exactly-once"
    checkpoint_every: int | None = 50_000
    checkpoint_interval: float | None = 0.5
    transaction_timeout: float = 60.0
    start: str = "earliest"
    keep_snapshots: int = 3
    snapshot_interval: float = 60.0  # seconds between local copies in snapshot_dir at least
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    max_poll_records: int = 10_000
    instance_id: str | None = None
    session_timeout: float = 10.0
    learn: bool = True
    init_model: Path | None = None
    max_classes: int = 1_000
    output_timestamp: str = "input"
    drift_detector: str = "none"
    on_drift: str = "report"
    schema_registry: RegistrySettings | None = None  # where a registry format finds its writer schemas
    output_format: str = "json"  # predictions as JSON objects, or Avro records of a registry ("avro")
    labels_topic: str | None = None  # labels arriving later, joined by id to earlier messages
    label_ttl: float = WEEK_SECONDS  # seconds a message waits for its label (event time)
    max_pending: int = 100_000  # messages waiting for their label per partition at most
    dlq_unmatched_labels: bool = False  # a label matching no waiting message goes to the dead-letter topic

    def __post_init__(self):
        if self.guarantee not in GUARANTEES:
            raise ConfigError(f"--guarantee must be one of {', '.join(GUARANTEES)}; got {self.guarantee!r}.")
        if self.output_timestamp not in OUTPUT_TIMESTAMPS:
            raise ConfigError(f"--output-timestamp must be input or now; got {self.output_timestamp!r}.")
        if self.start not in ("earliest", "latest"):
            raise ConfigError(f"--start must be earliest or latest; got {self.start!r}.")
        if self.fields.format not in FORMATS:
            raise ConfigError(f"--format must be one of {', '.join(FORMATS)}; got {self.fields.format!r}.")
        if self.fields.format in REGISTRY_FORMATS and self.schema_registry is None:
            raise ConfigError(f"--format {self.fields.format} needs --schema-registry URL: the registry holds the "
                              f"schemas its records are written with.")
        self._check_output_format()
        self._check_distinct_topics()
        self._check_distinct_fields()
        self._check_drift()
        self._check_labels_topic()

    def _check_output_format(self) -> None:
        if self.output_format not in OUTPUT_FORMATS:
            raise ConfigError(f"--output-format must be one of {', '.join(OUTPUT_FORMATS)}; "
                              f"got {self.output_format!r}.")
        if self.output_format == "avro" and self.schema_registry is None:
            raise ConfigError("--output-format avro needs --schema-registry URL: the predictions' schema is "
                              "registered there.")
        if self.output_format == "avro" and self.fields.format == "arrow":
            raise ConfigError("--output-format avro answers messages of one example each: --format arrow is "
                              "answered in Arrow.")

    def _check_labels_topic(self) -> None:
        if not 0 < self.label_ttl <= LONGEST_TTL:
            raise ConfigError(f"--label-ttl must be more than 0 and at most 3650d; got {self.label_ttl!r} seconds.")
        if not 1 <= self.max_pending <= MOST_PENDING:
            raise ConfigError(f"--max-pending must be 1 to {MOST_PENDING:,}; got {self.max_pending!r}.")
        if self.labels_topic is None:
            if self.dlq_unmatched_labels:
                raise ConfigError("--dlq-unmatched-labels needs --labels-topic: without it no label is unmatched.")
            return
        if not self.learn:
            raise ConfigError("--labels-topic needs learning: with --no-learn labels are ignored.")
        if self.fields.format == "arrow":
            raise ConfigError("--labels-topic reads messages of one example each: not --format arrow.")
        if self.model.kind == "categorical":
            raise ConfigError("--labels-topic does not take --model categorical: its partitions learn category "
                              "codes of their own, which pending examples do not keep.")

    def _check_drift(self) -> None:
        if self.drift_detector not in DRIFT_DETECTORS:
            raise ConfigError(f"--drift-detector must be one of {', '.join(DRIFT_DETECTORS)}; "
                              f"got {self.drift_detector!r}.")
        if self.on_drift not in ON_DRIFT:
            raise ConfigError(f"--on-drift must be one of {', '.join(ON_DRIFT)}; got {self.on_drift!r}.")
        if self.on_drift == "reset-to-window" and self.drift_detector == "none":
            raise ConfigError("--on-drift reset-to-window needs a --drift-detector (adwin or page-hinkley).")
        if self.on_drift == "reset-to-window" and self.model.window is None:
            raise ConfigError("--on-drift reset-to-window needs --window: only a windowed model can drop its "
                              "examples from before a drift.")

    def _check_distinct_topics(self) -> None:
        """Each topic has one role: an output that is also the input would be read back as input,
        forever, and a state topic shared with anything else would be unreadable as state."""
        roles: dict[str, str] = {}
        for role, option, topic in (("input", "--input", self.input), ("output", "--output", self.output),
                                    ("dead-letter", "--dlq", self.dlq), ("state", "--state-topic", self.states),
                                    ("labels", "--labels-topic", self.labels_topic)):
            if topic is None:
                continue
            if topic in roles:
                raise ConfigError(f"the {role} topic {topic} ({option}) is also the {roles[topic]} topic; give "
                                  f"each role a topic of its own.")
            roles[topic] = role

    def _check_distinct_fields(self) -> None:
        """Each message field has one role: a field read as the label and as the features (or the id)
        would be learned as both. Arrow messages hold named features as columns beside the others."""
        fields = self.fields
        roles = [("--id-field", fields.id), ("--label-field", fields.label)]
        if self.text:
            roles.append(("--text-field", fields.text))
        elif fields.feature_names and fields.format == "arrow":
            roles += [("--feature-names", name) for name in fields.feature_names]
        else:
            roles.append(("--features-field", fields.features))
        seen: dict[str, str] = {}
        for option, name in roles:
            if name in seen:
                other = seen[name]
                raise ConfigError(f"{option} {name!r} is also " + (f"named by {option}" if other == option else
                                  f"the {other}") + "; give each field one role.")
            seen[name] = option

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == "exactly-once"

    @property
    def commit_interval(self) -> float | None:
        """Seconds between commits: --checkpoint-interval, but under exactly-once at most half the
        transaction timeout, so that the broker never aborts a transaction that is still working."""
        if not self.exactly_once:
            return self.checkpoint_interval
        return min(self.checkpoint_interval or self.transaction_timeout, self.transaction_timeout / 2)

    @property
    def dlq(self) -> str:
        return self.dead_letter_topic or f"{self.input}.dlq"

    @property
    def states(self) -> str:
        return self.state_topic or state_topic_name(self.group, self.input)

    def feature_spec(self) -> FeatureSpec:
        """The spec for a fresh model: text, named features (an object) or a list."""
        names = self.fields.feature_names
        if self.model.kind == "categorical" and not names and not self.text:
            raise ConfigError("--model categorical needs --feature-names: the keys of the features object.")
        options = FeatureOptions(columns=[] if self.text else (names or [self.fields.features]),
                                 text=self.fields.text if self.text else None,
                                 hash_bits=self.hash_bits, ngrams=self.ngrams)
        return options.spec(self.model.chosen_kind, list_column=not names)


def parse_classes(values: list[str]) -> list:
    """Class labels given on the command line: integers if all are, else numbers if all are, else text.

    >>> parse_classes(["0", "1"]), parse_classes(["0.5", "1"]), parse_classes(["ham", "spam"])
    ([0, 1], [0.5, 1.0], ['ham', 'spam'])

    A class listed twice (``1`` and ``1.0`` among numbers too) is a ConfigError.
    """
    classes: list = list(values)
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


def parse_duration(text: str, option: str) -> float:
    """Seconds in a duration as a user writes it: 90, 90s, 15m, 36h, 7d (decimals allowed)."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None or float(match[1]) <= 0:
        raise ConfigError(f"{option} must be a positive duration such as 90s, 15m, 36h or 7d; got {text!r}.")
    return float(match[1]) * _UNIT_SECONDS[match[2]]
