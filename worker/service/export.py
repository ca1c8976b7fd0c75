"""`worker export`: the group's current global model, from its state topic, as a snapshot file.

Every partition's last committed state (and the base, if the group started from a model) is
merged, exactly as the replicas merge them to predict; the snapshot records each partition's
next offset. `worker inspect/predict/evaluate` and `nbstream.load` read it. A record the service
did not write is skipped with a warning on stderr, as `worker serve` skips it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import nbstream

from ..errors import UserError
from ..io.kafka.client import KafkaClient
from ..snapshot_meta import KafkaOffsets, SnapshotMeta, write_snapshot
from .follower import StateFollower, partition_of
from .global_model import merge_states


def _refuse(message: str) -> None:
    raise UserError(message)


def export(client: KafkaClient, input_topic: str, state_topic: str, out: Path, timeout_s: float = 120.0):
    """Write the merged model to ``out``; returns (model, offsets)."""
    admin = client.admin()
    try:
        if admin.topic(state_topic) is None:
            raise UserError(f"the state topic {state_topic} does not exist: no group has served {input_topic} "
                            "yet, or it was another --group (or --state-topic).")
    finally:
        admin.close()
    follower = StateFollower(client.reader(read_committed=True), state_topic)
    try:
        states, encoders = {}, {}
        for name in dict.fromkeys(follower.catch_up(timeout_s)):
            # A partition that learned nothing has no model of its own; none is needed to read it.
            taken = follower.take(name, nbstream.MultinomialNB())
            if taken is not None:
                states[name], encoders[name] = taken
    finally:
        follower.reader.close()
    fitted = [name for name, state in states.items() if state.model.is_fitted]
    if not fitted:
        raise UserError(f"the state topic {state_topic} holds no learned state (nothing learned yet, or another "
                        "--group or --input).")
    template = states[fitted[0]].model
    model, features = merge_states(type(template)(**template.get_params()), encoders[fitted[0]],
                                   [replace(states[name], encoder=encoders[name]) for name in fitted],
                                   on_conflict=_refuse)
    offsets = {partition: state.next_offset for name, state in states.items()
               if (partition := partition_of(name)) is not None and state.next_offset is not None}
    label = next((state.label_field for state in states.values() if state.label_field), None)
    write_snapshot(model, out, SnapshotMeta(features, label=label, source=KafkaOffsets(input_topic, offsets)))
    return model, offsets
