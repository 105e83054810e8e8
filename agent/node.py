"""The Node object and its lease.

- registration: creates the Node (labels hostname/os/arch/runtime + --labels,
  capacity and allocatable, addresses, nodeInfo, the agent's HTTP port); when it
  exists already (agent restart) its labels are merged and its status replaced.
  If the Node is deleted while the agent runs, it is registered again (the lease
  loop checks that it still exists on every renewal).
- lease (kube-node-lease/<node>): renewTime with microseconds every
  --lease-interval seconds, a small write the node lifecycle controller judges
  liveness by.
- status: capacity, conditions (Ready True, reason AgentReady; False with reason
  ContainerRuntimeDown while the container runtime cannot be reached) and psutil
  usage every --status-interval seconds, and sooner when cpu or memory moved by 20
  points or the runtime failed or recovered.

Allocatable is capacity minus a reserve for the system and the agent itself
(--reserved-cpu, default 100m; --reserved-memory, default 256Mi), as the
kubelet's system-reserved.
"""
import logging
import socket
import threading
import time

from shepherd_ha import __version__
from shepherd_ha.client import ApiError, ClientError
from shepherd_ha.model.node_lease import LEASE_NAMESPACE
from shepherd_ha.model.quantity import parse_cpu, parse_memory
from shepherd_ha.model.times import format_micro_time, format_time

from . import usage as U
from .config import AGENT_DEFAULTS
from .node_info import node_info

log = logging.getLogger(__name__)

AGENT_VERSION = "shepherd-agent/%s" % __version__
_D = AGENT_DEFAULTS     # the options' defaults (agent/config.py), for callers that pass none


