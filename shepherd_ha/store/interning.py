"""Equal parts of an API worker's objects kept once (hash consing), so its mirror holds
30,000 pods in a fraction of the memory. (The store process keeps each object as JSON
bytes instead: store/encoded_objects.py.)

The pods of one Deployment differ in a few fields (name, uid, node, IP, times); the
rest (labels, ownerReferences, containers, conditions, dict keys) is equal from pod
to pod and from one version of a pod to the next. Decoded from the log or the change
stream, every copy is its own tree of dicts, lists and strings: about 9.5 KB per pod
in Python. `Interner.intern_object` returns an equal object whose equal subtrees are one
shared instance: about 2.5 KB per pod (docs/benchmarks.md, "Run L").

Sharing is safe because stored objects are never mutated in place (copy on write:
store/fsm.py), which every reader already relies on. An object's own top level and
its metadata always hold a unique resourceVersion, so they are never looked up.

A stored object stays a tree: one shared instance never appears at two places of the
same object (a Deployment's selector.matchLabels and template.metadata.labels are
equal, so are a container's requests and limits, often its two probes). A copy of the
object (copy.deepcopy, a JSON patch) would keep such aliasing, and an edit of the copy
at one place would change the other too. The second place gets a duplicate instead: an
equal tree with containers of its own, itself shared (keyed by its original and its
number within the object), so the path above it is shared between objects again.

Building a shape walks the whole object in Python, most of an interning's cost. An
object is mostly equal to one already interned: a new version to its previous one (a
status write leaves the spec as it was), a Deployment's new pod to its sibling. So a
caller passes that prior object, and a part equal to the prior's part at the same place
is taken from it after one comparison in C, not walked (`==` alone would take 1 for True
or 1.0 and ignore key order: the parts' reprs must match too). Without a prior, the last
object interned of the same kind serves.

A value's shape is one flat tuple: for a dict its items in order (so key order, which
the JSON on the wire keeps, is kept too), `(False, key, type, value, key, type, value,
...)`, for a list `(True, type, value, ...)`; scalars go with their type (True, 1 and
1.0 stay apart), containers as `dict` or `list` and the id of their shared instance
(alive while a shared container holds it: a child is swept only after its parent). The
table is keyed by the shape's hash, not the shape: with the shapes kept, the interner's
tables held 0.9x what the objects did, keyed by hash 0.47x (docs/benchmarks.md, run Y).
A hit is checked by building the shared instance's shape again and comparing; a slot
held by another shape of the same hash leaves the newcomer unshared. Entries nothing else
holds any more are swept once the table has doubled since the last sweep, a slice of
SWEEP_SLICE entries per interned object: a whole sweep at 30,000 pods took 0.3-0.8 s, on
the store's Raft tick thread.
"""
import logging
import os
import sys
import threading
import weakref

LOG = logging.getLogger(__name__)
# Tests set this (tests/conftest.py): every reuse of a shared container first checks that
# it still matches its key, so a reader that mutated a stored object in place is caught,
# and every interned object is checked to be a tree.
VERIFY = os.environ.get("SHEPHERD_VERIFY_SHARING") == "1"
MUTATED = []             # what VERIFY caught in this process: (table key or "not a tree", value)
LIVE = weakref.WeakSet()  # with VERIFY: every Interner of this process (conftest checks each after a test)

_SCALARS = (str, int, bool, type(None))
_EMPTY = {}              # the prior of a part that has none (never written to)
SHORT_STRING = 24        # strings up to this length are interned (timestamps, IPs, phases; not uids)
MIN_SWEEP = 4096         # entries before the first sweep
SWEEP_SLICE = 256        # entries a sweep looks at per interned object (~20-40 us)


