"""Equal parts of stored objects kept once (hash consing), so a replica holds 30,000
pods in a fraction of the memory.

The pods of one Deployment differ in a few fields (name, uid, node, IP, times); the
rest (labels, ownerReferences, containers, conditions, dict keys) is equal from pod
to pod and from one version of a pod to the next. Decoded from the log or the change
stream, every copy is its own tree of dicts, lists and strings: about 9.5 KB per pod
in Python. `Interner.intern` returns an equal object whose equal subtrees are one
shared instance: about 2.5 KB per pod (docs/benchmarks.md, "Run L").

Sharing is safe because stored objects are never mutated in place (copy on write:
store/fsm.py), which every reader already relies on. An object's own top level and
its metadata always hold a unique resourceVersion, so they are never looked up.

A table entry is keyed by its value's shape: for a dict its items in order (so key
order, which the JSON on the wire keeps, is kept too), scalars with their type (True,
1 and 1.0 stay apart) and containers by the id of their shared instance (alive as long
as the entry that names it). Entries nothing else holds any more are swept once the
table has doubled since the last sweep.
"""
import logging
import os
import sys
import threading

LOG = logging.getLogger(__name__)
# Tests set this (tests/conftest.py): every reuse of a shared container first checks that
# it still matches its key, so a reader that mutated a stored object in place is caught.
VERIFY = os.environ.get("SHEPHERD_VERIFY_SHARING") == "1"
MUTATED = []             # what VERIFY caught in this process: (shape, value now)

_SCALARS = (str, int, bool, type(None))
SHORT_STRING = 24        # strings up to this length are interned (timestamps, IPs, phases; not uids)
MIN_SWEEP = 4096         # entries before the first sweep


class Interner:
    def __init__(self):
        self._table = {}         # shape key -> the shared container
        self._keys = {}          # id(shared container) -> its shape key
        self._next_sweep = MIN_SWEEP
        # Callers apply one change at a time, but a race here would leave an id in
        # _keys for an object the table does not hold: that id, reused, would share wrongly.
        self._lock = threading.Lock()
        self.hits = 0
        self.sweeps = 0

    def __len__(self):
        return len(self._table)

    def intern_object(self, obj):
        """A stored object (a dict with metadata): equal, its subtrees shared."""
        if type(obj) is not dict:
            return obj
        with self._lock:
            return self._intern_object(obj)

    def _intern_object(self, obj):
        out = {}
        for key, value in obj.items():
            if key == "metadata" and type(value) is dict:
                value = {_intern_key(k): self._value(v) for k, v in value.items()}
            else:
                value = self._value(value)
            out[_intern_key(key)] = value
        if len(self._table) >= self._next_sweep:
            self._sweep()
        return out

    def _value(self, value):
        kind = type(value)
        if kind is str:
            return sys.intern(value) if len(value) <= SHORT_STRING else value
        if kind is dict or kind is list:
            return self._container(value)
        return value

    def _container(self, value):
        shape = self._keys.get(id(value))
        if shape is not None:                # already the shared instance (kept from a previous version)
            self.hits += 1
            if VERIFY:
                self._verify(shape, value)
            return value
        shape = []            # None once a part is not shared (a float, a tuple): built, kept apart
        if type(value) is dict:
            built = {}
            for k, v in value.items():
                k = _intern_key(k)
                built[k] = v = self._value(v)
                if shape is not None:
                    part = self._shape_of(v)
                    shape = None if part is None else _extend(shape, k, part)
        else:
            built = []
            for v in value:
                built.append(v := self._value(v))
                if shape is not None:
                    part = self._shape_of(v)
                    shape = None if part is None else _extend(shape, part)
        if shape is None:
            return built
        shape = (type(value) is list,) + tuple(shape)
        shared = self._table.get(shape)
        if shared is not None:
            self.hits += 1
            if VERIFY:
                self._verify(shape, shared)
            return shared
        self._table[shape] = built
        self._keys[id(built)] = shape
        return built

    def _shape_of(self, value):
        kind = type(value)
        if kind is dict or kind is list:
            shape = self._keys.get(id(value))
            return None if shape is None else ("c", id(value))
        if kind in _SCALARS:
            return (kind, value)
        return None

    def sweep(self):
        """Drop the entries only the table still holds (their objects were replaced or
        deleted). A dropped entry frees its children's last hold, so a few passes."""
        with self._lock:
            self._sweep()

    def _sweep(self, passes=4):
        for _ in range(passes):
            dropped = 0
            for shape, value in list(self._table.items()):
                # The table's reference, the pair's in the list, `value`, getrefcount's argument.
                if sys.getrefcount(value) <= 4:
                    del self._table[shape]
                    del self._keys[id(value)]
                    dropped += 1
            if not dropped:
                break
        self.sweeps += 1
        self._next_sweep = max(MIN_SWEEP, 2 * len(self._table))

    def _verify(self, shape, value):
        if _shape_again(self, value) != shape:
            MUTATED.append((shape, value))
            LOG.error("a shared part of a stored object was mutated in place (a bug: stored objects "
                      "are copy on write): %r", value)

    def corrupted(self):
        """Shared containers that no longer match their key: mutated in place by a bug."""
        bad = []
        with self._lock:
            entries = list(self._table.items())
        for shape, value in entries:
            if _shape_again(self, value) != shape:
                bad.append(value)
        return bad


def _extend(shape, *parts):
    shape.extend(parts)
    return shape


def _intern_key(key):
    return sys.intern(key) if type(key) is str else key


def _shape_again(interner, value):
    """The key `value` has now (as _container built it)."""
    if type(value) is dict:
        shape = [False]
        for k, v in value.items():
            shape.extend((k, interner._shape_of(v)))
    else:
        shape = [True] + [interner._shape_of(v) for v in value]
    return tuple(shape)
