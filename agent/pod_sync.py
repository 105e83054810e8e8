"""Converging a running pod: sort its containers' instances, keep its sandbox (the
network holder of a multi-container pod, sandbox.py), converge each container
(container_sync.py), set the pod IP, refresh configMap volumes and report the status
(status_report.py).

ContainerRunner touches the runtime and this node's containers, the sandbox keeper
(sandbox.py), the container sync (container_sync.py, with its starter and stopper),
the pods' configMap volumes, report(state, pod, policy) (the status reporter) and
requeue_after(uid, seconds) (the pod table's queue); api_reachable() says whether
ConfigMaps can be read now.
"""
import logging
import time

from . import backoff as B
from . import labels as L
from . import spec as P
from . import volumes as V
from .pod_state import ContainerState

log = logging.getLogger(__name__)


class ContainerRunner:
    def __init__(self, runtime, containers, sandboxes, container_sync, report, requeue_after, address,
                 backoff_base=B.DEFAULT_BASE, backoff_cap=B.DEFAULT_CAP, state_dir=None, get_configmap=None,
                 configmap_refresh_interval=60.0, api_reachable=lambda: True):
        self.runtime = runtime
        self.containers = containers          # NodeContainers (node_containers.py)
        self.sandboxes = sandboxes            # SandboxKeeper
        self.container_sync = container_sync  # ContainerSync
        self.report = report
        self.requeue_after = requeue_after
        self.address = address
        self.backoff_base = float(backoff_base)
        self.backoff_cap = float(backoff_cap)
        self.state_dir = state_dir
        self._get_configmap = get_configmap
        self.configmap_refresh_interval = float(configmap_refresh_interval)
        self.api_reachable = api_reachable

    def converge(self, state, pod):
        """Bring a running (not deleted) pod's containers to its spec and report its status."""
        spec = pod.get("spec") or {}
        policy = spec.get("restartPolicy") or "Always"
        containers = P.containers_of(pod)
        names = [c.get("name") for c in containers]
        infos = self.containers.of_pod(state.uid)
        now = time.monotonic()
        wake = []                  # seconds after which to sync again

        sandboxes = [i for i in infos if L.is_sandbox(i.labels)]
        instances = {}
        for info in infos:
            if L.is_sandbox(info.labels):
                continue
            cname = info.labels.get(L.CONTAINER_NAME)
            if cname not in names:
                log.info("pod %s: removing container %s of unknown container %r", state.key, info.id[:12], cname)
                self.runtime.remove(info.id)
                continue
            instances.setdefault(cname, []).append(info)

        # the network holder of a multi-container pod
        sandbox_id = None
        if P.needs_sandbox(pod) and not state.terminal:
            sandbox_id, delay = self.sandboxes.ensure(state, pod, sandboxes, instances)
            if delay is not None:
                wake.append(delay)
        elif sandboxes and not P.needs_sandbox(pod):
            for sb in sandboxes:
                self.runtime.remove(sb.id)
        elif sandboxes:
            state.sandbox = max(sandboxes, key=lambda i: L.restart_count_of(i.labels))

        for c in containers:
            name = c.get("name")
            cs = state.containers.get(name)
            if cs is None:
                cs = state.containers[name] = ContainerState(name, self.backoff_base, self.backoff_cap)
            latest, kept = self._latest(state, cs, instances.get(name) or [])
            delay = self.container_sync.sync(state, pod, c, cs, latest, policy, sandbox_id, now, kept)
            if delay is not None:
                wake.append(delay)

        # pod IP: the network owner's address
        if P.host_network(pod):
            state.pod_ip = self.address
        elif P.needs_sandbox(pod):
            if state.sandbox is not None and state.sandbox.running and state.sandbox.ip:
                state.pod_ip = state.sandbox.ip
        else:
            cs = state.containers.get(names[0]) if names else None
            if cs is not None and cs.instance is not None and cs.instance.running and cs.instance.ip:
                state.pod_ip = cs.instance.ip

        self._refresh_volumes(state, pod, now)
        self.report(state, pod, policy)
        if state.terminal and P.needs_sandbox(pod) and state.sandbox is not None and state.sandbox.running:
            self.runtime.remove(state.sandbox.id)
        if wake:
            self.requeue_after(state.uid, max(0.05, min(wake)))

    def _refresh_volumes(self, state, pod, now):
        """Running pods see their ConfigMaps' changes in configMap volumes, at most
        every --configmap-refresh-interval (pods are synced every housekeeping.RESYNC_PERIOD)."""
        if (state.terminal or not self.state_dir or self.runtime.simulated or not self.api_reachable()
                or now - state.volumes_refreshed < self.configmap_refresh_interval
                or not V.has_configmap_volumes(pod)):
            return
        state.volumes_refreshed = now
        try:
            V.refresh_configmap_volumes(pod, self.state_dir, self._get_configmap)
        except OSError as exc:
            log.warning("pod %s: refreshing configMap volumes: %s", state.key, exc)

    def _latest(self, state, cs, instances):
        """The newest instance and the exited one kept before it (for `logs --previous`), each
        or None; older ones are removed (a running duplicate is killed)."""
        if not instances:
            return None, None
        instances.sort(key=lambda i: (L.restart_count_of(i.labels), i.running, i.started_at or ""))
        latest = instances[-1]
        older = instances[:-1]
        kept = None
        for info in reversed(older):
            if info.running:
                log.warning("pod %s: container %s has a second running instance %s; removing it",
                            state.key, cs.name, info.id[:12])
                self.runtime.remove(info.id)
            elif kept is None:
                kept = info
            else:
                self.runtime.remove(info.id)
        return latest, kept
