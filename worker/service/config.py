"""Everything `worker serve` needs, one dataclass per concern, each setting declared once.

Every field made by ``setting`` is also an option of `worker serve` (its flag, environment
variable, help and range: ``worker/setting.py``); the command builds a ``ServeConfig`` from them
and the service reads nothing else. A setting's own range is checked where it is declared; the
rules between settings of several concerns are checked by ``ServeConfig``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbstream.arrow import FeatureSpec
from nbstream.naive_bayes.keyed import KEYED_KINDS

from ..config import FeatureOptions, ModelOptions, TrainConfig, parse_classes
from ..errors import ConfigError
from ..inference.config import BesideTheLoop, InferenceApiConfig
from ..io.fields import REGISTRY_FORMATS, MessageFields
from ..io.kafka.settings import KafkaSettings
from ..io.kafka.state_topic import state_topic_name
from ..io.registry.settings import RegistrySettings
from ..setting import Checked, field_setting, names, setting, setting_like
from .keys.config import KeysConfig
from .models.config import ModelsConfig
from .partition.drift_watch import DriftConfig
from .pending.join import LabelsConfig
from .telemetry.logs import LEVELS

GUARANTEES = ("exactly-once", "at-least-once")
OUTPUT_FORMATS = ("json", "avro")
OUTPUT_TIMESTAMPS = ("input", "now")  # a prediction's timestamp: its input's, or the time it is sent
STARTS = ("earliest", "latest")


@dataclass(frozen=True)
class TopicsConfig(Checked):
    """The topics a group reads and writes, and the group."""
    input: str = setting(flag="--input", help="Topic of examples.")
    output: str = setting(flag="--output", help="Topic for predictions.")
    group: str = setting(flag="--group", help="Consumer group id: every replica of one service uses the same.")
    dead_letter_topic: str | None = setting(None, "--dlq", help="Dead-letter topic (default: INPUT.dlq).")
    state_topic: str | None = setting(None, "--state-topic", help="Compacted topic of the partitions' states "
                                                                  "(default: INPUT.GROUP.nbstream-state).")

    @property
    def dlq(self) -> str:
        return self.dead_letter_topic or f"{self.input}.dlq"

    @property
    def states(self) -> str:
        return self.state_topic or state_topic_name(self.group, self.input)


@dataclass(frozen=True)
class ServeModel(Checked):
    """Which model the group learns, its classes, and whether it learns at all (its parameters
    are the settings of ``worker.model_settings.ModelParameters``)."""
    kind: str = setting_like(ModelOptions, "kind")
    classes: list[Any] = setting(default_factory=list, flag="--classes",
                                 parse=lambda text: parse_classes(names(text)),
                                 help="Fixed class set, comma-separated (numbers if all are); other labels go to the "
                                      "dead-letter topic (default: open, grows).")
    max_classes: int = setting_like(TrainConfig, "max_classes")
    learn: bool = setting(True, "--learn", negative="--no-learn",
                          help="Learn from labeled messages, or only predict (labels ignored).")
    parameters: dict[str, Any] = field(default_factory=dict[str, Any])  # the model's own (alpha, binarize, window, ...)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "kind", self.options().chosen_kind)  # any letter case, or the closest name said

    def options(self) -> ModelOptions:
        """The model and its parameters (checked against what the kind accepts)."""
        return ModelOptions(kind=self.kind, **self.parameters)


@dataclass(frozen=True)
class ServeFeatures(Checked):
    """What the features of a message are: a list, a named object, or text hashed into columns."""
    text: bool = setting(False, "--text-features", deprecated=("--text", "SERVE_TEXT"),
                         help="Messages carry text (in --text-field), hashed into features.")
    hash_bits: int = setting_like(FeatureOptions, "hash_bits")
    ngrams: int = setting_like(FeatureOptions, "ngrams")


@dataclass(frozen=True)
class CommitConfig(Checked):
    """How often the service commits, and what a commit guarantees."""
    guarantee: str = setting("exactly-once", "--guarantee", choices=GUARANTEES,
                             help="exactly-once: predictions, dead letters, state and offsets commit in one Kafka "
                                  "transaction; at-least-once: a crash may repeat predictions.")
    checkpoint_every: int = setting_like(TrainConfig, "checkpoint_every", 50_000,
                                         help="Commit after this many messages...")
    checkpoint_interval: float = setting(0.5, "--checkpoint-interval", low=0.1,
                                         help="...or seconds (under exactly-once, how long predictions wait to "
                                              "become visible).")
    transaction_timeout: float = setting(60.0, "--transaction-timeout", low=1, high=900,
                                         help="Seconds before the broker aborts a transaction left open by a "
                                              "replica that died (at most 900, brokers' default "
                                              "transaction.max.timeout.ms).")

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == "exactly-once"

    @property
    def interval(self) -> float:
        """Seconds between commits: --checkpoint-interval, but under exactly-once at most half the
        transaction timeout, so that the broker never aborts a transaction that is still working."""
        if not self.exactly_once:
            return self.checkpoint_interval
        return min(self.checkpoint_interval, self.transaction_timeout / 2)


@dataclass(frozen=True)
class ConsumerConfig(Checked):
    """How this replica reads its partitions and stays in the group."""
    start: str = setting("earliest", "--start", choices=STARTS,
                         help="Where a partition without saved state starts: earliest or latest.")
    max_poll_records: int = setting(10_000, "--max-poll-records", low=1,
                                    help="Messages processed together at most (more: faster under load).")
    instance_id: str | None = setting(None, "--instance-id",
                                      help="Stable id of this replica in the group (static membership; also names "
                                           "its transactions): a restart takes its partitions back at once.")
    session_timeout: float = setting(10.0, "--session-timeout", low=6, high=1800,
                                     help="Seconds before the group gives a silent replica's partitions away (6 to "
                                          "1800, brokers' default group.min/max.session.timeout.ms).")


@dataclass(frozen=True)
class OutputConfig(Checked):
    """How predictions are written."""
    output_format: str = setting("json", "--output-format", choices=OUTPUT_FORMATS,
                                 help="json: each prediction a JSON object; avro: an Avro record in the Confluent "
                                      "wire format, its schema registered under OUTPUT-value in --schema-registry.")
    output_timestamp: str = setting("input", "--output-timestamp", choices=OUTPUT_TIMESTAMPS,
                                    help="A prediction's timestamp: input (its input message's, for event-time "
                                         "processing downstream) or now (when it is sent).")
    explain: int | None = setting(None, "--explain", low=1, high=1000,
                                  help="Each JSON prediction explains itself: \"explanation\" lists the K features "
                                       "that weigh most in it, each with its signed contribution to the log-odds "
                                       "of the predicted class over the runner-up.")


@dataclass(frozen=True)
class SnapshotConfig(Checked):
    """Local copies of the group's model, and the model a new group starts from."""
    snapshot_dir: Path | None = setting(None, "--snapshot-dir",
                                        help="Keep a local copy of the group's model here, at the first commit "
                                             "--snapshot-interval seconds after the last copy and at shutdown (also: "
                                             "a first start from such a copy).")
    keep_snapshots: int = setting(3, "--keep-snapshots", low=1)
    snapshot_interval: float = setting(60.0, "--snapshot-interval", low=0,
                                       help="Seconds between local copies in --snapshot-dir at least (0: after "
                                            "every commit).")
    init_model: Path | None = setting(None, "--init-model",
                                      help="Start a new group from this worker train snapshot (its model and "
                                           "features) and keep learning.")


