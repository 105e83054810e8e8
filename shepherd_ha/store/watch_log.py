"""A replica's bounded, in-memory log of applied changes, for watches.

Every mutation bumps the store revision by exactly one, so the log holds a
contiguous run of revisions; a watcher asking for changes after revision N is
served when N is inside that run and told it is too old (410 Gone) otherwise.
The log is per replica (not replicated): revisions are the same everywhere, so a
watcher whose replica dies resumes on another one from its last revision.

Every append wakes every waiter, which is right for a watcher of everything and
wasteful for a kubelet's watch of its own pods (spec.nodeName=N): with a thousand
nodes, each pod change woke a thousand threads to find nothing for all but one or
two. Such a watcher registers an Interest instead (kube-apiserver's cacher does the
same with its indexed triggers): it is woken only by a change whose field had its
value before or after, and between wakes it learns that nothing it cares about
happened up to the newest revision, so it moves on without reading those changes.
"""
import collections
import threading

from shepherd_ha.model.selectors import field_value

from .encoded_objects import decoded


class WatchExpired(Exception):
    """The asked revision is older than this replica's watch log."""

    def __init__(self, revision, oldest):
        super().__init__("revision %d is older than this replica's watch log (oldest change kept: %d); "
                         "list again and watch from the list's resourceVersion" % (revision, oldest))
        self.revision, self.oldest = revision, oldest


class Interest:
    """A watcher of `resource` that only needs the changes whose `field` is `value`
    before or after. Its flag is set when such a change arrives, and on a reset or a
    poke; it starts set, so the first look reads the log."""

    def __init__(self, resource, field, value):
        self.resource, self.field, self.value = resource, field, value
        self.flag = threading.Event()
        self.flag.set()


class WatchLog:
    CAPACITY = 10000      # changes kept by default for watches to resume from

    def __init__(self, capacity=CAPACITY):
        self._cond = threading.Condition()
        self._entries = collections.deque(maxlen=capacity)
        self._last = 0          # newest revision applied on this replica
        self._base = 0          # changes after this revision are all here (until trimmed)
        self.resets = 0         # bumped when a snapshot replaced the state wholesale
        self._pokes = 0         # bumped to wake waiters without a change (store process: leadership)
        self._interests = {}    # resource -> field -> value -> set of Interest

    @property
    def last_revision(self):
        return self._last

    def oldest_servable(self):
        """The smallest N such that 'changes after N' can be served."""
        with self._cond:
            return self._oldest_servable()

    def _oldest_servable(self):
        # Revisions are contiguous from the first entry on (or from the last reset).
        return self._entries[0].revision - 1 if self._entries else self._base

    def append(self, changes):
        with self._cond:
            for change in changes:
                self._entries.append(change)
                self._last = change.revision
                if change.resource in self._interests:
                    self._flag_interested(change)
            self._cond.notify_all()

    def register(self, resource, field, value):
        """An Interest in `resource`'s changes whose `field` is `value`; unregister it when done."""
        interest = Interest(resource, field, value)
        with self._cond:
            self._interests.setdefault(resource, {}).setdefault(field, {}).setdefault(value, set()).add(interest)
        return interest

    def unregister(self, interest):
        """Forget `interest` (again: nothing)."""
        with self._cond:
            fields = self._interests.get(interest.resource, {})
            by_value = fields.get(interest.field, {})
            interests = by_value.get(interest.value, set())
            interests.discard(interest)
            if not interests:
                by_value.pop(interest.value, None)
                if not by_value:
                    fields.pop(interest.field, None)
                    if not fields:
                        self._interests.pop(interest.resource, None)

    def interests(self):
        """How many interests are registered (a watch that ended has none left)."""
        with self._cond:
            return sum(len(s) for fields in self._interests.values() for by_value in fields.values()
                       for s in by_value.values())

    def since_for(self, revision, interest):
        """(changes, covered): the changes after `revision` when one `interest` names may be
        among them (as since()), else none; either way, none after `revision` up to
        `covered` concerns it that is not in `changes`. Raises WatchExpired as since()."""
        with self._cond:
            if revision < self._oldest_servable():
                raise WatchExpired(revision, self._oldest_servable() + 1)
            covered = self._last
            if not interest.flag.is_set():
                return [], covered
            interest.flag.clear()
            return self._since(revision), covered

    @staticmethod
    def wait_interest(interest, timeout):
        """Block until `interest` is flagged (a change it names, a reset, a poke) or timeout."""
        interest.flag.wait(timeout)

    def _flag_interested(self, change):
        # A MODIFIED change must carry its previous version (the mirror's and the in-memory
        # store's do): a pod bound to node N names N only in its new version, and one that
        # left N only in its previous one.
        fields = self._interests[change.resource]
        for obj in (change.object, change.previous):
            if obj is not None and not isinstance(obj, dict):     # stored bytes (a store process's
                for by_value in fields.values():                  # log): cannot tell, wake them all
                    self._flag_values(by_value)
                return
        for field, by_value in fields.items():
            for obj in (change.object, change.previous):
                if obj is not None:
                    for interest in by_value.get(field_value(obj, field), ()):
                        interest.flag.set()

    def _flag_everyone(self):
        for fields in self._interests.values():
            for by_value in fields.values():
                self._flag_values(by_value)

    @staticmethod
    def _flag_values(by_value):
        for interests in by_value.values():
            for interest in interests:
                interest.flag.set()

    def reset(self, revision):
        """The state jumped to `revision` without individual changes (snapshot install)."""
        with self._cond:
            self._entries.clear()
            self._base = self._last = revision
            self.resets += 1
            self._flag_everyone()
            self._cond.notify_all()

    def since(self, revision):
        """Changes with a revision greater than `revision`, oldest first."""
        with self._cond:
            if revision < self._oldest_servable():
                raise WatchExpired(revision, self._oldest_servable() + 1)
            return self._since(revision)

    def _since(self, revision):
        out = []
        for change in reversed(self._entries):
            if change.revision <= revision:
                break
            out.append(change)
        out.reverse()
        return out

    def poke(self):
        """Wake every waiter without a change (the store process: leadership changed)."""
        with self._cond:
            self._pokes += 1
            self._flag_everyone()
            self._cond.notify_all()

    def wait_beyond(self, revision, timeout):
        """Block until a change newer than `revision` exists, a reset or poke happens, or timeout."""
        with self._cond:
            resets, pokes = self.resets, self._pokes
            self._cond.wait_for(lambda: self._last > revision or self.resets != resets or self._pokes != pokes,
                                timeout)


class DecodedWatchLog:
    """A store process's WatchLog as readers of dicts see it: the FSM's changes carry
    objects as stored bytes (store/encoded_objects.py), decoded here for whoever reads
    the log in that process (the API and controllers run there in tests and tools)."""

    def __init__(self, log):
        self.raw = log

    def since(self, revision):
        return [decoded(change) for change in self.raw.since(revision)]

    def since_for(self, revision, interest):
        changes, covered = self.raw.since_for(revision, interest)
        return [decoded(change) for change in changes], covered

    def __getattr__(self, name):
        return getattr(self.raw, name)
