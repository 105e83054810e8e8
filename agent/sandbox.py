"""The sandbox of a multi-container pod: a container that owns the pod's network,
which the pod's containers join, so the pod has one IP.

A mixin of PodManager (agent/pods.py), whose attributes it uses.
"""
import logging
import time

from . import backoff as B
from . import labels as L
from . import spec as P
from .dns.pod_dns import resolver_config
from .runtime.base import ContainerGone, CreateError

log = logging.getLogger(__name__)


class SandboxMixin:
    def _ensure_sandbox(self, state, pod, sandboxes, instances):
        """The running sandbox's id (or None) and when to look again."""
        sandboxes.sort(key=lambda i: L.restart_count_of(i.labels))
        current = sandboxes[-1] if sandboxes else None
        for old in sandboxes[:-1]:
            self.runtime.remove(old.id)
        if current is not None and current.running:
            state.sandbox = current
            state.sandbox_error = None
            return current.id, None
        now = time.monotonic()
        if state.sandbox_retry_at is not None and now < state.sandbox_retry_at:
            return None, state.sandbox_retry_at - now
        # a new network: the containers in the old one must go
        for infos in instances.values():
            for info in infos:
                if info.running:
                    log.info("pod %s: the pod network is gone; stopping container %s", state.key, info.id[:12])
                    self.runtime.remove(info.id)
            infos[:] = [i for i in infos if not i.running]
        attempt = L.restart_count_of(current.labels) + 1 if current is not None else 0
        if current is not None:
            self.runtime.remove(current.id)
        if state.sandbox_backoff is None:
            state.sandbox_backoff = B.Backoff(self.backoff_base, self.backoff_cap)
        try:
            if not self.runtime.image_present(self.sandbox_image):
                raise CreateError('the sandbox image "%s" is not on this node (--sandbox-image; '
                                  'scripts/setup-docker.sh builds it)' % self.sandbox_image)
            config = P.sandbox_config(pod, self.node, self.address, self.sandbox_image, attempt,
                                      dns=resolver_config(pod, self.cluster_dns))
            if self.pod_network is not None:
                config = self.pod_network.attach(config, pod)
            cid = self.runtime.create(config)
            try:
                self.runtime.start(cid)
            except (CreateError, ContainerGone):
                self.runtime.remove(cid)
                raise
        except CreateError as exc:
            state.sandbox_error = "pod network: %s" % exc
            self.events.emit(pod, "FailedCreatePodSandBox", "Failed to create the pod network: %s" % exc,
                             "Warning")
            state.sandbox_retry_at = now + max(0.1, state.sandbox_backoff.next_delay())
            for c in P.containers_of(pod):
                cs = state.containers.get(c.get("name"))
                if cs is not None:
                    cs.waiting = ("CreateContainerError", state.sandbox_error)
            return None, state.sandbox_retry_at - now
        state.sandbox = self.runtime.inspect(cid)
        state.sandbox_error = None
        state.sandbox_retry_at = None
        state.sandbox_backoff.reset()
        return cid, None
