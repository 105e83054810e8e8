"""Noticing what changed in the runtime behind the agent's back: every
--housekeeping-interval seconds this node's containers are listed, the pods whose
containers changed state (a container killed outside the agent) are queued, orphans
are removed (orphan_cleanup.py) and, every RESYNC_PERIOD, every pod is queued; the
runtime's event stream, when it has one, queues a pod as soon as one of its
containers dies.

Housekeeper touches this node's containers (list; the runtime's event stream),
the pod table (queue, fingerprints, tombstones, synced, api_reachable) and the
orphan cleaner (orphan_cleanup.py). `runtime_error` is the runtime's last
failure while it fails (for the node status).
"""
import logging
import time

from . import labels as L
from .runtime.base import RuntimeFailure

log = logging.getLogger(__name__)

RESYNC_PERIOD = 10.0          # every pod is synced at least this often
TOMBSTONE_SECONDS = 60.0      # a pod deleted for good is ignored if a late event names it


class Housekeeper:
    def __init__(self, runtime, containers, table, orphans, stop, interval=2.0):
        self.runtime = runtime
        self.containers = containers          # NodeContainers (node_containers.py)
        self.table = table                    # PodTable
        self.orphans = orphans                # OrphanCleaner
        self.stop = stop
        self.housekeeping_interval = float(interval)
        self.runtime_error = None             # the runtime's last failure, while it fails

    def run(self):
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
        table = self.table
        by_pod = {}
        for c in self.containers.all():
            by_pod.setdefault(c.labels.get(L.POD_UID, ""), []).append(c)
        if self.runtime_error is not None:
            log.info("the container runtime answers again")
            self.runtime_error = None
        table.expire_tombstones(TOMBSTONE_SECONDS)
        states = table.by_uid()
        for uid, containers in by_pod.items():
            state = states.get(uid)
            if state is None:
                if table.synced.is_set() and table.api_reachable:
                    self.orphans.remove_orphans(uid, containers)
                continue
            fingerprint = tuple(sorted((c.id, c.state) for c in containers))
            if fingerprint != state.fingerprint:
                state.fingerprint = fingerprint
                table.queue.add(uid)
        for uid, state in states.items():
            if uid not in by_pod and state.fingerprint:
                state.fingerprint = ()
                table.queue.add(uid)
            elif resync:
                table.queue.add(uid)
        if resync and table.synced.is_set() and table.api_reachable:
            self.orphans.remove_orphaned_volumes(set(by_pod))

    def events_loop(self):
        try:
            for cid, action, labels in self.runtime.events({L.NODE: self.table.node}, self.stop):
                uid = labels.get(L.POD_UID)
                if uid and self.table.get(uid) is not None:
                    self.table.queue.add(uid)
        except Exception:  # noqa: BLE001 - housekeeping still notices changes
            log.exception("runtime event stream failed; relying on housekeeping")
