"""Starting an instance of a container: pull its image per imagePullPolicy,
resolve its env and volumes, create and start it, posting the kubelet's Events;
a failed pull or create is retried with its own backoff.

ContainerStarter touches the runtime, the Event sink, this node's containers (a
leftover of the same name), the pods' volumes (--state-dir, ConfigMaps and Secrets
through the getters), the securityContext checks, the cluster DNS, the pod network
hook and the prober (fresh probe states per instance); it updates the
ContainerState it is handed.
"""
import logging

from . import backoff as B
from . import security_context as S
from . import spec as P
from .dns.pod_dns import resolver_config
from . import volumes as V
from .runtime.base import ContainerGone, CreateError, ImagePullError, NotReadyYet

log = logging.getLogger(__name__)


def attach_probes(prober, c, cs, info):
    """Fresh probe states for a new running instance (none without a prober)."""
    if cs.probe_instance == info.id:
        return
    cs.probe_instance = info.id
    cs.readiness = cs.liveness = None
    if prober is None:
        return
    cs.readiness = prober.state_for(c.get("readinessProbe"), "readiness")
    cs.liveness = prober.state_for(c.get("livenessProbe"), "liveness")


def drop_probes(cs):
    cs.probe_instance = None
    cs.readiness = cs.liveness = None


class ContainerStarter:
    def __init__(self, runtime, events, containers, node, address, state_dir=None, get_configmap=None,
                 get_secret=None, cluster_dns=None, pod_network=None, prober=None, backoff_base=B.DEFAULT_BASE):
        self.runtime = runtime
        self.events = events
        self.containers = containers          # NodeContainers (node_containers.py)
        self.node = node
        self.address = address
        self.state_dir = state_dir            # the pods' volume directories (agent/volumes.py)
        self._get_configmap = get_configmap
        self._get_secret = get_secret
        self.cluster_dns = cluster_dns
        self.pod_network = pod_network
        self.prober = prober
        self.backoff_base = float(backoff_base)

    def _retry_later(self, cs, reason, message, now):
        cs.waiting = (reason, message)
        cs.retry_pending = True
        cs.retry_at = now + max(self.backoff_base / 10.0, cs.retry_backoff.next_delay())
        return cs.retry_at - now

    def start(self, state, pod, c, cs, attempt, sandbox_id, last, now):
        """Pull if needed, create and start instance number `attempt`; returns the
        seconds until the next look (None when it started)."""
        name = c.get("name")
        image = c.get("image") or ""
        policy = c.get("imagePullPolicy") or "IfNotPresent"
        if P.needs_sandbox(pod) and not sandbox_id:
            cs.waiting = ("ContainerCreating", state.sandbox_error or "waiting for the pod's network")
            return None
        emit = self.events.emit
        try:
            present = self.runtime.image_present(image)
            if policy == "Never" and not present:
                message = 'Container image "%s" is not present with pull policy of Never' % image
                emit(pod, "ErrImageNeverPull", message, "Warning", name)
                return self._retry_later(cs, "ErrImageNeverPull", message, now)
            if policy == "Always" or not present:
                emit(pod, "Pulling", 'Pulling image "%s"' % image, "Normal", name)
                try:
                    self.runtime.pull_image(image)
                except ImagePullError as exc:
                    reason = "ErrImagePull" if cs.retry_backoff.level == 0 else "ImagePullBackOff"
                    message = ('Failed to pull image "%s": %s' % (image, exc)) if reason == "ErrImagePull" \
                        else 'Back-off pulling image "%s": %s' % (image, exc)
                    emit(pod, "Failed", 'Failed to pull image "%s": %s' % (image, exc), "Warning", name)
                    if reason == "ImagePullBackOff":
                        emit(pod, "BackOff", 'Back-off pulling image "%s"' % image, "Normal", name)
                    return self._retry_later(cs, reason, message, now)
                emit(pod, "Pulled", 'Successfully pulled image "%s"' % image, "Normal", name)
            else:
                emit(pod, "Pulled", 'Container image "%s" already present on machine' % image, "Normal", name)
            try:
                get_secret = self._get_secret
                env = V.resolve_env(pod, c, self._get_configmap, get_secret)
                mounts = V.prepare_mounts(pod, c, self.state_dir, self._get_configmap,
                                          write=not self.runtime.simulated, get_secret=get_secret)
            except (V.ConfigProblem, OSError) as exc:
                message = str(exc) if isinstance(exc, V.ConfigProblem) else \
                    "pod volumes under --state-dir %s: %s" % (self.state_dir, exc)
                emit(pod, getattr(exc, "event", "FailedMount"), "Error: %s" % message, "Warning", name)
                return self._retry_later(cs, "CreateContainerConfigError", message, now)
            image_user = self.runtime.image_user(image)
            problem = S.non_root_problem(pod, c, image_user)
            if problem:
                emit(pod, "Failed", "Error: %s" % problem, "Warning", name)
                return self._retry_later(cs, "CreateContainerConfigError", problem, now)
            config = P.container_config(pod, c, self.node, self.address, attempt, sandbox_id, last,
                                        env=env, mounts=mounts, image_user=image_user or "",
                                        dns=resolver_config(pod, self.cluster_dns))
            attached = self.pod_network is not None and config.network_mode == "bridge"
            if attached:
                config = self.pod_network.attach(config, pod)     # raises CreateError while not ready
            try:
                cid = self.runtime.create(config)
            except CreateError as exc:
                if "Conflict" in str(exc) and "already in use" in str(exc):
                    self.containers.remove_named(config.name)
                    cid = self.runtime.create(config)
                else:
                    raise
            emit(pod, "Created", "Created container %s" % name, "Normal", name)
            try:
                self.runtime.start(cid)
            except (CreateError, ContainerGone):
                self.runtime.remove(cid)
                raise
            if attached:
                self.pod_network.started()        # its bridge port exists now: hairpin mode
            emit(pod, "Started", "Started container %s" % name, "Normal", name)
        except NotReadyYet as exc:          # the node's network or DNS comes up: wait, not an error
            return self._retry_later(cs, "ContainerCreating", str(exc), now)
        except CreateError as exc:
            emit(pod, "Failed", "Error: %s" % exc, "Warning", name)
            return self._retry_later(cs, "CreateContainerError", str(exc), now)
        log.info("pod %s: started container %s (%s, restart %d)", state.key, name, cid[:12], attempt)
        cs.restart_count = attempt
        cs.waiting = None
        cs.final = None
        cs.retry_at = None
        cs.retry_pending = False
        cs.retry_backoff.reset()
        cs.last_terminated = last
        cs.gone = None
        info = self.runtime.inspect(cid)
        cs.instance = info
        if info is not None and info.running:
            attach_probes(self.prober, c, cs, info)
        if info is not None and not info.running:
            return 0.05      # it exited at once: look again
        return None
