"""Feeds the leader's applied changes to its controllers, from the local watch log.

No controller polls the store: the informer starts from an atomic snapshot
(revision R), has every controller queue all its keys, then hands each change
after R to the controllers that watch its resource. If the watch log cannot
serve the next change (the replica installed a snapshot), it starts over.
"""
import logging

from shepherd_ha.store.watch_log import WatchExpired

log = logging.getLogger("shepherd_ha.controllers")


class Informer:
    def __init__(self, store, controllers):
        self.store = store
        self.controllers = list(controllers)
        self.revision = None

    def start_from_snapshot(self):
        _, self.revision = self.store.snapshot([])
        for controller in self.controllers:
            controller.resync()

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
                    controller.handle(change)
        return len(changes)

    def run(self, stop):
        while not stop.is_set():
            self.pump(wait=0.1)
            for controller in self.controllers:
                controller.maybe_resync()
