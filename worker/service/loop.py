"""The prequential loop of `worker serve`: decode -> predict -> emit -> route to the partitions.

Every message is predicted test-then-train: by the group's global model as it was before the
poll plus the labeled messages before it in its partition (computed for the whole poll at
once, exactly). The loop sends the predictions, sends the messages that cannot be used to the
reject sink (the dead-letter topic) with their error, and routes every row to the partition it
came from, whose steps (``partition/partition.py``) learn, judge, keep pending and join, in
their documented order. Either way every message's offset is passed.

With a labels topic (``pending/join.py``), a message with an id and no label is kept pending in
its partition once predicted, and learned when its label comes, judged by what it was served.

When the group learns challengers beside its served model (``worker/service/models``), every
message is predicted by each model, test-then-train: the served model's predictions are sent
(naming it; in shadow mode with the challengers' beside them), and each model is judged by its
own. With --promote auto, a challenger that does better takes the served model's place from the
message after the one whose judgement made it better (``PromotionWatch``), inside a poll if need
be: the poll's predictions are then sent in runs of messages, each run by the model serving it.

The loop writes nothing but its own counts: it asks. It sees its sinks only through their
interfaces (``worker.io.interfaces``), so it runs in unit tests on fakes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from nbstream.arrow import FeatureError, RowProblems, flag_classes_beyond, label_values
from nbstream.utils.class_set import ClassSet
from nbstream.utils.ndarrays import AnyArray, BoolArray, Features

from ..io.fields import LABEL_COLUMN, MessageFields
from ..io.formats import Decoded, MessageFormat
from ..io.interfaces import PredictionSink, Refusals, RejectSink
from ..io.json_predictions import ServedBy
from ..io.messages import read_label_events
from ..io.records import Polled
from .explaining import Explaining
from .global_model import Predictions
from .group_state import GroupState
from .keys.serving import KeyedServing, record_keys
from .models.promotion import Promotion, PromotionWatch
from .partition.partition import Judged, Partition
from .pending.join import LabelsConfig, served, unmatched_letters, with_id
from .pending.store import Expired, Joined
from .telemetry.counts import UncommittedCounts
from .telemetry.metrics import ServiceMetrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopSettings:
    """learn : learn from labeled messages (False: predict only, labels ignored);
    max_classes : a label that would grow an open class set beyond it is dead-lettered;
    fields : the message fields (label events use their names);
    labels : how labels that come later are joined (None: no labels topic);
    output_challengers : every prediction carries the challengers' too (shadow mode);
    explain : each prediction carries the features that weigh most in it, this many (None: none);
    key_prior_weight : every message is predicted and learned by its key's model, backed off to the
        group's by this weight (--model-key; None: the group's model predicts every message);
    key_ttl_ms : a key unseen this long is dropped (--key-ttl; None: kept)."""
    learn: bool = True
    max_classes: int = 1_000
    fields: MessageFields = field(default_factory=MessageFields)
    labels: LabelsConfig | None = None
    output_challengers: bool = False
    explain: int | None = None
    key_prior_weight: float | None = None
    key_ttl_ms: int | None = None


@dataclass(frozen=True)
class LoopOutputs:
    """Where a poll's results go: predictions, rejects (dead letters), and what the output
    refused before (an input whose output was refused alone is dead-lettered)."""
    predictions: PredictionSink
    rejects: RejectSink[Polled]
    refusals: Refusals = field(default_factory=Refusals)


@dataclass(frozen=True)
class ServedRows:
    """A poll as the loop served it: one row per example (``rows``), decoded, encoded (``X``
    (n, d), rows with a problem included), labeled where ``labeled``, ``good`` where usable, and
    each model's predictions of the good rows, by name, ``served``'s first."""
    rows: Polled
    decoded: Decoded
    X: object
    y: AnyArray
    labeled: BoolArray
    good: BoolArray
    predictions: dict[str, Predictions]
    served: str

    @property
    def sent(self) -> Predictions:
        """The predictions sent: the served model's."""
        return self.predictions[self.served]

    def scored(self, name: str) -> BoolArray:
        """(n,) which rows model ``name`` scored (good rows predicted once it knew a class)."""
        scored = np.zeros(len(self.rows), dtype=bool)
        scored[self.good] = self.predictions[name].scored
        return scored


