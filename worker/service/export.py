"""`worker export`: one of the group's current models, from its state topic, as a snapshot file.

Every partition's last committed state (and the base, if the group started from a model) is
merged, exactly as the replicas merge them to predict; the snapshot records each partition's
next offset. `worker inspect/predict/evaluate` and `nbstream.load` read it. A record the service
did not write is skipped with a warning on stderr, as `worker serve` skips it.

A group that learns challengers beside its served model holds a model of each name in every
state: ``model_name`` picks one (default: the one the group serves, by its newest choice, else
the one its states hold first), and the snapshot lists them all with the one it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import nbstream
from nbstream.arrow import FeatureEncoder
from nbstream.naive_bayes import NaiveBayes
from nbstream.naive_bayes.keyed import backed_off_model

from ..config import TrainConfig
from ..errors import UserError
from ..io.kafka.client import KafkaClient, KafkaFailure
from ..io.kafka.state_topic import state_topic_name
from ..model_names import DEFAULT_NAME
from ..setting import setting, setting_like
from ..snapshot_meta import KafkaOffsets, ModelsListing, SnapshotMeta, write_snapshot
from .config import TopicsConfig
from .follower import StateFollower, newest_records, partition_of
from .global_model import merge_states
from .keys.records import header_prior_weight, key_digest, keys_from_records, keys_of, keys_topic_name
from .models.choice import SERVED_MODEL
from .models.config import ModelsConfig
from .partition.record import ModelStatistics, PartitionRecord


@dataclass(frozen=True)
class ExportRequest:
    """Which group's model `worker export` writes, and where: settings of serve and train, in
    export's words."""
    input: str = setting_like(TopicsConfig, "input", help="The topic the group serves.")
    group: str = setting_like(TopicsConfig, "group", help="The group whose model to export.")
    out: Path = setting_like(TrainConfig, "out", help="Snapshot to write.")
    state_topic: str | None = setting_like(TopicsConfig, "state_topic",
                                           help="The group's state topic (default: INPUT.GROUP.nbstream-state).")
    model_name: str | None = setting_like(ModelsConfig, "model_name",
                                          help="Which of the group's models (the served one or a challenger, as serve "
                                               "names them; default: the one it serves).")
    model_key: str | None = setting(None, "--model-key", env="EXPORT_MODEL_KEY",
                                    help="The model of this key (a record key, of a group served with --model-key "
                                         "key): its counts backed off to the group's model as the group predicts it.")

    @property
    def states(self) -> str:
        return self.state_topic or state_topic_name(self.group, self.input)


def _refuse(message: str) -> None:
    raise UserError(message)


@dataclass(frozen=True)
class Exported:
    """What ``export`` wrote: the model, its name, each partition's next offset, and whether the
    group names its models (it learns several, or the one it learns has a name of its own)."""
    model: NaiveBayes[Any, Any]
    name: str
    offsets: dict[int, int]
    named: bool


def export(client: KafkaClient, input_topic: str, state_topic: str, out: Path, model_name: str | None = None,
           timeout_s: float = 120.0, model_key: str | None = None) -> Exported:
    """Write the merged model ``model_name`` (None: the one the group serves) to ``out``; with
    ``model_key``, the model of that key backed off to it."""
    admin = client.admin()
    try:
        if admin.topic(state_topic) is None:
            raise UserError(f"the state topic {state_topic} does not exist: no group has served {input_topic} "
                            "yet, or it was another --group (or --state-topic).")
    finally:
        admin.close()
    states, encoders, served = _read(StateFollower(client.reader(read_committed=True), state_topic), timeout_s)
    fitted = [name for name, state in states.items() if state.model.is_fitted or state.others]
    if not fitted:
        raise UserError(f"the state topic {state_topic} holds no learned state (nothing learned yet, or another "
                        "--group or --input).")
    names = list(dict.fromkeys(name for state_name in fitted for name in states[state_name].names))
    served = served if served in names else states[fitted[0]].name
    name = model_name or served
    if name not in names:
        raise UserError(f"the group learns no model named {name!r}; its models are {', '.join(names)}.")
    learned = {state_name: found for state_name in fitted
               if (found := states[state_name].statistics(name)) is not None and found.model.is_fitted}
    if not learned:
        raise UserError(f"the model {name} has learned nothing yet.")
    model, features = _merged(learned, encoders)
    if model_key is not None:
        model = _key_model(model, model_key, states, _key_records(client, keys_topic_name(state_topic), model_key,
                                                                 timeout_s))
    offsets = {partition: state.next_offset for state_name, state in states.items()
               if (partition := partition_of(state_name)) is not None and state.next_offset is not None}
    label = next((state.label_field for state in states.values() if state.label_field), None)
    named = len(names) > 1 or name != DEFAULT_NAME
    listing = ModelsListing(name, served, _settings(states, names)) if named else None
    write_snapshot(model, out, SnapshotMeta(features, label=label, source=KafkaOffsets(input_topic, offsets),
                                            models=listing))
    return Exported(model, name, offsets, named)