@dataclass(frozen=True)
class TelemetryConfig(Checked):
    """What the service shows its operators: its endpoints and its log lines."""
    metrics_port: int | None = setting(None, "--metrics-port", help="Serve /metrics, /healthz, /readyz on this port.")
    metrics_host: str = setting("127.0.0.1", "--metrics-host",
                                help="Address for the endpoints (0.0.0.0 in a container).")
    json_logs: bool = setting(False, "--json-logs", help="Every log line a JSON object (errors and crashes included).")
    log_level: str = setting("info", "--log-level", choices=LEVELS,
                             help="debug, info, warning or error (debug also shows the Kafka client libraries' own "
                                  "lines).")


@dataclass(frozen=True)
class ServeConfig:
    """Everything `worker serve` needs; see its --help for each setting."""
    kafka: KafkaSettings
    topics: TopicsConfig
    model: ServeModel = field(default_factory=ServeModel)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    features: ServeFeatures = field(default_factory=ServeFeatures)
    fields: MessageFields = field(default_factory=MessageFields)
    commit: CommitConfig = field(default_factory=CommitConfig)
    consumer: ConsumerConfig = field(default_factory=ConsumerConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    snapshots: SnapshotConfig = field(default_factory=SnapshotConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    inference: InferenceApiConfig = field(default_factory=InferenceApiConfig)
    keys: KeysConfig = field(default_factory=KeysConfig)
    beside_the_loop: BesideTheLoop = field(default_factory=BesideTheLoop)
    labels: LabelsConfig | None = None
    drift: DriftConfig | None = None
    schema_registry: RegistrySettings | None = None  # where a registry format finds its writer schemas

    def __post_init__(self) -> None:
        """The rules between settings of several concerns."""
        if self.fields.format in REGISTRY_FORMATS and self.schema_registry is None:
            raise ConfigError(f"--format {self.fields.format} needs --schema-registry URL: the registry holds the "
                              f"schemas its records are written with.")
        self._check_output_format()
        self._check_explain()
        self._check_distinct_topics()
        self._check_distinct_fields()
        self._check_drift()
        self._check_labels()
        self._check_challengers()
        self._check_keys()

    def _check_explain(self) -> None:
        """An explanation is made by a copy of the model that learns the poll's rows one run at a time;
        a model that forgets, or keeps a window, moves differently within a poll's test-then-train."""
        if self.output.explain is None:
            return
        moving = [f"--{name.replace('_', '-')}" for name in ("half_life", "window")
                  if self.model.parameters.get(name) is not None]
        if moving:
            raise ConfigError(f"--explain does not take {moving[0]}: the explanations of a model that forgets or "
                              f"keeps a window would not be those of its predictions.")

    def _check_output_format(self) -> None:
        if self.output.explain is not None and (self.output.output_format != "json" or self.fields.format == "arrow"):
            given = "--format arrow" if self.fields.format == "arrow" else \
                f"--output-format {self.output.output_format}"
            raise ConfigError(f"--explain needs JSON predictions: {given} has no place for an explanation.")
        if self.output.output_format == "avro" and self.schema_registry is None:
            raise ConfigError("--output-format avro needs --schema-registry URL: the predictions' schema is "
                              "registered there.")
        if self.output.output_format == "avro" and self.fields.format == "arrow":
            raise ConfigError("--output-format avro answers messages of one example each: --format arrow is "
                              "answered in Arrow.")

    def _check_labels(self) -> None:
        if self.labels is None:
            return
        if not self.model.learn:
            raise ConfigError("--labels-topic needs learning: with --no-learn labels are ignored.")
        if self.fields.format == "arrow":
            raise ConfigError("--labels-topic reads messages of one example each: not --format arrow.")
        if self.model.kind == "categorical":
            raise ConfigError("--labels-topic does not take --model categorical: its partitions learn category "
                              "codes of their own, which pending examples do not keep.")

    def _check_drift(self) -> None:
        if self.drift is not None and self.drift.reset_to_window and self.model.parameters.get("window") is None:
            raise ConfigError("--on-drift reset-to-window needs --window: only a windowed model can drop its "
                              "examples from before a drift.")

    def _check_distinct_topics(self) -> None:
        """Each topic has one role: an output that is also the input would be read back as input,
        forever, and a state topic shared with anything else would be unreadable as state."""
        topics = self.topics
        roles: dict[str, str] = {}
        for role, option, topic in (("input", "--input", topics.input), ("output", "--output", topics.output),
                                    ("dead-letter", "--dlq", topics.dlq), ("state", "--state-topic", topics.states),
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
        if self.features.text:
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

    def _check_challengers(self) -> None:
        """Every challenger learns what the served model learns, with the same features, and
        predictions that name models are JSON (or Arrow, without the challengers' own)."""
        models = self.models
        if models.named and self.output.output_format == "avro":
            option = "--challenger" if models.challengers else "--model-name"
            raise ConfigError(f"{option} needs --output-format json: the Avro predictions' schema names no model.")
        if not models.challengers:
            return
        if not self.model.learn:
            raise ConfigError("--challenger needs learning: with --no-learn no model learns.")
        if models.output_challengers and self.fields.format == "arrow":
            raise ConfigError("--output-challengers answers messages of one example each: not --format arrow.")
        served = self.feature_spec()
        for name, options in models.challenger_models(self.model.kind).items():
            if "categorical" in (options.kind, self.model.kind):
                raise ConfigError(f"--challenger {name}: categorical models learn category codes of their own in each "
                                  "partition; a challenger and the served model are bernoulli, multinomial, "
                                  "complement or gaussian.")
            try:
                options.build()
                features = self.feature_spec(options.kind)
            except ConfigError as error:
                raise ConfigError(f"--challenger {name}: {error}") from None
            if features != served:
                raise ConfigError(f"--challenger {name}: a {options.kind} model reads other features than the served "
                                  f"{self.model.kind} model; every model learns the same features.")

    def _check_keys(self) -> None:
        """A keyed group learns its keys as it predicts them, from messages of one example each, with
        a count model that does not forget; what it does not do yet is refused in one line."""
        if not self.keys.keyed:
            return
        kind, moving = self.model.kind, [f"--{name.replace('_', '-')}" for name in ("half_life", "window")
                                         if self.model.parameters.get(name) is not None]
        refused = (("--model " + kind, kind not in KEYED_KINDS, "a keyed model is bernoulli, multinomial or "
                    "complement"),
                   (moving[0] if moving else "", bool(moving), "a key's model does not forget"),
                   ("--challenger", bool(self.models.challengers), "challengers are not keyed"),
                   ("--labels-topic", self.labels is not None, "pending examples keep no key"),
                   ("--explain", self.output.explain is not None, "explanations of keys' models are not made"),
                   ("--output-format avro", self.output.output_format == "avro", "the Avro predictions' schema "
                    "has no key"),
                   ("--format arrow", self.fields.format == "arrow", "Arrow predictions have no key column"),
                   ("--no-learn", not self.model.learn, "keys learn as they are predicted"))
        for option, given, why in refused:
            if given:
                raise ConfigError(f"--model-key does not take {option}: {why}.")

    @property
    def labels_topic(self) -> str | None:
        return None if self.labels is None else self.labels.topic

    def feature_spec(self, kind: str | None = None) -> FeatureSpec:
        """The spec for a fresh model (of ``kind``, default --model's): text, named features (an
        object) or a list."""
        kind = kind or self.model.kind
        names, features = self.fields.feature_names, self.features
        if kind == "categorical" and not names and not features.text:
            raise ConfigError("--model categorical needs --feature-names: the keys of the features object.")
        options = FeatureOptions(columns=[] if features.text else (names or [self.fields.features]),
                                 text=self.fields.text if features.text else None,
                                 hash_bits=features.hash_bits, ngrams=features.ngrams)
        return options.spec(kind, list_column=not names, text_option=field_setting(ServeFeatures, "text")[1].flag)


# The parts of a ServeConfig that its settings give, and what builds each from them (where it is
# not the dataclass itself: labels and drift are None when not asked for): `worker serve` takes
# their options (``worker.cli.service``).
SETTING_PARTS: dict[str, type | tuple[type, Callable[..., Any]]] = {
    "topics": TopicsConfig, "model": ServeModel, "models": ModelsConfig, "features": ServeFeatures,
    "fields": MessageFields,
    "commit": CommitConfig, "consumer": ConsumerConfig, "output": OutputConfig, "snapshots": SnapshotConfig,
    "telemetry": TelemetryConfig, "inference": InferenceApiConfig,
    "beside_the_loop": BesideTheLoop, "labels": (LabelsConfig, LabelsConfig.given),
    "drift": (DriftConfig, DriftConfig.given), "keys": KeysConfig,
}