class PrequentialLoop:
    """counts : where the work is counted until it is committed (the session publishes it then);
    promotion : what promotes a challenger to serve (--promote auto; None: none is)."""

    def __init__(self, messages: MessageFormat, group: GroupState, outputs: LoopOutputs, metrics: ServiceMetrics,
                 counts: UncommittedCounts | None = None, settings: LoopSettings | None = None,
                 promotion: PromotionWatch | None = None):
        self.messages, self.group, self.outputs, self.metrics = messages, group, outputs, metrics
        self.counts = counts or UncommittedCounts()
        self.settings = settings or LoopSettings()
        self.promotion = promotion
        weight = self.settings.key_prior_weight
        self.keyed = None if weight is None else KeyedServing(weight, self.settings.key_ttl_ms)
        classes = group.global_model.classes
        self.classes = ClassSet.fixed_from(classes) if classes is not None and len(classes) else None

    def process(self, polled: Polled, labels: Polled | None = None) -> None:
        """Serve and learn a poll's messages, then join the labels topic's records of the same poll."""
        started = time.perf_counter()
        polled = self._owned(polled)
        labels = self._owned(labels) if labels is not None and self.settings.labels is not None else None
        if self.settings.labels is not None:
            self._move_clocks(polled, labels)  # first: a label that comes past the TTL of its message is too late
        if len(polled):
            self._serve(polled)
        if labels is not None and len(labels):
            self._join(labels)
        if self.settings.labels is not None:
            self.metrics.pending.set(self.group.pending_examples())
        if self.keyed is not None:
            self.metrics.keys.labels("in_memory").set(self.group.keys_held())
            self.metrics.keys.labels("evicted").set(self.group.keys_evicted())
            self.metrics.keys.labels("dropped").set(self.keyed.dropped)
        if self.promotion is not None:
            self._promote(self.promotion)
        self.metrics.batch_seconds.observe(time.perf_counter() - started)

    def _owned(self, polled: Polled) -> Polled:
        owned = np.isin(polled.partitions, list(self.group.owned))
        # A rebalance inside the poll that fetched them revoked their partitions (after this
        # replica committed them): their new owner reads them from the committed offset.
        return polled if owned.all() else polled.only(owned)

    def _partitions(self, partitions: AnyArray, rows: BoolArray | None = None) -> list[tuple[Partition, BoolArray]]:
        """Each owned partition among ``partitions`` (n,) (of the rows in ``rows``), with its rows' mask."""
        present = partitions if rows is None else partitions[rows]
        routes = []
        for number in np.unique(present).tolist():
            mine = partitions == number
            routes.append((self.group.owned[number], mine if rows is None else mine & rows))
        return routes

    # ---- messages ---------------------------------------------------------------------------
    def _serve(self, polled: Polled) -> None:
        models = self.group.models
        model = models.served_model
        encoder = model.encoder
        learning = self.settings.learn
        decoded = self.messages.decode(polled.values, encoder.spec, model.label_kind() if learning else None)
        rows = decoded.rows_of(polled)  # one per example
        X, problems = encoder.encode(decoded.batch, learn=not model.categorical,
                                     counts_only=models.counts_only, problems=decoded.problems)
        labeled, y = self._labels(decoded.batch.column(LABEL_COLUMN), problems)
        keys = self._keys(rows, problems)
        self._flag_poisoned(rows, problems)
        self.outputs.rejects.reject(rows, problems)
        self.counts.add(messages=len(polled))
        good = problems.good
        if good.any():
            learn = labeled & good
            if keys is None:
                predictions = models.predict_then_learn(problems.select_good(X), y[good], learn[good],
                                                        rows.partitions[good], self._explaining(decoded, good),
                                                        self.settings.output_challengers or self.promotion is not None)
            else:
                good_keys = [keys[i] for i in np.flatnonzero(good).tolist()]
                predictions = {models.served: self._keyed(problems.select_good(X), y[good], learn[good],
                                                          rows.partitions[good], good_keys, rows.timestamps[good])}
            served_rows = ServedRows(rows, decoded, X, y, labeled, good, predictions, models.served)
            switches = self._promote_within(polled, served_rows, learn) if learning and self.promotion else []
            self._emit(polled, served_rows, switches)
            if learning:
                self._learn(served_rows, learn)
            if self.settings.labels is not None:
                self._keep_pending(served_rows)
        for partition, mine in self._partitions(polled.partitions):
            partition.advance(int(polled.offsets[mine].max()) + 1)  # every message's offset is passed

    def _keys(self, rows: Polled, problems: RowProblems) -> list[str] | None:
        """With --model-key, each row's key (its record key); one that names none is a problem."""
        if self.keyed is None:
            return None
        keys, key_problems = record_keys(rows.keys)
        missing = np.array([problem is not None for problem in key_problems], dtype=bool)
        if missing.any():
            problems.flag(missing, "key", np.array(key_problems, dtype=object))
        return keys

    def _keyed(self, X: object, y: AnyArray, learned: BoolArray, partitions: AnyArray, keys: list[str],
               stamps: AnyArray) -> Predictions:
        """Each good row predicted by its key's model, the keys learning as they go (``keys/serving.py``)."""
        assert self.keyed is not None
        served = self.group.models.served_model
        owned, routes = [], self._partitions(partitions)
        per_partition = [(partition.number, [keys[i] for i in np.flatnonzero(rows).tolist()])
                         for partition, rows in routes]
        for (partition, rows), (number, mine) in zip(routes, per_partition, strict=True):
            assert partition.keys is not None, "a keyed group's partitions keep their keys"
            self.group.keys_in_memory(number, mine)  # (--max-keys: those out of it are read back first)
            owned.append((partition.keys, rows))
        predictions = self.keyed.predict_then_learn(served.model, served.version, X, y, learned, keys, owned, stamps)
        for number, mine in per_partition:
            self.group.keys_used(number, mine)
        return predictions

    def _explaining(self, decoded: Decoded, good: BoolArray) -> Explaining | None:
        """What --explain asks of the good rows (None: nothing)."""
        top = self.settings.explain
        return None if top is None else Explaining(top, decoded.batch.filter(pa.array(good)))

    def _labels(self, labels: pa.Array, problems: RowProblems) -> tuple[BoolArray, AnyArray]:
        """(labeled mask, label values); a label outside a fixed class set is a problem."""
        if not self.settings.learn:
            return np.zeros(len(labels), dtype=bool), np.zeros(len(labels))
        try:
            labeled, y = label_values(labels, "label", problems)
        except FeatureError as error:
            problems.flag(np.ones(len(labels), dtype=bool), "label", str(error))
            return np.zeros(len(labels), dtype=bool), np.zeros(len(labels))
        if self.classes is not None:
            problems.flag(labeled & ~self.classes.known(y), "label",
                          f"label not among the classes {self.classes.labels.tolist()}")
        else:
            most = self.settings.max_classes
            flag_classes_beyond(y, self.group.global_model.known_classes, most, "label", problems,
                                f"label would add a class beyond --max-classes {most}", labeled)
        return labeled, y

    def _flag_poisoned(self, polled: Polled, problems: RowProblems) -> None:
        if not self.outputs.refusals.poisoned:
            return
        errors = self.outputs.refusals.poisoned_errors(polled)
        if any(errors):
            problems.flag(np.array([e is not None for e in errors]), "output", np.array(errors, dtype=object))

    def _emit(self, polled: Polled, poll: ServedRows, switches: list[tuple[int, str]]) -> None:
        """Predictions of the good rows, in the message format, each message's by the model that
        served it (switches : (first message, model) where a promoted model takes over); each
        partition counts what each model predicted."""
        good, rows = poll.good, poll.rows
        starts = [0, *(first for first, _ in switches), len(polled)]
        names = [poll.served, *(name for _, name in switches)]
        message = poll.decoded.message_index()
        for start, end, name in zip(starts, starts[1:], names, strict=False):
            sent = good if not switches else good & (message >= start) & (message < end)
            if sent.any():
                self._send(polled, poll, sent, name)
        stamps = rows.timestamps[good]
        self.metrics.end_to_end.observe_many(time.time() - stamps[stamps > 0] / 1000)
        partitions = rows.partitions[good]
        for name, predicted in poll.predictions.items():
            if predicted.classes is None or predicted.best is None:
                continue
            for partition, mine in self._partitions(partitions, predicted.scored):
                partition.served(name, predicted.classes, predicted.best[mine])

    def _send(self, polled: Polled, poll: ServedRows, sent: BoolArray, served: str) -> None:
        """Send model ``served``'s predictions of the rows ``sent`` (n,) (good rows)."""
        of_good = sent[poll.good]
        predictions = poll.predictions[served].take(of_good)
        keyed_like, values = self.messages.encode(polled, poll.decoded, sent, predictions.written(),
                                                  self._served_by(poll, served, of_good))
        diverted = self.outputs.predictions.send_predictions(polled, keyed_like, values)
        self.counts.add(predictions=int(sent.sum()))
        if diverted:  # too large for the output topic: dead letters instead
            per_message = np.bincount(poll.decoded.message_index()[sent], minlength=len(polled))
            self.counts.add(predictions=-int(per_message[[keyed_like[j] for j in diverted]].sum()))

    def _served_by(self, poll: ServedRows, served: str, of_good: BoolArray) -> ServedBy | None:
        """What names model ``served`` in its predictions of the good rows ``of_good``, and in
        shadow mode shows the other models' (None: the group names no model)."""
        if not self.group.lineup.named:
            return None
        if not self.settings.output_challengers:
            return ServedBy(served)
        shown = {}
        for name, predicted in poll.predictions.items():
            if name != served:
                taken = predicted.take(of_good)
                shown[name] = taken.written()
        return ServedBy(served, shown)

    def _learn(self, poll: ServedRows, learn: BoolArray) -> None:
        """Each partition learns its labeled rows in ``learn`` into every model, judging each
        model's predictions of those it scored (not those it predicted before it knew a class)."""
        if not learn.any():
            return
        scored = {name: poll.scored(name) for name in poll.predictions}
        batch = poll.decoded.batch if self.group.global_model.categorical else None
        for partition, rows in self._partitions(poll.rows.partitions, learn):
            judged = {}
            for name, predicted in poll.predictions.items():
                mine = rows & scored[name]
                if predicted.classes is not None and predicted.proba is not None and mine.any():
                    judged[name] = Judged(predicted.classes, predicted.proba[mine[poll.good]], scored[name][rows])
            partition.learn(_rows_of(poll.X, rows), _rows_of(poll.y, rows),
                            None if batch is None else batch.filter(pa.array(rows)), judged)
        self.counts.add(learned=int(learn.sum()))
        self.metrics.examples_seen.set(self.group.global_model.version)

    def _keep_pending(self, poll: ServedRows) -> None:
        """Each partition keeps its served rows that have an id and no label until their label
        comes (those whose label came first join at once), with what each model predicted."""
        ids = poll.decoded.ids
        keep = poll.good & ~poll.labeled & with_id(ids)
        if not keep.any():
            return
        rows = poll.rows
        for partition, mine in self._partitions(rows.partitions, keep):
            predicted = {name: served(each.best, each.proba, each.scored, mine[poll.good])
                         for name, each in poll.predictions.items()}
            kept = partition.keep_pending([ids[i] for i in np.flatnonzero(mine).tolist()], _rows_of(poll.X, mine),
                                          predicted, rows.timestamps[mine], rows.offsets[mine])
            self.counts.label_outcome("expired", kept.expired)
            if kept.added is not None:
                self.counts.label_outcome("evicted", kept.added.evicted)
                self._count_joined(kept.added.joined)

    def _promote_within(self, polled: Polled, poll: ServedRows, learn: BoolArray) -> list[tuple[int, str]]:
        """Judge the poll's labeled rows in stream order before their predictions are sent: each
        promotion that calls for, made at once, as (first message it serves, model)."""
        assert self.promotion is not None
        learned = learn[poll.good]  # of the good rows
        if not learned.any():
            return []
        judged = {}
        for name, predicted in poll.predictions.items():
            scored = predicted.scored[learned]
            if predicted.classes is not None and predicted.proba is not None and scored.any():
                judged[name] = Judged(predicted.classes, predicted.proba[learned][scored], scored)
        losses, rows = self.promotion.losses(poll.y[poll.good][learned], judged)
        found = self.promotion.scan(losses, self.group.models.served)
        if not found:
            return []
        row_of = np.flatnonzero(poll.good)[np.flatnonzero(learned)[rows]]  # each judged example's row
        message = poll.decoded.message_index()
        switches = []
        for example, promotion in found:
            last = int(message[row_of[example]])  # the message whose judgement promoted
            self._promoted(promotion, self._offsets_through(polled, last))
            switches.append((last + 1, promotion.to_model))
        return switches

    def _offsets_through(self, polled: Polled, last: int) -> dict[int, int]:
        """Each owned partition's next offset once the poll's messages up to ``last`` are passed."""
        offsets = self.group.offsets()
        through = slice(0, last + 1)
        for number, offset in zip(polled.partitions[through].tolist(), polled.offsets[through].tolist(), strict=True):
            offsets[number] = max(offsets.get(number, 0), offset + 1)
        return offsets

    def _promote(self, promotion: PromotionWatch) -> None:
        """Promote the challengers the judgements of labels that came later call for: each serves
        from the next poll on."""
        for decided in promotion.scan_queued(self.group.models.served):
            self._promoted(decided, self.group.offsets())

    def _promoted(self, decided: Promotion, offsets: dict[int, int]) -> None:
        """A challenger serves from now on (one log line with the figures; counted once committed)."""
        self.group.choice.promote(decided, offsets)
        self.counts.promoted(decided.from_model, decided.to_model)
        log.info(f"promoted {decided.to_model} to serve in place of {decided.from_model}: its log-loss over the last "
                 f"{decided.window:,} examples judged, {decided.challenger_log_loss:.4f}, is {decided.lower_by:.1%} "
                 f"below {decided.from_model}'s, {decided.served_log_loss:.4f} (--promote-margin "
                 f"{decided.margin:.0%})", extra={**decided.figures(),
                                                 "next_offsets": {str(p): o for p, o in sorted(offsets.items())}})

    # ---- labels that come later -------------------------------------------------------------
    def _move_clocks(self, polled: Polled, labels: Polled | None) -> None:
        """Each partition's event-time clock moves to the newest timestamp the poll brought it; what
        its TTL drops is counted (and a waiting label dropped, which never met its message, is a
        dead letter with --dlq-unmatched-labels)."""
        newest: dict[int, int] = {}
        for records in (polled, labels):
            if records is None or not len(records):
                continue
            for partition in np.unique(records.partitions).tolist():
                stamp = int(records.timestamps[records.partitions == partition].max())
                newest[partition] = max(stamp, newest.get(partition, stamp))
        for number in sorted(newest):
            expired = self.group.owned[number].move_clock(newest[number])
            if expired is not None:
                self._count_expired(number, expired)

    def _count_expired(self, partition: int, expired: Expired) -> None:
        labels = self.settings.labels
        assert labels is not None
        self.counts.label_outcome("expired", expired.examples)
        self.counts.label_outcome("unmatched", expired.labels)
        if labels.dlq_unmatched and labels.topic is not None and expired.unmatched is not None:
            self.outputs.rejects.reject(*unmatched_letters(labels.topic, partition, expired.unmatched))

    def _join(self, labels: Polled) -> None:
        """Join a poll's label events to their partitions' pending examples; a bad event is a dead letter."""
        events = read_label_events(labels.values, self.settings.fields, self.group.global_model.label_kind())
        problems = RowProblems(len(labels))
        errors = np.array(events.errors, dtype=object)
        problems.flag(errors != None, "message", errors)  # noqa: E711 - elementwise
        given, y = self._labels(pa.array(events.labels), problems)
        self.outputs.rejects.reject(labels, problems)
        good = given & problems.good
        for partition, mine in self._partitions(labels.partitions):
            usable = good & mine
            if usable.any():
                met = partition.join_labels([events.ids[i] for i in np.flatnonzero(usable).tolist()], y[usable],
                                            labels.timestamps[usable], labels.offsets[usable])
                self.counts.label_outcome("duplicate", met.duplicates)
                self.counts.label_outcome("unmatched", met.evicted)
                self._count_joined(met.joined)
            partition.advance_labels(int(labels.offsets[mine].max()) + 1)

    def _count_joined(self, joined: Joined) -> None:
        if not len(joined):
            return
        self.counts.joined(joined.delay_ms / 1000)
        self.metrics.examples_seen.set(self.group.global_model.version)


def _rows_of(values: Features, rows: BoolArray) -> Features:
    """values[rows] for a boolean mask, without copying when every row is kept."""
    return values if rows.all() else values[rows]