def _key_records(client: KafkaClient, topic: str, key: str, timeout_s: float) -> dict[bytes, bytes]:
    """The newest records of ``key`` in the keys topic (every partition's), by record key."""
    digest = key_digest(key)
    admin = client.admin()
    try:
        if admin.topic(topic) is None:
            return {}  # no keys topic: the group keeps no model per key
    finally:
        admin.close()

    def of_key(record_key: bytes) -> bool:
        place = keys_of(record_key.decode("utf-8", "replace"))
        return place is not None and place[1] == digest
    try:
        found = newest_records(client.reader(read_committed=True), topic, timeout_s, wanted=of_key)
    except KafkaFailure as failure:
        raise UserError(f"the keys topic {topic}: {failure}") from None
    return {name: value for records in found.values() for name, value in records.items()}


def _key_model(group: NaiveBayes[Any, Any], key: str, states: dict[str, PartitionRecord],
               records: dict[bytes, bytes]) -> NaiveBayes[Any, Any]:
    """The model of ``key``, its counts (in ``records``, of the state that holds them) backed off to
    the group's model as that state's keys are."""
    for state_name, state in states.items():
        mine = {name: value for name, value in records.items()
                if (keys_of(name.decode("utf-8", "replace")) or ("",))[0] == state_name}
        if not mine or state.keys_header is None:
            continue
        try:
            counts = keys_from_records(mine, state.keys_header, group.n_features_in_)[0]
            weight = header_prior_weight(state.keys_header)
            return backed_off_model(group, counts, key, weight)
        except ValueError as error:
            raise UserError(f"the key {key!r} of {state_name} does not read ({str(error)[:300]}).") from None
    keyed = any(state.keys_header is not None for state in states.values())
    raise UserError(f"the group has no key {key!r}: " + ("its keys are the record keys its messages came with."
                                                         if keyed else "it was not served with --model-key key."))


def _read(follower: StateFollower, timeout_s: float
          ) -> tuple[dict[str, PartitionRecord], dict[str, FeatureEncoder], str | None]:
    """Every state read to the end of the topic, by name, with its encoder; the model the group's
    newest choice serves (None: it made none)."""
    states, encoders, served = {}, {}, None
    try:
        for name in dict.fromkeys(follower.catch_up(timeout_s)):
            if name == SERVED_MODEL:
                choice = follower.take_choice()
                served = served if choice is None else choice.served
                continue
            # A partition that learned nothing has no model of its own; none is needed to read it.
            taken = follower.take(name, nbstream.MultinomialNB())
            if taken is not None:
                states[name], encoders[name] = taken
    finally:
        follower.reader.close()
    return states, encoders, served


def _merged(learned: dict[str, ModelStatistics], encoders: dict[str, FeatureEncoder]
            ) -> tuple[NaiveBayes[Any, Any], FeatureEncoder]:
    """The merge of one model's statistics in the states named by ``learned``'s keys."""
    first = next(iter(learned))
    template = learned[first].model
    return merge_states(type(template)(**template.get_params()), encoders[first],
                        [replace(statistics, encoder=encoders[name]) for name, statistics in learned.items()],
                        on_conflict=_refuse)


def _settings(states: dict[str, PartitionRecord], names: list[str]) -> dict[str, str]:
    """Each model's settings, by name, as its learned statistics in some state show them."""
    settings = {}
    for name in names:
        found = (state.statistics(name) for state in states.values())
        model = next((each.model for each in found if each is not None and each.model.is_fitted), None)
        settings[name] = "" if model is None else repr(type(model)(**model.get_params()))
    return settings
