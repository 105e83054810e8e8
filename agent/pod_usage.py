"""Per-container CPU and memory of this node's pods, for `kubectl top pods`.

Every SAMPLE_SECONDS one pass reads each running container's usage from the runtime
(Docker: its cgroup files, runtime/cgroup_usage.py; hollow: 0, nothing runs) and keeps
the last two readings per container, as the kubelet's cAdvisor keeps its samples:
CPU is the rate between them (nanocores), memory the newest working set. A
container seen only once so far has no rate yet and is left out, as metrics-server
leaves out what it has no two points for. Nothing here is written to the API: the
replicas ask the log server (GET /stats/pods) when someone asks them
(shepherd_ha/api/pod_metrics.py), so usage costs no Raft write per pod.
"""
import logging
import threading
import time

from shepherd_ha.model.times import format_time

from .labels import is_sandbox
from .log_server import CONTAINER_LABEL, NAMESPACE_LABEL, NODE_LABEL, POD_LABEL, POD_UID_LABEL

log = logging.getLogger(__name__)

SAMPLE_SECONDS = 10.0


class PodUsage:
    def __init__(self, runtime, node_name, interval=SAMPLE_SECONDS, clock=time.time, monotonic=time.monotonic):
        self.runtime, self.node_name, self.interval = runtime, node_name, interval
        self._clock, self._monotonic = clock, monotonic
        self._lock = threading.Lock()
        self._readings = {}      # container id -> [(wall, monotonic, cpu ns, memory bytes)] (last two)
        self._about = {}         # container id -> (namespace, pod, pod uid, container, created)
        self._thread = None

    # ---- sampling ----

    def sample(self):
        """One pass over this node's running containers."""
        read = getattr(self.runtime, "usage", None)
        if read is None:
            return              # a runtime without usage: no figures, rather than made-up ones
        try:
            listed = self.runtime.list({NODE_LABEL: self.node_name})
        except Exception as exc:  # noqa: BLE001 - the runtime is down: keep the old readings
            log.info("pod usage: cannot list containers: %s", exc)
            return
        wall, mono = self._clock(), self._monotonic()
        seen = {}
        for c in listed:
            labels = c.labels or {}
            if c.state != "running" or is_sandbox(labels) or labels.get(NODE_LABEL) != self.node_name:
                continue
            about = tuple(labels.get(k) for k in (NAMESPACE_LABEL, POD_LABEL, POD_UID_LABEL, CONTAINER_LABEL))
            if not all(about[:2]) or not about[3]:
                continue
            try:
                reading = read(c.id)
            except Exception as exc:  # noqa: BLE001 - one container's odd answer: leave it out
                log.debug("pod usage of %s: %s", c.id[:12], exc)
                reading = None
            if reading is not None:
                seen[c.id] = (about + (c.created,), (wall, mono) + tuple(int(v) for v in reading))
        with self._lock:
            for cid, (about, reading) in seen.items():
                kept = self._readings.get(cid, [])
                self._readings[cid] = (kept + [reading])[-2:]
                self._about[cid] = about
            for cid in [cid for cid in self._readings if cid not in seen]:
                del self._readings[cid]
                self._about.pop(cid, None)

    def start(self, stop_event):
        def run():
            while not stop_event.is_set():
                started = self._monotonic()
                try:
                    self.sample()
                except Exception:  # noqa: BLE001 - the sampler must outlive a bad pass
                    log.exception("pod usage: a sampling pass failed")
                stop_event.wait(max(0.5, self.interval - (self._monotonic() - started)))
        self._thread = threading.Thread(target=run, name="pod-usage", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout):
        if self._thread is not None:
            self._thread.join(timeout)

    # ---- answers ----

    def pods(self, namespace=None, pod=None):
        """[{namespace, name, uid, timestamp, windowSeconds, containers: [{name,
        cpuNanoCores, memoryWorkingSetBytes}]}] of the pods with a rate for every
        container they run here (namespace/pod None: all)."""
        by_pod = {}
        with self._lock:
            items = [(self._about[cid], list(r)) for cid, r in self._readings.items() if len(r) == 2]
        for (ns, name, uid, container, created), (old, new) in items:
            if (namespace and ns != namespace) or (pod and name != pod):
                continue
            seconds = new[1] - old[1]
            cpu = new[2] - old[2]
            if seconds <= 0 or cpu < 0:       # a counter that went back: restarted in place
                continue
            entry = by_pod.setdefault((ns, name, uid or ""), {"containers": {}, "at": new[0], "window": seconds})
            current = entry["containers"].get(container)
            if current is None or created > current[0]:     # two of one name: the newer one
                entry["containers"][container] = (created, int(cpu / seconds), new[3])    # ns per second: nanocores
        out = []
        for (ns, name, uid), entry in sorted(by_pod.items()):
            out.append({"namespace": ns, "name": name, "uid": uid, "timestamp": format_time(entry["at"]),
                        "windowSeconds": round(entry["window"], 3),
                        "containers": [{"name": c, "cpuNanoCores": cpu, "memoryWorkingSetBytes": mem}
                                       for c, (_, cpu, mem) in sorted(entry["containers"].items())]})
        return out