class Interner:
    def __init__(self):
        self._table = {}         # hash of a shape -> the shared container of that shape
        self._keys = {}          # id(shared container) -> its key in the table
        self._next_sweep = MIN_SWEEP
        self._sweeping = None    # table keys a sweep in progress has still to look at
        self._origins = {}       # id(duplicate) -> the shared instance it duplicates (kept alive)
        # Callers apply one change at a time, but a race here would leave an id in
        # _keys for an object the table does not hold: that id, reused, would share wrongly.
        self._lock = threading.Lock()
        self._last = {}          # kind -> the last object interned of it (intern_object's prior)
        self.hits = 0
        self.reused = 0          # parts taken from a prior object after one comparison
        self.sweeps = 0
        self.collisions = 0      # shapes left unshared: their hash's slot held another shape
        if VERIFY:
            LIVE.add(self)

    def __len__(self):
        return len(self._table)

    def intern_object(self, obj, prior=None, kind=None):
        """A stored object (a dict with metadata): equal, its subtrees shared. `prior`: an
        interned object this one is likely much like (its previous version); without one,
        the last object interned with the same `kind` (a resource name) is used."""
        if type(obj) is not dict:
            return obj
        with self._lock:
            if prior is None and kind is not None:
                prior = self._last.get(kind)
            out = self._intern_object(obj, prior if type(prior) is dict else _EMPTY)
            if kind is not None:
                self._last[kind] = out
            return out

    def forget(self, kind, obj):
        """`obj` of `kind` was deleted: no longer keep it as the next prior (a big Secret's
        data would otherwise stay in memory until the next object of its kind)."""
        with self._lock:
            if self._last.get(kind) is obj:
                del self._last[kind]

    def _intern_object(self, obj, prior):
        out = {}
        for key, value in obj.items():
            before = prior.get(key)
            if key == "metadata" and type(value) is dict:
                before = before if type(before) is dict else _EMPTY
                value = {_intern_key(k): self._value(v, before.get(k)) for k, v in value.items()}
            else:
                value = self._value(value, before)
            out[_intern_key(key)] = value
        self._make_tree(out)
        if VERIFY and not _is_tree(out, set()):
            MUTATED.append(("not a tree", out))
            LOG.error("an interned object holds one container at two places (a bug): %r", out)
        if self._sweeping is None and len(self._table) >= self._next_sweep:
            self._sweeping = list(self._table)
        if self._sweeping is not None:
            self._sweep_slice(SWEEP_SLICE)
        return out

    def _value(self, value, prior=None):
        kind = type(value)
        if kind is str:
            return sys.intern(value) if len(value) <= SHORT_STRING else value
        if kind is dict or kind is list:
            return self._container(value, prior if type(prior) is kind else None)
        return value

    def _container(self, value, prior=None):
        """`value` with its parts shared; `prior` (of the same type, or None): an interned
        container at the same place of a similar object, whose equal parts are taken."""
        key = self._keys.get(id(value))
        if key is not None:                  # already the shared instance (kept from a previous version)
            self.hits += 1
            if VERIFY:
                self._verify(key, value)
            return value
        if prior is not None:
            prior_key = self._keys.get(id(prior))
            if prior_key is not None and value == prior and repr(value) == repr(prior):
                self.reused += 1
                if VERIFY:
                    self._verify(prior_key, prior)
                return prior
        shape = []            # None once a part is not shared (a float, a tuple): built, kept apart
        if type(value) is dict:
            built = {}
            before = prior if prior is not None else _EMPTY
            for k, v in value.items():
                k = _intern_key(k)
                built[k] = v = self._value(v, before.get(k))
                if shape is not None:
                    part = self._shape_of(v)
                    if part is None:
                        shape = None
                    else:
                        shape.append(k)
                        shape += part
        else:
            built = []
            before = prior if prior is not None else ()
            for index, v in enumerate(value):
                built.append(v := self._value(v, before[index] if index < len(before) else None))
                if shape is not None:
                    part = self._shape_of(v)
                    if part is None:
                        shape = None
                    else:
                        shape += part
        if shape is None:
            return built
        return self._enter((type(value) is list,) + tuple(shape), built)

    def _enter(self, shape, built):
        """The shared instance of `shape` (`built` is an unshared container of that
        shape): the one in the table, or `built` entered as it. A slot taken by another
        shape (its hash the same) leaves `built` unshared."""
        key = hash(shape)
        shared = self._table.get(key)
        if shared is None:
            self._table[key] = built
            self._keys[id(built)] = key
            return built
        if self._shape_now(shared) == shape:     # exact: the hash only finds the candidate
            self.hits += 1
            return shared
        if VERIFY:
            self._verify(key, shared)          # a mutated instance no longer matches its own key
        self.collisions += 1
        return built

    # ---- one object, one tree ----

    def _make_tree(self, obj):
        """Replace, in the object's own (private) top level and metadata, every part in
        which a container is met a second time."""
        seen, dups = set(), {}
        for key, value in obj.items():
            if key == "metadata" and type(value) is dict:
                for k, v in value.items():
                    value[k] = self._untangled(v, seen, dups)
            else:
                obj[key] = self._untangled(value, seen, dups)

    def _untangled(self, value, seen, dups):
        kind = type(value)
        if kind is not dict and kind is not list:
            return value
        if id(value) in seen:
            return self._duplicate(value, seen, dups)
        seen.add(id(value))
        fixed = None
        for key, part in (value.items() if kind is dict else enumerate(value)):
            if type(part) is not dict and type(part) is not list:
                continue                     # (most parts: no call for them)
            untangled = self._untangled(part, seen, dups)
            if untangled is not part:
                if fixed is None:
                    fixed = dict(value) if kind is dict else list(value)
                fixed[key] = untangled
        if fixed is None:
            return value
        # The same fix in another object finds this one (its parts are kept as they are:
        # rebuilding a private one could bring back a shared instance seen elsewhere).
        result = self._share(fixed)
        seen.add(id(result))
        return result

    def _share(self, built):
        """`built` (its parts as they are) as a shared instance, or itself when a part is
        not shared."""
        shape = self._shape_now(built)
        return built if shape is None else self._enter(shape, built)

    def _duplicate(self, value, seen, dups):
        """An equal tree with no container in common with anything seen in this object."""
        if id(value) not in self._keys:             # not shared: a private copy does
            copy = _tree_copy(value)
            seen.add(id(copy))
            return copy
        number = dups.get(id(value), 0)
        while True:
            number += 1
            key = ("dup", number, id(value))
            copy = self._table.get(key)
            if copy is None:
                copy = _tree_copy(value)
                self._table[key] = copy
                self._keys[id(copy)] = key
                self._origins[id(copy)] = value     # its id is in the key: it must outlive the copy
            if id(copy) not in seen:
                break
        dups[id(value)] = number
        seen.add(id(copy))
        return copy

    def _shape_now(self, value):
        """The shape a container's parts make as they are now (as _container builds it while
        interning them), or None when a part is not shared."""
        shape = [type(value) is list]
        for key, part in (enumerate(value) if type(value) is list else value.items()):
            part = self._shape_of(part)
            if part is None:
                return None
            if type(value) is not list:
                shape.append(key)
            shape += part
        return tuple(shape)

    def _shape_of(self, value):
        """A part's two elements in its container's shape: (type, value) for a scalar,
        (dict or list, id) for a shared container; None when the part is not shared.
        Flat in the shape, not a pair of its own: cheaper to build and hash (when shapes
        were kept as keys, a 2-tuple per part cost 48 bytes; docs/benchmarks.md, run V)."""
        kind = type(value)
        if kind is dict or kind is list:
            return None if id(value) not in self._keys else (kind, id(value))
        if kind in _SCALARS:
            return (kind, value)
        return None

    def sweep(self, passes=4):
        """Drop, at once, the entries only the table still holds (their objects were
        replaced or deleted). A dropped entry frees its children's last hold, so a few
        passes. (Interning sweeps by itself, in slices.)"""
        with self._lock:
            for _ in range(passes):
                before = len(self._table)
                self._sweeping = list(self._table)
                self._sweep_slice(len(self._sweeping))
                if len(self._table) == before:
                    break

    def _sweep_slice(self, count):
        pending, table = self._sweeping, self._table
        for _ in range(min(count, len(pending))):
            key = pending.pop()
            value = table.get(key)
            # The table's reference, `value`, getrefcount's argument: nothing else holds it.
            if value is not None and sys.getrefcount(value) <= 3:
                del table[key]
                del self._keys[id(value)]
                self._origins.pop(id(value), None)
        if not pending:
            self._sweeping = None
            self.sweeps += 1
            self._next_sweep = max(MIN_SWEEP, 2 * len(table))

    def _intact(self, key, value):
        if type(key) is tuple:                     # ("dup", number, id of the original)
            return value == self._origins.get(id(value))
        shape = self._shape_now(value)
        return shape is not None and hash(shape) == key

    def _verify(self, key, value):
        if not self._intact(key, value):
            MUTATED.append((key, value))
            LOG.error("a shared part of a stored object was mutated in place (a bug: stored objects "
                      "are copy on write): %r", value)

    def corrupted(self):
        """Shared containers that no longer match their key: mutated in place by a bug."""
        bad = []
        with self._lock:
            entries = list(self._table.items())
        for key, value in entries:
            if not self._intact(key, value):
                bad.append(value)
        return bad


def _is_tree(value, seen):
    if type(value) is dict or type(value) is list:
        if id(value) in seen:
            return False
        seen.add(id(value))
        return all(_is_tree(v, seen) for v in (value.values() if type(value) is dict else value))
    return True


def _tree_copy(value):
    kind = type(value)
    if kind is dict:
        return {k: _tree_copy(v) for k, v in value.items()}
    if kind is list:
        return [_tree_copy(v) for v in value]
    return value


def _intern_key(key):
    return sys.intern(key) if type(key) is str else key
