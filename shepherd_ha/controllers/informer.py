"""Feeds the leader's applied changes to its controllers, from the local watch log.

No controller polls the store: the informer starts from an atomic snapshot
(revision R), has every controller queue all its keys, then hands each change
after R to the controllers that watch its resource. If the watch log cannot
serve the next change (the replica installed a snapshot), it starts over.

One thread serves every controller, so nothing a controller does with a change
may stop it: an exception from a controller's handle() costs that change for
that controller only, and is reported on the changed object (`faults.py`).
"""
import logging
import time

from shepherd_ha.store.watch_log import WatchExpired

from .faults import ControllerFaults

log = logging.getLogger("shepherd_ha.controllers")


class Informer:
    def __init__(self, store, controllers, faults=None):
        self.store = store
        self.controllers = list(controllers)
        self.revision = None
        self.faults = faults or ControllerFaults()

    def start_from_snapshot(self):
        _, self.revision = self.store.snapshot([])
        for controller in self.controllers:
            try:
                controller.resync()
            except Exception as exc:
                self._failed(controller.name, "resync", exc, controller)

    def pump(self, wait=0.0):
        """Dispatch every change applied since the last call. Returns how many."""
        if self.revision is None:
            self.start_from_snapshot()
        try:
            changes = self.store.watch_log.since(self.revision)
        except WatchExpired:
            log.info("informer: watch log moved past revision %d; resyncing every controller", self.revision)
            self.start_from_snapshot()
            return 0
        if not changes and wait:
            self.store.watch_log.wait_beyond(self.revision, wait)
            return 0
        for change in changes:
            self.revision = change.revision
            for controller in self.controllers:
                if change.resource in controller.watches:
                    try:
                        controller.handle(change)
                    except Exception as exc:
                        controller.object_failed("informer", change.resource, change.object or change.previous,
                                                 exc)
        return len(changes)

    def run(self, stop):
        while not stop.is_set():
            try:
                self.pump(wait=0.1)
            except Exception as exc:     # not about one change (those are caught above): start over
                self._failed("informer", "pump", exc)
                self.revision = None
                time.sleep(0.1)
            for controller in self.controllers:
                try:
                    controller.maybe_resync()
                except Exception as exc:
                    self._failed(controller.name, "resync", exc, controller)

    def _failed(self, who, stage, exc, controller=None):
        (controller.faults if controller is not None else self.faults).object_failed(who, stage, "", None, exc)
