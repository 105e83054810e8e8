"""The store process's service: its Replica (Raft, FSM, group commit, read barrier,
watch log) offered to the replica's API workers over the local socket.

Calls run on a bounded pool (a write blocks on Raft for up to the write timeout).
A subscriber gets the change stream: a state frame whenever leadership changes,
then every batch of changes the FSM applied, in order, from the revision it asked
for, or first a snapshot when that revision is older than the watch log (or the
store was replaced by a snapshot install). The tick thread never waits for a
subscriber: it only appends to the watch log, as before; each subscriber has a
sender thread that reads the log at its own pace, and one that falls behind the
log gets a snapshot instead of the changes it missed.
"""
import concurrent.futures
import logging
import os
import threading

from . import local_protocol as lp
from .fsm import MODIFIED
from .watch_log import WatchExpired

log = logging.getLogger("shepherd_ha.store.service")

CALL_THREADS = 128         # calls blocked on Raft at once (every waitress thread of a worker, and more)
# Pickling a frame is one C call that holds the GIL throughout, and the Raft tick thread
# waits for it: frames of 2,000 objects / 5,000 changes held it for tens of milliseconds
# each, back to back, while a snapshot was sent (docs/benchmarks.md, "The store process's
# tick"). A few hundred keep each hold to a few milliseconds.
SNAPSHOT_CHUNK = 200       # objects per snapshot frame (fewer when they are big: send_split)
CHANGES_PER_FRAME = 200


def _on_the_wire(change):
    """A change as the stream sends it. A modification goes without its previous version:
    the subscriber's mirror holds that version already (it has every change before this
    one) and keeps its own copy anyway (mirror.py). Half the bytes, and half the pickling
    on both sides, of every status update and lease renewal."""
    if change.type == MODIFIED:
        return (change.revision, change.type, change.resource, change.object, None)
    return tuple(change)


