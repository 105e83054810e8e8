"""Stopping containers: SIGTERM, the grace period, then SIGKILL; and killing one
container of a running pod (failed liveness probe, changed definition) on a thread
of its own, so a grace period never holds a worker.

ContainerStopper touches the runtime (inspect, signal), the Event sink and, once a
kill is over, requeue(uid) (the pod table's queue); nothing else.
"""
import logging
import signal
import threading
import time

from .runtime.base import RuntimeFailure

log = logging.getLogger(__name__)

KILL_WAIT = 5.0               # seconds to wait for a SIGKILLed container to be gone


class ContainerStopper:
    def __init__(self, runtime, events, stop, requeue):
        self.runtime = runtime
        self.events = events
        self.stop = stop
        self.requeue = requeue          # requeue(uid): sync the pod again

    def kill_async(self, state, cs, info, reason, message):
        cs.killing = info.id
        cs.kill_for = info.id
        cs.kill_reason = reason
        cs.kill_message = message
        self.events.emit(state.pod, "Killing", message, "Normal", cs.name)
        grace = int((state.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30) or 0)
        deadline = time.monotonic() + grace
        log.info("pod %s: %s", state.key, message)

        def run():
            try:
                self.stop_containers([info.id], lambda: deadline)
            except RuntimeFailure as exc:
                log.warning("pod %s: stopping container %s: %s", state.key, info.id[:12], exc)
            finally:
                self.requeue(state.uid)

        threading.Thread(target=run, name="kill-%s" % info.id[:12], daemon=True).start()

    def stop_containers(self, ids, deadline_fn, poll=0.1):
        """SIGTERM the running ones, wait until they exit or deadline_fn() passes
        (asked again on every poll, so a shorter grace period applies at once),
        then SIGKILL. Returns once none runs (or KILL_WAIT after the SIGKILL)."""
        running = [cid for cid in ids if (self.runtime.inspect(cid) or _Gone).running]
        if not running:
            return
        if deadline_fn() > time.monotonic():
            for cid in running:
                self.runtime.signal(cid, signal.SIGTERM)
        while running and time.monotonic() < deadline_fn() and not self.stop.is_set():
            time.sleep(poll)
            running = [cid for cid in running if (self.runtime.inspect(cid) or _Gone).running]
        if self.stop.is_set() and running:
            return
        for cid in running:
            self.runtime.signal(cid, signal.SIGKILL)
        end = time.monotonic() + KILL_WAIT
        while running and time.monotonic() < end:
            time.sleep(poll / 2)
            running = [cid for cid in running if (self.runtime.inspect(cid) or _Gone).running]


# what inspect() answering None (the container is gone) counts as
class _GoneInfo:
    running = False


_Gone = _GoneInfo()
