"""A replica's bounded, in-memory log of applied changes, for watches.

Every mutation bumps the store revision by exactly one, so the log holds a
contiguous run of revisions; a watcher asking for changes after revision N is
served when N is inside that run and told it is too old (410 Gone) otherwise.
The log is per replica (not replicated): revisions are the same everywhere, so a
watcher whose replica dies resumes on another one from its last revision.

Watchers wait on Interests (store/watch_interests.py): an append wakes only those it
may concern, and between wakes a watcher learns that nothing it cares about happened up
to the newest revision, so it moves on without reading those changes. The store process's
change stream and the controllers' informer, which read everything, wait on the log itself.
"""
import collections
import threading

from .encoded_objects import decoded
from .watch_interests import Interests


class WatchExpired(Exception):
    """The asked revision is older than this replica's watch log."""

    def __init__(self, revision, oldest):
        super().__init__("revision %d is older than this replica's watch log (oldest change kept: %d); "
                         "list again and watch from the list's resourceVersion" % (revision, oldest))
        self.revision, self.oldest = revision, oldest


class WatchLog:
    CAPACITY = 10000      # changes kept by default for watches to resume from

    def __init__(self, capacity=CAPACITY):
        self._cond = threading.Condition()
        self._entries = collections.deque(maxlen=capacity)
        self._last = 0          # newest revision applied on this replica
        self._base = 0          # changes after this revision are all here (until trimmed)
        self.resets = 0         # bumped when a snapshot replaced the state wholesale
        self._pokes = 0         # bumped to wake waiters without a change (store process: leadership)
        self._interests = Interests()

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
                self._interests.flag_change(change)
            self._cond.notify_all()

    def register(self, resource, field=None, value=None):
        """An Interest in `resource`'s changes (with `field`: those whose `field` is `value`
        before or after); unregister it when done."""
        with self._cond:
            return self._interests.add(resource, field, value)

    def unregister(self, interest):
        """Forget `interest` (again: nothing)."""
        with self._cond:
            self._interests.remove(interest)

    def interests(self):
        """How many interests are registered (a watch that ended has none left)."""
        with self._cond:
            return len(self._interests)

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

    def reset(self, revision):
        """The state jumped to `revision` without individual changes (snapshot install)."""
        with self._cond:
            self._entries.clear()
            self._base = self._last = revision
            self.resets += 1
            self._interests.flag_all()
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
            self._interests.flag_all()
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