class NodeManager:
    def __init__(self, client, runtime, node_name, address, stop, labels=None, port=0, cpu_millicores=None,
                 memory_bytes=None, reserved_cpu=parse_cpu(_D["reserved_cpu"]),
                 reserved_memory=parse_memory(_D["reserved_memory"]), max_pods=_D["max_pods"],
                 lease_interval=_D["lease_interval"], status_interval=_D["status_interval"], containers=None,
                 hostname=None, runtime_error=None):
        self.client = client
        self.runtime = runtime
        self.name = node_name
        self.address = address
        self.stop = stop
        self.extra_labels = dict(labels or {})
        self.port = int(port or 0)
        self.cpu = int(cpu_millicores if cpu_millicores else U.cpu_millicores())
        self.memory = int(memory_bytes if memory_bytes else U.memory_bytes())
        self.reserved_cpu = int(reserved_cpu)
        self.reserved_memory = int(reserved_memory)
        self.max_pods = int(max_pods)
        self.lease_interval = float(lease_interval)
        self.status_interval = float(status_interval)
        self.lease_duration = max(1, int(round(self.lease_interval * 8)))
        self.hostname = hostname or socket.gethostname()
        self.sampler = U.UsageSampler(containers=containers)
        self.runtime_error = runtime_error or (lambda: None)   # -> message while the runtime fails
        self.registered = threading.Event()
        self._post_now = threading.Event()
        self.node = None              # the Node as last written
        self.last_usage = None        # usage last posted
        self._runtime_failing_posted = False
        self.lease_renewals = 0
        self.status_posts = 0
        self._threads = []

    # ---- the objects ----

    def labels(self):
        labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": U.os_name(),
                  "kubernetes.io/arch": U.arch(), "shepherd.io/runtime": self.runtime.name}
        labels.update(self.extra_labels)
        return labels

    def capacity(self):
        return {"cpu": U.format_cpu(self.cpu), "memory": U.format_memory(self.memory), "pods": str(self.max_pods)}

    def allocatable(self):
        return {"cpu": U.format_cpu(max(0, self.cpu - self.reserved_cpu)),
                "memory": U.format_memory(max(0, self.memory - self.reserved_memory)),
                "pods": str(self.max_pods)}

    def _ready_condition(self, now):
        old = None
        for cond in ((self.node or {}).get("status") or {}).get("conditions") or []:
            if isinstance(cond, dict) and cond.get("type") == "Ready":
                old = cond
        error = self.runtime_error()
        status, reason, message = ("True", "AgentReady", "shepherd-agent is posting ready status") if not error \
            else ("False", "ContainerRuntimeDown", "the %s runtime fails: %s" % (self.runtime.name, error))
        transition = old.get("lastTransitionTime") if old and old.get("status") == status else None
        return {"type": "Ready", "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": transition or now}

    def _others_conditions(self):
        """Conditions the control plane set (NetworkUnavailable from the node IPAM controller):
        a status post keeps them."""
        return [c for c in ((self.node or {}).get("status") or {}).get("conditions") or []
                if isinstance(c, dict) and c.get("type") not in ("Ready", None)]

    def status(self, usage=None):
        now = format_time()
        try:
            runtime_version = self.runtime.version()
        except Exception as exc:  # noqa: BLE001 - the engine may be down for a moment
            runtime_version = "%s://unknown" % self.runtime.name
            log.warning("cannot read the runtime version: %s", exc)
        status = {
            "capacity": self.capacity(), "allocatable": self.allocatable(),
            "addresses": [{"type": "InternalIP", "address": self.address},
                          {"type": "Hostname", "address": self.hostname}],
            "nodeInfo": node_info(runtime_version, AGENT_VERSION),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
            "conditions": [self._ready_condition(now)] + self._others_conditions(),
        }
        if usage is not None:
            status["usage"] = usage
        return status

    def node_object(self, usage=None):
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.name, "labels": self.labels()},
                "spec": {"unschedulable": False}, "status": self.status(usage)}

    # ---- writes ----

    def register(self):
        """Create the Node, or merge our labels into the existing one; then post status."""
        usage = self.sampler.sample()
        try:
            self.node = self.client.create("nodes", self.node_object(usage))
            log.info("registered node %s (address %s, %s cpu, %s memory allocatable)", self.name, self.address,
                     self.allocatable()["cpu"], self.allocatable()["memory"])
        except ApiError as err:
            if err.code != 409:
                raise
            self.node = self.client.patch("nodes", self.name, {"metadata": {"labels": self.labels()}})
            log.info("node %s exists already; labels updated", self.name)
        self.post_status(usage)
        self.registered.set()

    def post_status(self, usage=None):
        usage = usage or self.sampler.sample()
        runtime_failing = bool(self.runtime_error())
        self.node = self.client.patch("nodes", self.name, {"status": self.status(usage)}, subresource="status")
        self.last_usage = usage
        self._runtime_failing_posted = runtime_failing
        self.status_posts += 1

    def lease_object(self):
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE},
                "spec": {"holderIdentity": self.name, "leaseDurationSeconds": self.lease_duration,
                         "renewTime": format_micro_time()}}

    def renew_lease(self):
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": self.lease_duration,
                "renewTime": format_micro_time()}
        try:
            self.client.patch("leases", self.name, {"spec": spec}, namespace=LEASE_NAMESPACE)
        except ApiError as err:
            if err.code != 404:
                raise
            try:
                self.client.create("leases", self.lease_object(), namespace=LEASE_NAMESPACE)
            except ApiError as err2:
                if err2.code != 409:
                    raise
                self.client.patch("leases", self.name, {"spec": spec}, namespace=LEASE_NAMESPACE)
        self.lease_renewals += 1

    # ---- loops ----

    def start(self):
        for name, target in (("node-lease", self._lease_loop), ("node-status", self._status_loop)):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def join(self, timeout=None):
        self._post_now.set()
        deadline = time.monotonic() + (timeout or 0)
        for t in self._threads:
            t.join(None if timeout is None else max(0.0, deadline - time.monotonic()))

    def _lease_loop(self):
        failing = False
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                self.renew_lease()
                if failing:
                    log.info("lease renewed again")
                failing = False
                if self.registered.is_set():
                    usage = self.sampler.sample()
                    if U.big_change(self.last_usage, usage) \
                            or bool(self.runtime_error()) != self._runtime_failing_posted:
                        self._post_now.set()
            except ClientError as exc:
                if not failing:
                    log.warning("cannot renew the node lease: %s (retrying every %.1fs)", exc,
                                self.lease_interval)
                failing = True
            except Exception:  # noqa: BLE001
                log.exception("lease renewal failed")
            self.stop.wait(max(0.0, self.lease_interval - (time.monotonic() - started)))

    def _check_node(self):
        try:
            # Kept: the next status post carries what the control plane set since (NetworkUnavailable).
            self.node = self.client.get("nodes", self.name, consistent=False)
        except ApiError as err:
            if err.code == 404:
                log.warning("node %s was deleted; registering it again", self.name)
                self.registered.clear()
                self._post_now.set()

    def _status_loop(self):
        next_post = 0.0
        while not self.stop.is_set():
            try:
                if not self.registered.is_set():
                    self.register()
                    next_post = time.monotonic() + self.status_interval
                elif self._post_now.is_set() or time.monotonic() >= next_post:
                    self._post_now.clear()
                    # Read the Node once per post, not after every lease renewal: 1,000 agents
                    # GETting theirs every 5 s were as many requests as their renewals, and an
                    # eighth of the replicas' CPU (docs/benchmarks.md, run O). A deleted Node
                    # is found here, within one status interval.
                    self._check_node()
                    if self.registered.is_set():
                        self.post_status()
                    next_post = time.monotonic() + self.status_interval
            except ApiError as err:
                if err.code == 404:
                    log.warning("node %s is gone; registering it again", self.name)
                    self.registered.clear()
                    continue
                log.warning("node status: %s", err)
                self.stop.wait(min(self.lease_interval, 2.0))
                continue
            except ClientError as exc:
                log.warning("node status: %s; retrying", exc)
                self.stop.wait(min(self.lease_interval, 2.0))
                continue
            except Exception:  # noqa: BLE001
                log.exception("node status failed")
                self.stop.wait(2.0)
                continue
            wait = max(0.05, next_post - time.monotonic())
            self._post_now.wait(wait)
            if self.stop.is_set():
                return
