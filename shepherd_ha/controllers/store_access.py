"""What a controller sees of the store: the leader's local state, its changes, and
fenced writes.

Controllers read the leader's own applied state (no read barrier: the leader has
applied everything it committed, and every write they make carries a
resourceVersion precondition or is idempotent), and every write carries the
controller epoch, so a deposed leader's queued writes are refused by the FSM.

`MemoryStore` is the same surface over an FSM in this process, applying commands
at once: what controller unit tests run against.
"""
import copy
import threading
import time
import uuid

from shepherd_ha.store import commands
from shepherd_ha.store.encoded_objects import decoded
from shepherd_ha.store.entry_size import ENTRY_THRESHOLD, CommandTooLarge, command_bytes, too_large_result
from shepherd_ha.store.fsm import StoreFSM
from shepherd_ha.store.mirror import Mirror
from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.store.replica import WRITE_TIMEOUT
from shepherd_ha.store.watch_log import WatchLog

from .write_pacing import Stopped


class StoreAccess:
    def __init__(self, lock, fsm_of, watch_log, submit, submit_many, epoch, clock=time.monotonic,
                 write_timeout=WRITE_TIMEOUT, pacer=None, stop=None):
        self._lock = lock
        self._fsm_of = fsm_of            # callable: the FSM object may be replaced by a snapshot
        self.watch_log = watch_log
        self._submit = submit            # (command, timeout) -> result (GroupCommitter.call)
        self._submit_many = submit_many  # (commands, timeout) -> results (GroupCommitter.call_many)
        self.epoch = list(epoch)
        self.clock = clock
        self.write_timeout = write_timeout
        self.pacer = pacer               # write_pacing.WritePacer or None: every write takes its tokens
        self.stop = stop                 # the epoch's stop Event: a paced writer gives up when it is set

    def unpaced(self):
        """The same store, its writes never waiting for the pacer (the scheduler's)."""
        view = copy.copy(self)
        view.pacer = None
        return view

    def get(self, resource, namespace, name):
        with self._lock:
            return self._fsm_of().get(resource, namespace, name)

    def list(self, resource, namespace=None):
        with self._lock:
            return self._fsm_of().list(resource, namespace)

    def owned(self, resource, namespace, uid):
        """(owned, unreadable): `resource` objects in `namespace` controlled by `uid`,
        and those whose ownerReferences cannot be read (store/owner_index.py)."""
        with self._lock:
            return self._fsm_of().owned(resource, namespace, uid)

    def snapshot(self, resources):
        """{resource: [objects]} and the revision they are at, taken atomically."""
        with self._lock:
            fsm = self._fsm_of()
            return {r: fsm.list(r) for r in resources}, fsm.revision

    def revision(self):
        return self._fsm_of().revision

    def write(self, ops, key=None):
        """Submit ops atomically with this controller epoch; returns the FSM result
        (a 413 failure if the write is too big to replicate)."""
        command = commands.write(ops, key or uuid.uuid4().hex, self.epoch)
        if self.pacer is not None:
            self._take(1)
        try:
            return self._submit(command, self.write_timeout)
        except CommandTooLarge as exc:
            return too_large_result(exc)

    def submit(self, command):
        """Submit one non-write command (e.g. commands.network, service_network) as it is; its FSM result."""
        return self._submit(command, self.write_timeout)

    def write_many(self, writes):
        """Independent atomic writes (each a list of ops), batched: how a controller
        writes, e.g. a thousand pod bindings. Group commit spreads them over bounded
        Raft entries. One result per write, in order; one write failing (a lost race,
        too big to replicate) does not affect the others."""
        if not writes:
            return []
        if self.pacer is None:
            return self._submit_many([commands.write(ops, uuid.uuid4().hex, self.epoch) for ops in writes],
                                     self.write_timeout)
        results = []
        while len(results) < len(writes):
            # While paced, a batch goes a chunk at a time as its tokens come.
            rest = writes[len(results):]
            part = rest[:self._take(len(rest), sent=bool(results), divisible=True)]
            done = self._submit_many([commands.write(ops, uuid.uuid4().hex, self.epoch) for ops in part],
                                     self.write_timeout)
            results += done
            fenced = next((r for r in done if r.get("reason") == "Fenced"), None)
            if fenced is not None:      # another leader's epoch: the rest would be refused too
                results += [fenced] * (len(writes) - len(results))
        return results

    def _take(self, n, sent=False, divisible=False):
        """How many of n writes may go now (all of them unless `divisible`)."""
        try:
            return self.pacer.take(n, self.stop, divisible)
        except Stopped as exc:
            if sent:      # the batch's first chunks went: what became of them is theirs to find out
                raise Unavailable("%s: the rest of the batch was not sent" % exc, "unknown")
            raise Unavailable("%s: the write was not sent" % exc, "not-applied")


class MemoryStore(StoreAccess):
    """An FSM in this process with a watch log: commands apply at once. Owned objects
    are read from a mirror fed the same changes, as on a real leader (store/mirror.py)."""

    def __init__(self, clock=time.monotonic, replica="test", term=1, namespaces=("default",)):
        self.fsm = StoreFSM()
        self.mirror = Mirror(watch_log_size=1)
        self.change_log = None      # a WatchLog of the FSM's changes as made (stored bytes), when set
        lock = threading.RLock()
        super().__init__(lock, lambda: self.fsm, WatchLog(100000), self._apply, self._apply_many, [term, replica],
                         clock)
        self.apply(commands.claim(term, replica))
        for name in namespaces:
            self.apply(commands.write([commands.create("namespaces", {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "uid": "ns-" + name, "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {}, "status": {"phase": "Active"}})]))

    def apply(self, command):
        # Appended under the lock: writers on several threads (workers, the scheduler's
        # writer, fault events) must reach the watch log in revision order.
        with self._lock:
            result, raw = self.fsm.apply_with_changes(command)
            if raw and self.change_log is not None:
                self.change_log.append(raw)
            changes = [decoded(c) for c in raw]       # the FSM's carry stored bytes
            if changes:
                self.watch_log.append(changes)
                self.mirror.apply_changes(changes)
        return result

    def owned(self, resource, namespace, uid):
        with self._lock:
            return self.mirror.owned(resource, namespace, uid)

    def _apply(self, command, timeout):
        size = command_bytes(command)
        if size >= ENTRY_THRESHOLD:        # as group commit refuses it
            raise CommandTooLarge(size, ENTRY_THRESHOLD)
        return self.apply(command)

    def _apply_many(self, batch, timeout):
        results = []
        for command in batch:
            try:
                results.append(self._apply(command, timeout))
            except CommandTooLarge as exc:
                results.append(too_large_result(exc))
        return results
