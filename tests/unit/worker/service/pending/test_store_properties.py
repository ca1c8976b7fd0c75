"""Any sequence of features, labels, expiries and trips through bytes (whole, or by chunk over
commits) gives what a dict of the same rules gives."""

from __future__ import annotations

import copy

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.service.pending.segments import SegmentWriter, restore
from worker.service.pending.store import PendingExamples


class Reference:
    """The rules of the pending store, one id at a time in insertion-ordered dicts keyed by an id's
    canonical text (7 and "7" name one message); each entry keeps the id as it came."""

    def __init__(self, max_pending: int):
        self.max_pending = max_pending
        self.examples: dict = {}  # text -> (id, feature value, event time)
        self.labels: dict = {}  # text -> (id, label, label time)
        self.joined: dict = {}  # text -> (id, event time)

    def add(self, ids, values, times):
        last = {str(key): i for i, key in enumerate(ids)}
        replaced, already, joined = len(ids) - len(last), 0, []
        for text, i in sorted(last.items(), key=lambda item: item[1]):
            if text in self.joined:
                already += 1
            elif text in self.labels:
                key, label, label_time = self.labels.pop(text)
                joined.append((key, values[i], label, label_time - times[i]))
                self.joined[text] = (key, times[i])
            else:
                replaced += self.examples.pop(text, None) is not None
                self.examples[text] = (ids[i], values[i], times[i])
        self._bound(self.joined)
        return joined, replaced, already, self._bound(self.examples)

    def add_labels(self, ids, labels, times):
        first = {}
        for i, key in enumerate(ids):
            first.setdefault(str(key), i)
        duplicates, waiting, joined = len(ids) - len(first), 0, []
        for text, i in first.items():
            if text in self.examples:
                key, value, event_time = self.examples.pop(text)
                joined.append((key, value, labels[i], times[i] - event_time))
                self.joined[text] = (key, event_time)
            elif text in self.joined or text in self.labels:
                duplicates += 1
            else:
                self.labels[text] = (ids[i], labels[i], times[i])
                waiting += 1
        self._bound(self.joined)
        return joined, duplicates, waiting, self._bound(self.labels)

    def expire(self, now, ttl):
        counts = []
        for log in (self.examples, self.labels, self.joined):
            old = [text for text, entry in log.items() if entry[-1] < now - ttl]
            for text in old:
                del log[text]
            counts.append(len(old))
        return counts[0], counts[1]

    def _bound(self, log: dict) -> int:
        excess = max(len(log) - self.max_pending, 0)
        for text in list(log)[:excess]:
            del log[text]
        return excess


ids = st.lists(st.one_of(st.integers(0, 12), st.sampled_from(["0", "a", "b", "c", "d"])), max_size=12)
times = st.integers(0, 1_000)
steps = st.lists(st.one_of(
    st.tuples(st.just("add"), ids, times),
    st.tuples(st.just("labels"), ids, times),
    st.tuples(st.just("expire"), times, st.integers(0, 500)),
    st.tuples(st.just("bytes"), st.none(), st.none()),
    st.tuples(st.just("commit"), st.none(), st.none()),
    st.tuples(st.just("restore"), st.none(), st.none()),
), max_size=30)


def met(joined) -> list:
    if not len(joined):
        return []
    values = joined.X[:, 0].tolist() if isinstance(joined.X, np.ndarray) else joined.X.toarray()[:, 0].tolist()
    return list(zip(joined.ids, values, joined.labels.tolist(), joined.delay_ms.tolist(), strict=True))


@settings(max_examples=300, deadline=None)
@given(steps=steps, max_pending=st.integers(1, 8), sparse=st.booleans())
def test_the_store_follows_the_rules_of_the_reference(steps, max_pending, sparse):
    import scipy.sparse

    store, reference, counter = PendingExamples(max_pending), Reference(max_pending), 0
    # the state topic as the last commit left it: the chunks' records, the directory, and the rules' state then
    writer, records = SegmentWriter(), {}
    directory, committed_reference = writer.changes(store).directory, copy.deepcopy(reference)
    for kind, first, second in steps:
        if kind == "add":
            values = list(range(counter + 1, counter + 1 + len(first)))  # each row told apart by its value
            counter += len(first)
            X = np.array(values, dtype=np.float64).reshape(-1, 1)
            X = scipy.sparse.csr_matrix(X) if sparse else X
            proba = np.ones((len(first), 1))
            added = store.add(first, X, np.zeros(len(first)), proba, second, np.arange(len(first)))
            joined, replaced, already, evicted = reference.add(first, values, [second] * len(first))
            assert met(added.joined) == joined
            assert (added.replaced, added.already_joined, added.evicted) == (replaced, already, evicted)
        elif kind == "labels":
            labels = [f"label-{i}" for i in range(len(first))]
            labeled = store.add_labels(first, np.array(labels, dtype=str), second)
            joined, duplicates, waiting, evicted = reference.add_labels(first, labels, [second] * len(first))
            assert met(labeled.joined) == joined
            assert (labeled.duplicates, labeled.waiting, labeled.evicted) == (duplicates, waiting, evicted)
        elif kind == "expire":
            expired = store.expire(first, second)
            assert (expired.examples, expired.labels) == reference.expire(first, second)
        elif kind == "bytes":  # a store of new chunks, all to be written
            store, writer, records = PendingExamples.from_bytes(store.to_bytes(), max_pending), SegmentWriter(), {}
        if kind in ("commit", "bytes"):
            changes = writer.changes(store)
            records.update(changes.written)
            for key in changes.dropped:
                del records[key]
            directory, committed_reference = changes.directory, copy.deepcopy(reference)
        elif kind == "restore":  # as the last commit left it: what came since is lost, as in a crash
            store, writer = restore(directory, records, max_pending)
            reference = copy.deepcopy(committed_reference)
        assert (len(store), store.waiting_labels) == (len(reference.examples), len(reference.labels))
        for log, expected in ((store.examples, reference.examples), (store.labels, reference.labels),
                              (store.joined, reference.joined)):
            assert log.take(log.live_seqs()).ids == [entry[0] for entry in expected.values()]  # same ids, order
