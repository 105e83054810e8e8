"""Noticing what changed in the runtime behind the agent's back: every
--housekeeping-interval seconds this node's containers are listed, the pods whose
containers changed state (a container killed outside the agent) are queued, orphans
are removed (orphan_cleanup.py) and, every RESYNC_PERIOD, every pod is queued; the
runtime's event stream, when it has one, queues a pod as soon as one of its
containers dies.

A mixin of PodManager (agent/pods.py), whose attributes it uses.
"""
import logging
import time

from . import labels as L
from .runtime.base import RuntimeFailure

log = logging.getLogger(__name__)

RESYNC_PERIOD = 10.0          # every pod is synced at least this often
TOMBSTONE_SECONDS = 60.0      # a pod deleted for good is ignored if a late event names it


class HousekeepingMixin:
    def _housekeeping_loop(self):
        last_resync = time.monotonic()
        while not self.stop.wait(self.housekeeping_interval):
            try:
                self.housekeeping(resync=time.monotonic() - last_resync >= RESYNC_PERIOD)
                if time.monotonic() - last_resync >= RESYNC_PERIOD:
                    last_resync = time.monotonic()
            except RuntimeFailure as exc:
                if self.runtime_error is None:
                    log.warning("cannot list this node's containers: %s", exc)
                self.runtime_error = str(exc)
            except Exception:  # noqa: BLE001
                log.exception("housekeeping failed")

    def housekeeping(self, resync=False):
        """One pass: queue pods whose containers changed, remove orphans."""
        by_pod = {}
        for c in self._own_containers():
            by_pod.setdefault(c.labels.get(L.POD_UID, ""), []).append(c)
        if self.runtime_error is not None:
            log.info("the container runtime answers again")
            self.runtime_error = None
        now = time.monotonic()
        with self._lock:
            for uid, t in list(self._tombstones.items()):
                if now - t > TOMBSTONE_SECONDS:
                    del self._tombstones[uid]
            states = dict(self.states)
        for uid, containers in by_pod.items():
            state = states.get(uid)
            if state is None:
                if self.synced.is_set() and self.api_reachable:
                    self._remove_orphans(uid, containers)
                continue
            fingerprint = tuple(sorted((c.id, c.state) for c in containers))
            if fingerprint != state.fingerprint:
                state.fingerprint = fingerprint
                self.queue.add(uid)
        for uid, state in states.items():
            if uid not in by_pod and state.fingerprint:
                state.fingerprint = ()
                self.queue.add(uid)
            elif resync:
                self.queue.add(uid)
        if resync and self.synced.is_set() and self.api_reachable:
            self._remove_orphaned_volumes(set(by_pod))

    def _events_loop(self):
        try:
            for cid, action, labels in self.runtime.events({L.NODE: self.node}, self.stop):
                uid = labels.get(L.POD_UID)
                if uid and uid in self.states:
                    self.queue.add(uid)
        except Exception:  # noqa: BLE001 - housekeeping still notices changes
            log.exception("runtime event stream failed; relying on housekeeping")
