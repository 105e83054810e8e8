"""The pods of one node: watch them, converge containers to their specs, report status.

PodManager wires the parts below, each constructed with what it may touch, and runs
the threads; it keeps no pod state of its own.

Parts (constructor: what it may touch):
- PodTable (pod_state.py): node name, queue. The pods bound here by uid, their
  PodState, the lock, the de-duplicating queue, `synced`, `api_reachable`.
- PodWatch (pod_watch.py): client, table. Lists and watches the pods bound here.
- NodeContainers (node_containers.py): runtime, node. This node's containers.
- ContainerStopper (container_stop.py): runtime, events, requeue. SIGTERM, grace, SIGKILL.
- SandboxKeeper (sandbox.py): runtime, events, pod network, cluster DNS, sandbox image.
- ContainerStarter (container_start.py): runtime, events, node containers, volumes
  (state dir, ConfigMap/Secret getters), cluster DNS, pod network, prober.
- ContainerSync (container_sync.py): runtime, events, starter, stopper, prober.
- ContainerRunner (pod_sync.py): runtime, node containers, sandbox keeper, container
  sync, report, requeue_after, configMap volume refresh. Converges a running pod.
- StatusReporter (status_report.py): the StatusWriter (status_writer.py).
- Terminator (pod_termination.py): client, runtime, node containers, stopper, events,
  table, drop_status. Graceful stop and final delete.
- OrphanCleaner (orphan_cleanup.py): client, runtime, table, state dir.
- Housekeeper (housekeeping.py): runtime, node containers, table, orphan cleaner.

Threads (all stop with the agent; containers keep running):
- watch (PodWatch.run): feeds the table.
- workers (--workers): take pod uids from the table's queue and sync one pod at a
  time (`sync`): a deleted pod is terminated (Terminator), any other has its
  containers converged (ContainerRunner) and its status reported (StatusReporter)
  to the status writer.
- housekeeping (Housekeeper.run): queues the pods whose containers changed outside
  the agent, removes orphaned containers and volumes, re-syncs every pod now and then.
- runtime events (Housekeeper.events_loop, when the runtime has an event stream):
  queues a pod as soon as one of its containers dies.
- prober (prober.py: table, events, runtime): runs readiness and liveness probes.
- one short-lived thread per container being killed (container_stop.py) and per pod
  being terminated (pod_termination.py): they wait out grace periods without
  holding a worker.
"""
import logging
import threading
import time

from . import backoff as B
from . import volumes as V
from .container_start import ContainerStarter
from .container_stop import ContainerStopper
from .container_sync import ContainerSync
from .events import EventSink
from .housekeeping import Housekeeper
from .node_containers import NodeContainers
from .orphan_cleanup import OrphanCleaner
from .pod_state import PodTable
from .pod_sync import ContainerRunner
from .pod_termination import Terminator
from .pod_watch import PodWatch
from .runtime.base import RuntimeFailure
from .sandbox import SandboxKeeper
from .status_report import StatusReporter
from .status_writer import StatusWriter

log = logging.getLogger(__name__)


class PodManager:
    def __init__(self, client, runtime, node_name, node_address, stop, backoff_base=B.DEFAULT_BASE,
                 backoff_cap=B.DEFAULT_CAP, sandbox_image="shepherd/busybox:1", housekeeping_interval=2.0,
                 workers=4, probes=True, state_dir=None, events=None, configmap_refresh_interval=60.0,
                 cluster_dns=None, pod_network=None):
        self.runtime = runtime
        self.node = node_name
        self.stop = stop
        self.n_workers = max(1, int(workers))
        self._threads = []
        self.table = table = PodTable(node_name)
        self.queue = table.queue
        self.synced = table.synced
        self.states = table.states
        self.writer = StatusWriter(client, table.pod_of, table.observe, stop)
        table.on_forget(self.writer.drop)
        self.events = events if events is not None else EventSink(client, node_name, stop)
        self.prober = None
        if probes:
            from .prober import Prober
            self.prober = Prober(table, self.events, runtime, stop)
        self.containers = NodeContainers(runtime, node_name)
        self.watch = PodWatch(client, table, stop)
        self.reporter = StatusReporter(self.writer, runtime.name, node_address)
        self.stopper = ContainerStopper(runtime, self.events, stop, requeue=table.queue.add)
        get_configmap = V.configmap_getter(client)
        starter = ContainerStarter(runtime, self.events, self.containers, node_name, node_address,
                                   state_dir=state_dir, get_configmap=get_configmap,
                                   get_secret=V.secret_getter(client), cluster_dns=cluster_dns,
                                   pod_network=pod_network, prober=self.prober, backoff_base=backoff_base)
        self.runner = ContainerRunner(
            runtime, self.containers,
            SandboxKeeper(runtime, self.events, node_name, node_address, sandbox_image, cluster_dns=cluster_dns,
                          pod_network=pod_network, backoff_base=backoff_base, backoff_cap=backoff_cap),
            ContainerSync(runtime, self.events, starter, self.stopper, self.prober),
            self.reporter.report, table.queue.add_after, node_address,
            backoff_base=backoff_base, backoff_cap=backoff_cap, state_dir=state_dir, get_configmap=get_configmap,
            configmap_refresh_interval=configmap_refresh_interval, api_reachable=lambda: table.api_reachable)
        self.terminator = Terminator(client, runtime, self.containers, self.stopper, self.events, table,
                                     self.writer.drop, stop, state_dir=state_dir)
        self.housekeeper = Housekeeper(runtime, self.containers, table,
                                       OrphanCleaner(client, runtime, table, state_dir=state_dir), stop,
                                       interval=housekeeping_interval)

    # ------------------------------------------------------------ lifecycle

    def start(self):
        self.writer.start()
        self.events.start()
        targets = [("pod-watch", self.watch.run), ("housekeeping", self.housekeeper.run),
                   ("runtime-events", self.housekeeper.events_loop)]
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

    # ------------------------------------------------------------ the surface others use

    @property
    def api_reachable(self):
        return self.table.api_reachable

    @api_reachable.setter
    def api_reachable(self, value):
        self.table.api_reachable = value

    @property
    def runtime_error(self):
        """The runtime's last failure, while it fails (for the node status)."""
        return self.housekeeper.runtime_error

    def pod_of(self, uid):
        return self.table.pod_of(uid)

    def snapshot(self):
        return self.table.snapshot()

    def observe(self, pod):
        self.table.observe(pod)

    def forget(self, pod):
        self.table.forget(pod)

    def housekeeping(self, resync=False):
        self.housekeeper.housekeeping(resync=resync)

    def container_statuses(self, state, pod):
        return self.reporter.container_statuses(state, pod)

    def running_containers(self):
        """For the node status."""
        return self.containers.running_count()

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
        state = self.table.get(uid)
        if state is None:
            return
        pod = state.pod
        meta = pod.get("metadata") or {}
        if state.removed or meta.get("deletionTimestamp"):
            self.terminator.terminate(state)
            return
        if not self.synced.is_set():
            return      # adopt only once we know which pods are ours
        self.runner.converge(state, pod)
