"""Runs the controllers on the Raft leader only, fenced by a committed claim.

On winning an election the manager commits claim(term, replica); the FSM keeps
the highest claim as the controller epoch and refuses controller writes from any
other epoch. Controllers start only once the claim is applied here, and stop
within one tick (0.1 s) of this replica losing leadership; any write a deposed
leader still had queued is refused by the FSM, whatever the timing.

The same tick restarts any controller thread (informer, workers) that died
(`threads.py`); `status()` claims the controllers active only while every thread
of the epoch runs, and carries what `faults.py` counted (objects skipped,
threads restarted), which `/metrics` exports.
"""
import logging
import threading
import time

from shepherd_ha.store import commands
from shepherd_ha.store.raft_node import Unavailable

from .faults import ControllerFaults
from .informer import Informer
from .store_access import StoreAccess
from .threads import SupervisedThreads

log = logging.getLogger("shepherd_ha.controllers")

TICK = 0.1


class ControllerManager:
    def __init__(self, replica, factories, clock=time.monotonic, pacer=None, event_budgets=None):
        self.replica = replica
        self.factories = list(factories)     # callables: StoreAccess -> [Controller, ...]
        self.clock = clock
        self.pacer = pacer                   # write_pacing.WritePacer: writes yield to node heartbeats
        self.event_budgets = event_budgets   # events.EventBudgets of the factories' recorders, or None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self.active_epoch = None
        self.controllers = []
        self.activations = 0
        self.faults = ControllerFaults()     # for as long as the process lives: counts survive leader changes
        self._threads = None                 # SupervisedThreads of the running epoch
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
        self._stop, self._epoch = None, None
        while True:
            self._wake.wait(TICK)
            self._wake.clear()
            try:
                self._tick()
            except Exception:        # this thread must outlive anything one tick meets
                log.exception("controller manager tick failed; trying again")
                time.sleep(1.0)

    def _tick(self):
        term = self._leading_term()
        leading = term is not None
        if self._stop is not None and (not leading or term != self._epoch[0]):
            log.info("controllers stopping: replica %s no longer leads term %d", self.replica.id, self._epoch[0])
            self._stop.set()
            self._stop, self._epoch = None, None
            if self.pacer is not None:
                self.pacer.watch_heartbeats(None)
            with self._lock:
                self.active_epoch, self.controllers, self._threads = None, [], None
        if self._stop is None and leading:
            if self._claim(term):
                epoch = [term, self.replica.id]
                stop = threading.Event()
                self._stop, self._epoch = stop, epoch
                try:
                    self._start(epoch, stop)
                except Exception:
                    log.exception("controllers failed to start for epoch %s; retrying", epoch)
                    stop.set()
                    self._stop, self._epoch = None, None
                    if self.pacer is not None:
                        self.pacer.watch_heartbeats(None)
                    time.sleep(1.0)
        threads = self._threads
        if threads is not None:
            threads.check()

    def _claim(self, term):
        try:
            result = self.replica.committer.call(commands.claim(term, self.replica.id), self.replica.write_timeout)
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
                            committer.call_many, epoch, self.clock, self.replica.write_timeout, pacer=self.pacer,
                            stop=stop)
        controllers = [c for factory in self.factories for c in factory(store)]
        for controller in controllers:
            if not controller.paced_writes:
                controller.store = store.unpaced()
        for controller in controllers:
            controller.faults = self.faults
        if self.pacer is not None:
            # The nodes whose heartbeats are late, as the node lifecycle controller sees them,
            # are pressure on the pacer too (beside the system level's refusals and queue).
            self.pacer.watch_heartbeats(next((c.heartbeats_at_risk for c in controllers
                                              if hasattr(c, "heartbeats_at_risk")), None))
        informer = Informer(store, controllers, self.faults)
        informer.start_from_snapshot()
        threads = SupervisedThreads(stop, self.faults, self.clock)
        # A restarted informer starts over from a snapshot: the change it died on may be lost.
        threads.spawn("informer", informer.run, lambda name: setattr(informer, "revision", None))
        for controller in controllers:
            for name, target in controller.thread_specs():
                threads.spawn(name, target, controller.thread_restarted)
        with self._lock:
            self.active_epoch, self.controllers, self._threads = epoch, controllers, threads
            self.activations += 1
        log.info("controllers started on %s with epoch %s: %s", self.replica.id, epoch,
                 ", ".join(c.name for c in controllers) or "none")

    def status(self, counts=False):
        """What /shepherd/v1/replica shows; with counts, what /metrics exports as well."""
        with self._lock:
            epoch, names, threads = self.active_epoch, [c.name for c in self.controllers], self._threads
            activations = self.activations
        dead = threads.dead() if threads is not None else []
        status = {"active": epoch is not None and not dead, "epoch": epoch, "controllers": names,
                  "activations": activations, "threads": len(threads) if threads is not None else 0,
                  "deadThreads": dead}
        status.update(self.faults.summary())
        if self.pacer is not None:
            status["writePacing"] = self.pacer.status()
        if self.event_budgets is not None:
            status["eventsDropped"] = self.event_budgets.dropped()
        if counts:
            status["errorCounts"] = self.faults.counts()
            status["restartCounts"] = dict(self.faults.restarts)
        return status