class StoreService:
    def __init__(self, replica, path):
        self.replica = replica
        self.path = path
        self._state_cond = threading.Condition()
        self._state = (False, 0, 0)        # (leading, term, sequence)
        self._pool = concurrent.futures.ThreadPoolExecutor(CALL_THREADS, thread_name_prefix="store-call")
        self._listener = None
        self._streams = set()              # subscriber connections
        self.subscribers = 0

    # ---- leadership, seen on the tick thread ----

    def leadership_changed(self, leader=None):
        """Replica's on_leadership hook (tick thread): note and wake the senders; never block.
        Without `leader` (at start), the role is read under the same lock, so a change the
        tick thread reports meanwhile is not overwritten by an older reading."""
        with self._state_cond:
            if leader is None:
                leader = self.replica.node.is_leader()
            self._state = (bool(leader), self.replica.node.term(), self._state[2] + 1)
            self._state_cond.notify_all()
        self.replica.change_log.poke()

    # ---- serving ----

    def start(self):
        self._listener = lp.listen(self.path)
        threading.Thread(target=self._accept_loop, name="store-accept", daemon=True).start()

    def _accept_loop(self):
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(lp.Connection(sock),), name="store-conn", daemon=True).start()

    def _serve(self, conn):
        try:
            if not lp.accept_hello(conn):
                return
            while True:
                request = conn.recv()
                if not isinstance(request, dict) or not isinstance(request.get("args", {}), dict):
                    raise lp.ProtocolError("a request is a dict with a dict of args")
                if request.get("op") == "subscribe":
                    self._stream(conn, int(request.get("args", {}).get("from", 0)))
                    return
                self._pool.submit(self._answer, conn, request)
        except (OSError, EOFError, lp.ProtocolError) as exc:
            if not isinstance(exc, EOFError):
                log.info("local connection closed: %s", exc)
        finally:
            conn.close()

    def _answer(self, conn, request):
        ident = request.get("id")
        try:
            handler = getattr(self, "op_" + str(request.get("op")), None)
            if handler is None:
                raise ValueError("unknown operation %r" % request.get("op"))
            answer = {"id": ident, "result": handler(**request.get("args", {}))}
        except Exception as exc:
            answer = {"id": ident, "error": lp.error_value(exc)}
        try:
            conn.send(answer)
        except OSError:
            pass        # the worker went away; its reader failed its callers

    # ---- calls ----

    def op_submit(self, command, timeout):
        return self.replica.committer.call(command, timeout)

    def op_submit_many(self, commands, timeout):
        return self.replica.committer.call_many(commands, timeout)

    def op_barrier(self):
        self.replica.barrier.wait()
        return self.replica.revision()

    def op_recall(self, key):
        return self.replica.recall(key)

    def op_digest(self):
        return tuple(self.replica.digest())

    def op_status(self):
        status = self.replica.status()
        status["ready"] = list(self.replica.ready())
        status["tickGaps"] = self.replica.tick_gaps()
        status["barriersSent"] = self.replica.barrier.barriers_sent
        status["storePid"] = os.getpid()
        return status

    # ---- membership (store/membership.py; the API worker forwards on NotLeader) ----

    def op_membership(self):
        return self.replica.membership()

    def op_add_member(self, id, raft, api=None, force=False):  # noqa: A002 - the wire name
        return self.replica.changer.add(id, raft, api, bool(force))

    def op_remove_member(self, id):  # noqa: A002
        return self.replica.changer.remove(id)

    # ---- the change stream ----

    def _snapshot(self):
        node = self.replica.node
        with node.lock:
            fsm = node.fsm
            buckets = {resource: objects.raw_values() for resource, objects in fsm.objects.items()}
            revision = fsm.revision
        return buckets, revision

    def _send_snapshot(self, conn):
        buckets, revision = self._snapshot()
        conn.send({"kind": "snapshot-begin", "revision": revision})
        for resource, objects in buckets.items():
            for start in range(0, len(objects), SNAPSHOT_CHUNK):
                conn.send_split(lambda part: {"kind": "snapshot-chunk", "resource": resource, "objects": part},
                                objects[start:start + SNAPSHOT_CHUNK])
        conn.send({"kind": "snapshot-end", "revision": revision})
        return revision

    def _stream(self, conn, last):
        """Sender for one subscriber (this connection's thread). Ends when it goes away."""
        watch_log = self.replica.change_log      # objects as stored (compressed JSON), sent as they are
        sent_state, resets = None, watch_log.resets
        self._streams.add(conn)       # first: once counted, drop_subscribers reaches it
        self.subscribers += 1
        try:
            while True:
                state = self._state
                if state != sent_state:
                    conn.send({"kind": "state", "leader": state[0], "term": state[1]})
                    sent_state = state
                if watch_log.resets != resets:
                    resets = watch_log.resets
                    last = self._send_snapshot(conn)
                    continue
                try:
                    changes = watch_log.since(last)
                except WatchExpired as exc:
                    # Costly on both sides (the worker rebuilds its copy meanwhile): say so.
                    if last > 0:
                        log.warning("change stream subscriber at revision %d is behind: %s; sending a snapshot",
                                    last, exc)
                    last = self._send_snapshot(conn)
                    continue
                if changes:
                    for start in range(0, len(changes), CHANGES_PER_FRAME):
                        conn.send_split(lambda part: {"kind": "changes", "changes": part},
                                        [_on_the_wire(c) for c in changes[start:start + CHANGES_PER_FRAME]])
                    last = changes[-1].revision
                    continue
                watch_log.wait_beyond(last, 1.0)
                if watch_log.last_revision <= last and self._state == sent_state:
                    conn.send({"kind": "ping"})      # a subscriber that left is noticed within a second
        except (OSError, lp.ProtocolError) as exc:
            log.info("change stream subscriber left: %s", exc)
        finally:
            self.subscribers -= 1
            self._streams.discard(conn)

    def drop_subscribers(self):
        """Close every change stream (they reconnect and resume from their revision)."""
        for conn in list(self._streams):
            conn.close()

    def close(self):
        if self._listener is not None:
            self._listener.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass
