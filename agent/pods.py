"""The pods of one node: watch them, converge containers to their specs, report status.

PodManager holds the table of this node's pods and runs the threads below. Its
methods live in one module per job, as mixins over the same object (as the kubelet's
methods spread over its files), since every job reads and updates the same pod table.

Threads (all stop with the agent; containers keep running):
- watch (pod_watch.py): lists and watches the pods bound to this node and feeds
  them to `observe` and `forget`.
- workers (--workers): take pod uids from a de-duplicating queue and sync one pod
  at a time (`sync`): a deleted pod is terminated (pod_termination.py), any other
  has its containers converged (pod_sync.py, sandbox.py, container_sync.py,
  container_start.py) and its status reported (status_report.py) to the status
  writer (status_writer.py).
- housekeeping (housekeeping.py): queues the pods whose containers changed outside
  the agent, removes orphaned containers and volumes (orphan_cleanup.py), and
  re-syncs every pod now and then.
- runtime events (housekeeping.py, when the runtime has an event stream): queues a
  pod as soon as one of its containers dies.
- prober (prober.py): runs readiness and liveness probes.
- one short-lived thread per container being killed (container_stop.py) and per pod
  being terminated (pod_termination.py): they wait out grace periods without
  holding a worker.
"""
import logging
import threading
import time

from shepherd_ha.client import resolve_resource

from . import backoff as B
from . import labels as L
from . import volumes as V
from .container_start import ContainerStartMixin
from .container_stop import ContainerStopMixin
from .container_sync import ContainerSyncMixin
from .events import EventSink
from .housekeeping import HousekeepingMixin
from .orphan_cleanup import OrphanCleanupMixin
from .pod_state import PodState, resource_version
from .pod_sync import PodSyncMixin
from .pod_termination import PodTerminationMixin
from .pod_watch import PodWatchMixin
from .runtime.base import RuntimeFailure
from .sandbox import SandboxMixin
from .status_report import StatusReportMixin
from .status_writer import StatusWriter
from shepherd_ha.workqueue import WorkQueue

log = logging.getLogger(__name__)


class PodManager(PodWatchMixin, HousekeepingMixin, OrphanCleanupMixin, PodSyncMixin, SandboxMixin,
                 ContainerSyncMixin, ContainerStartMixin, ContainerStopMixin, PodTerminationMixin,
                 StatusReportMixin):
    def __init__(self, client, runtime, node_name, node_address, stop, backoff_base=B.DEFAULT_BASE,
                 backoff_cap=B.DEFAULT_CAP, sandbox_image="shepherd/busybox:1", housekeeping_interval=2.0,
                 workers=4, probes=True, state_dir=None, events=None, configmap_refresh_interval=60.0,
                 cluster_dns=None, pod_network=None):
        self.client = client
        self.runtime = runtime
        self.node = node_name
        self.address = node_address
        self.stop = stop
        self.backoff_base = float(backoff_base)
        self.backoff_cap = float(backoff_cap)
        self.sandbox_image = sandbox_image
        # agent/dns/pod_dns.ClusterDNS (pods' nameserver and zone), a callable giving one
        # (the node DNS whose address comes with the pod network), or None: Docker's default
        self.cluster_dns = cluster_dns
        self.housekeeping_interval = float(housekeeping_interval)
        self.n_workers = max(1, int(workers))
        self.states = {}              # uid -> PodState
        self._lock = threading.RLock()
        self._tombstones = {}         # uid -> monotonic time of the final delete
        self.queue = WorkQueue()
        self.synced = threading.Event()     # the pods were listed at least once
        self.api_reachable = False
        self.runtime_error = None           # the runtime's last failure, while it fails
        self.writer = StatusWriter(client, self.pod_of, self.observe, stop)
        self.state_dir = state_dir            # the pods' volume directories (agent/volumes.py)
        self.pod_network = pod_network        # agent/network/ (None: Docker's default bridge)
        self.configmap_refresh_interval = float(configmap_refresh_interval)
        self.events = events if events is not None else EventSink(client, node_name, stop)
        self._get_configmap = V.configmap_getter(client)
        self._get_secret = V.secret_getter(client)
        self._threads = []
        self._pods_resource = resolve_resource("pods")
        self.prober = None
        if probes:
            from .prober import Prober
            self.prober = Prober(self, runtime, stop)

    # ------------------------------------------------------------ lifecycle

    def start(self):
        self.writer.start()
        self.events.start()
        targets = [("pod-watch", self._watch_loop), ("housekeeping", self._housekeeping_loop),
                   ("runtime-events", self._events_loop)]
        targets += [("pod-worker-%d" % i, self._worker) for i in range(self.n_workers)]
        for name, target in targets:
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        if self.prober is not None:
            self.prober.start()
        # Adopt what runs already, before the control plane answers: nothing is
        # touched until the pods are listed, but housekeeping knows the containers.

    def shutdown(self, timeout=5.0):
        """Stop the threads (the stop event is set by the caller); containers keep running."""
        self.queue.close()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self.writer.join(max(0.0, deadline - time.monotonic()))
        self.events.join(max(0.0, deadline - time.monotonic()))
        if self.prober is not None:
            self.prober.join(max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------ the pod table

    def pod_of(self, uid):
        state = self.states.get(uid)
        if state is None or state.removed:
            return None
        return state.pod

    def snapshot(self):
        with self._lock:
            return list(self.states.values())

    def observe(self, pod):
        """A pod object from a list, a watch event or a write's answer."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        if not uid or not meta.get("name"):
            return
        if (pod.get("spec") or {}).get("nodeName") != self.node:
            self.forget(pod)
            return
        with self._lock:
            if uid in self._tombstones:
                return
            state = self.states.get(uid)
            if state is None:
                state = self.states[uid] = PodState(pod)
                log.info("pod %s/%s (uid %s) is bound to this node", state.namespace, state.name, uid)
            elif resource_version(pod) < resource_version(state.pod):
                return            # older than what we know
            elif resource_version(pod) == resource_version(state.pod) and not state.removed:
                return
            state.pod = pod
            state.removed = False
        self.queue.add(uid)

    def forget(self, pod):
        """The pod is gone from this node (deleted, or no longer bound here)."""
        uid = (pod.get("metadata") or {}).get("uid")
        with self._lock:
            state = self.states.get(uid)
            if state is None:
                return
            state.removed = True
        self.writer.drop(uid)
        self.queue.add(uid)

    # ------------------------------------------------------------ this node's containers

    def _own_containers(self):
        return self.runtime.list({L.NODE: self.node})

    def _pod_containers(self, uid):
        """ContainerInfo of every container of the pod (all instances, the sandbox too)."""
        out = []
        for c in self.runtime.list({L.NODE: self.node, L.POD_UID: uid}):
            info = self.runtime.inspect(c.id)
            if info is not None:
                out.append(info)
        return out

    def running_containers(self):
        """For the node status."""
        try:
            return sum(1 for c in self._own_containers() if c.state == "running" and not L.is_sandbox(c.labels))
        except RuntimeFailure:
            return None

    # ------------------------------------------------------------ workers

    def _worker(self):
        while not self.stop.is_set():
            uid = self.queue.get(timeout=0.5)
            if uid is None:
                continue
            try:
                self.sync(uid)
            except RuntimeFailure as exc:
                log.warning("sync of pod %s: runtime failure: %s; retrying", uid, exc)
                self.queue.add_after(uid, 1.0)
            except Exception:  # noqa: BLE001 - one bad pod must not stop the others
                log.exception("sync of pod %s failed; retrying", uid)
                self.queue.add_after(uid, 2.0)
            finally:
                self.queue.done(uid)

    def sync(self, uid):
        state = self.states.get(uid)
        if state is None:
            return
        pod = state.pod
        meta = pod.get("metadata") or {}
        if state.removed or meta.get("deletionTimestamp"):
            self._terminate(state)
            return
        if not self.synced.is_set():
            return      # adopt only once we know which pods are ours
        self._sync_running(state, pod)

