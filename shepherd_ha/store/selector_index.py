"""Objects by label and by indexed field, so that a selected list or watch reads the
objects it may return instead of every object of the kind.

kube-apiserver's watch cache indexes pods by spec.nodeName (every kubelet lists and
watches its own pods) and matches label selectors by walking the cache, in Go. Here a
walk of 30,000 pods to match `app=web` costs ~40 ms of one worker's GIL; with dozens of
request threads waiting for their turn, such a list answered in 0.4-1.1 s at
1,000 nodes (docs/benchmarks.md, run Z). The index narrows: it gives a superset of
the objects a selector can match (the keys under its most selective equality
requirement), and the caller still matches every requirement on what it reads.

Kept like the owner index (store/owner_index.py): a resource is indexed on its first
narrowed read, then kept current change by change under the caller's lock.
"""
from shepherd_ha.model.selectors import EQUALS, IN, field_value

# Fields indexed per kind, as kube-apiserver's watch cache indexes them.
INDEXED_FIELDS = {"pods": ("spec.nodeName",)}

_EMPTY = frozenset()


def _labels_of(obj):
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta.get("labels") if isinstance(meta, dict) else None


def _label_pairs(obj):
    """(key, value) of the object's labels that a selector can name (string values;
    anything else, stored past validation, can match no requirement's values)."""
    labels = _labels_of(obj)
    if not isinstance(labels, dict):
        return ()
    return [(k, v) for k, v in labels.items() if isinstance(v, str)]


class SelectorIndex:
    """{resource: {(label key, value): keys}} and {resource: {(field, value): keys}} for
    the resources it was asked about (`add`), kept current by `replace`."""

    def __init__(self):
        self._labels = {}        # resource -> {(key, value): set of object keys}
        self._fields = {}        # resource -> {(field, value): set of object keys}

    def covers(self, resource):
        return resource in self._labels

    def resources(self):
        """The resources indexed (a snapshot's new index starts with the same)."""
        return list(self._labels)

    @staticmethod
    def narrows(resource, label_selector, field_selector):
        """Whether a requirement of these selectors can use the index."""
        return (any(r.operator in (EQUALS, IN) for r in label_selector.requirements)
                or any(r.operator == EQUALS and r.field in INDEXED_FIELDS.get(resource, ())
                       for r in field_selector.requirements))

    def add(self, resource, bucket):
        """Index `resource` from its bucket ({key: object})."""
        self._labels[resource], self._fields[resource] = {}, {}
        for key, obj in bucket.items():
            self._put(resource, key, obj)

    def replace(self, resource, key, old, new):
        """`old` (or None) stored at `key` becomes `new` (or None: deleted)."""
        if resource not in self._labels:
            return
        if old is not None and new is not None and self._same_entries(resource, old, new):
            return       # a status write or a lease renewal: nothing indexed moved
        if old is not None:
            self._drop(resource, key, old)
        if new is not None:
            self._put(resource, key, new)

    def candidates(self, resource, label_selector, field_selector):
        """The keys of every object of `resource` the selectors can match (and maybe
        others), or None when no requirement narrows or the resource is not indexed.
        Often the index's own set, not a copy: read it under the lock that `replace`
        runs under, and never change it."""
        if resource not in self._labels:
            return None
        best = None
        for req in label_selector.requirements:
            if req.operator in (EQUALS, IN):
                found = self._union(self._labels[resource], [(req.key, v) for v in req.values])
                if best is None or len(found) < len(best):
                    best = found
        for req in field_selector.requirements:
            if req.operator == EQUALS and req.field in INDEXED_FIELDS.get(resource, ()):
                found = self._fields[resource].get((req.field, req.value), _EMPTY)
                if best is None or len(found) < len(best):
                    best = found
        return best

    # ---- inside ----

    @staticmethod
    def _union(entries, pairs):
        if len(pairs) == 1:
            return entries.get(pairs[0], _EMPTY)
        found = set()
        for pair in pairs:
            found |= entries.get(pair, _EMPTY)
        return found

    @staticmethod
    def _same_entries(resource, old, new):
        labels_old, labels_new = _labels_of(old), _labels_of(new)
        # The mirror shares unchanged parts between versions (store/interning.py): the
        # same labels are most often the same dict, and `is` answers before `!=` walks it.
        if labels_old is not labels_new and labels_old != labels_new:
            return False
        for field in INDEXED_FIELDS.get(resource, ()):
            top = field.partition(".")[0]
            if old.get(top) is not new.get(top) and field_value(old, field) != field_value(new, field):
                return False        # (a part shared with the previous version is unchanged)
        return True

    def _entries_of(self, resource, obj):
        yield self._labels[resource], _label_pairs(obj)
        yield self._fields[resource], [(f, field_value(obj, f)) for f in INDEXED_FIELDS.get(resource, ())]

    def _put(self, resource, key, obj):
        for entries, pairs in self._entries_of(resource, obj):
            for pair in pairs:
                keys = entries.get(pair)
                if keys is None:
                    entries[pair] = keys = set()
                keys.add(key)

    def _drop(self, resource, key, obj):
        for entries, pairs in self._entries_of(resource, obj):
            for pair in pairs:
                keys = entries.get(pair)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del entries[pair]
