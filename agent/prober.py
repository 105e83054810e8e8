"""Runs the readiness and liveness probes of the running containers.

One thread looks every 0.1 s for probes that are due (agent/probes.py's
ProbeState keeps each probe's schedule and thresholds) and runs them on a small
thread pool, so a slow probe never delays the others. A probe result that flips
queues its pod: readiness decides the container's `ready` (and so the pod's Ready
condition and the endpoints); a failed liveness probe makes the pod worker kill the
container, which then restarts per restartPolicy. Every failed run posts an
Unhealthy Event (aggregated by agent/events.py).

Probe states belong to one container instance: a restarted container gets fresh
ones (readiness starts failed, liveness passed), and a result that comes back for
an instance that is gone is dropped. On the hollow runtime only exec probes run
(they always pass); network probes are not run, as hollow pod IPs are fake.
"""
import concurrent.futures
import logging
import threading
import time

log = logging.getLogger(__name__)

TICK = 0.1

from agent.probes import ProbeState, needs_pod_ip, run_probe


class Prober:
    def __init__(self, table, events, runtime, stop, workers=8):
        """table: the PodTable (pod_state.py: snapshot, queue); events: the Event sink."""
        self.table = table
        self.events = events
        self.runtime = runtime
        self.stop = stop
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="probe")
        self._inflight = set()
        self._lock = threading.Lock()
        self._thread = None

    def state_for(self, spec, kind):
        """A started ProbeState for a new container instance, or None without a probe."""
        if not spec:
            return None
        state = ProbeState(spec, kind)
        state.start(time.monotonic())
        return state

    def start(self):
        self._thread = threading.Thread(target=self._run, name="prober", daemon=True)
        self._thread.start()

    def join(self, timeout=None):
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self):
        while not self.stop.wait(TICK):
            try:
                self.tick(time.monotonic())
            except Exception:  # noqa: BLE001
                log.exception("prober tick failed")

    def tick(self, now):
        for pod_state in self.table.snapshot():
            if pod_state.removed or pod_state.terminal:
                continue
            for cs in list(pod_state.containers.values()):
                info = cs.instance
                if info is None or not info.running or cs.probe_instance != info.id:
                    continue
                for probe in (cs.readiness, cs.liveness):
                    if probe is None or id(probe) in self._inflight or not probe.due(now):
                        continue
                    if not pod_state.pod_ip and needs_pod_ip(probe.spec or {}):
                        continue    # not yet: a later tick, once the pod has its address (no Unhealthy event)
                    with self._lock:
                        self._inflight.add(id(probe))
                    self._pool.submit(self._probe, pod_state, cs, probe, info.id)

    def _container_spec(self, pod_state, name):
        for c in (pod_state.pod.get("spec") or {}).get("containers") or []:
            if isinstance(c, dict) and c.get("name") == name:
                return c
        return None

    def _probe(self, pod_state, cs, probe, container_id):
        try:
            spec = probe.spec or {}
            if self.runtime.simulated and not isinstance(spec.get("exec"), dict):
                ok, message = True, "not run on a hollow node"
            else:
                ok, message = run_probe(spec, self.runtime, pod_state.pod_ip, container_id,
                                        self._container_spec(pod_state, cs.name))
            if cs.probe_instance != container_id:
                return      # the instance is gone: a stale result
            if not ok and self.events is not None:
                # every failure, as the kubelet: the sink aggregates repeats into one Event's count
                self.events.emit(pod_state.pod, "Unhealthy", "%s probe failed: %s"
                                 % (probe.kind.capitalize(), message), "Warning", cs.name)
            if probe.record(ok, message, time.monotonic()):
                log.info("pod %s container %s: %s probe %s: %s", pod_state.key, cs.name, probe.kind,
                         "succeeded" if probe.result else "failed", message)
                self.table.queue.add(pod_state.uid)
        except Exception:  # noqa: BLE001
            log.exception("probe of pod %s container %s failed", pod_state.key, cs.name)
        finally:
            with self._lock:
                self._inflight.discard(id(probe))
