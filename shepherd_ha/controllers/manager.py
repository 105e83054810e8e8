"""Runs the controllers on the Raft leader only, fenced by a committed claim.

On winning an election the manager commits claim(term, replica); the FSM keeps
the highest claim as the controller epoch and refuses controller writes from any
other epoch. Controllers start only once the claim is applied here, and stop
within one tick (0.1 s) of this replica losing leadership; any write a deposed
leader still had queued is refused by the FSM, whatever the timing.
"""
import logging
import threading
import time

from shepherd_ha.store.raft_node import Unavailable

from .informer import Informer
from .store_access import StoreAccess

log = logging.getLogger("shepherd_ha.controllers")

TICK = 0.1


class ControllerManager:
    def __init__(self, replica, factories, clock=time.monotonic):
        self.replica = replica
        self.factories = list(factories)     # callables: StoreAccess -> [Controller, ...]
        self.clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self.active_epoch = None
        self.controllers = []
        self.activations = 0
        node = replica.node
        self._led_term = node.term() if node.is_leader() else None
        threading.Thread(target=self._supervise, name="controller-manager", daemon=True).start()

    def leadership_changed(self, leader):
        """Raft callback (tick thread, right after the role changed): never block it; note
        the term this replica now leads and wake the supervisor. PySyncObj stores a newer
        term before it steps down, so another thread reading is_leader() then term() may
        pair the old role with the new term; the term noted here is read on the tick
        thread itself, where the two agree."""
        self._led_term = self.replica.node.term() if leader else None
        self._wake.set()

    def _leading_term(self):
        """The Raft term this replica leads right now, or None."""
        led, node = self._led_term, self.replica.node
        return led if led is not None and node.is_leader() and node.term() == led else None

    def _supervise(self):
        stop = None
        epoch = None
        while True:
            self._wake.wait(TICK)
            self._wake.clear()
            term = self._leading_term()
            leading = term is not None
            if stop is not None and (not leading or term != epoch[0]):
                log.info("controllers stopping: replica %s no longer leads term %d", self.replica.id, epoch[0])
                stop.set()
                stop, epoch = None, None
                with self._lock:
                    self.active_epoch, self.controllers = None, []
            if stop is None and leading:
                if self._claim(term):
                    epoch = [term, self.replica.id]
                    stop = threading.Event()
                    try:
                        self._start(epoch, stop)
                    except Exception:
                        log.exception("controllers failed to start for epoch %s; retrying", epoch)
                        stop.set()
                        stop, epoch = None, None
                        time.sleep(1.0)

    def _claim(self, term):
        try:
            result = self.replica.committer.call({"type": "claim", "term": term, "replica": self.replica.id},
                                                 self.replica.write_timeout)
        except Unavailable as exc:
            log.info("controller claim for term %d not committed: %s", term, exc)
            return False
        if not result.get("ok"):
            log.info("controller claim for term %d refused: %s", term, result.get("message"))
            return False
        # Still leading the same term once the claim is applied here?
        return self._leading_term() == term

    def _start(self, epoch, stop):
        node = self.replica.node
        committer = self.replica.committer
        store = StoreAccess(node.lock, lambda: node.fsm, self.replica.watch_log, committer.call,
                            committer.call_many, epoch, self.clock, self.replica.write_timeout)
        controllers = [c for factory in self.factories for c in factory(store)]
        informer = Informer(store, controllers)
        informer.start_from_snapshot()
        threading.Thread(target=informer.run, args=(stop,), name="informer", daemon=True).start()
        for controller in controllers:
            controller.start(stop)
        with self._lock:
            self.active_epoch, self.controllers = epoch, controllers
            self.activations += 1
        log.info("controllers started on %s with epoch %s: %s", self.replica.id, epoch,
                 ", ".join(c.name for c in controllers) or "none")

    def status(self):
        with self._lock:
            return {"active": self.active_epoch is not None, "epoch": self.active_epoch,
                    "controllers": [c.name for c in self.controllers], "activations": self.activations}
