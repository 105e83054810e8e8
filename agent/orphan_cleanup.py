"""Removing what a pod no longer bound to this node left behind: its containers
and its volume directory.

A mixin of PodManager (agent/pods.py), whose attributes it uses.
"""
import logging

from shepherd_ha.client import ApiError, ClientError

from . import labels as L
from . import volumes as V
from .runtime.base import RuntimeFailure

log = logging.getLogger(__name__)

ORPHAN_VOLUME_AGE = 60.0      # seconds before an unknown pod's volume directory is removed


class OrphanCleanupMixin:
    def _remove_orphaned_volumes(self, with_containers):
        """Volume directories of pods that are neither known nor have containers here
        (the agent stopped between removing a pod's containers and its directory).
        A directory younger than ORPHAN_VOLUME_AGE is left alone: its pod may have
        been observed after the snapshot this pass works from."""
        for uid in V.pod_uids(self.state_dir):
            if uid in with_containers or V.pod_dir_age(self.state_dir, uid) < ORPHAN_VOLUME_AGE:
                continue
            with self._lock:
                if uid in self.states:
                    continue
            log.info("removing the volumes of pod uid %s: it is not bound to node %s", uid, self.node)
            V.remove_pod_dir(self.state_dir, uid)

    def _remove_orphans(self, uid, containers):
        with self._lock:
            if uid in self.states:
                return
        # The list we know may come from a replica a little behind: ask for the pod
        # itself (a linearizable read) before removing anything.
        labels = containers[0].labels
        if labels.get(L.POD_NAME):
            try:
                pod = self.client.get("pods", labels[L.POD_NAME], namespace=labels.get(L.POD_NAMESPACE))
            except ApiError as err:
                # 403: NodeRestriction refuses a node the pods not bound to it, and says so
                # only after a linearizable read; a pod of that name on another node is not ours.
                if err.code not in (403, 404):
                    return
                pod = None
            except ClientError:
                return      # no replica answers: remove nothing now
            if pod is not None and (pod.get("metadata") or {}).get("uid") == uid \
                    and (pod.get("spec") or {}).get("nodeName") == self.node:
                self.observe(pod)
                return
        for c in containers:
            log.info("removing orphaned container %s (%s): pod uid %s is not bound to node %s",
                     c.name, c.id[:12], uid or "?", self.node)
            try:
                self.runtime.remove(c.id)
            except RuntimeFailure as exc:
                log.warning("cannot remove orphaned container %s: %s", c.id[:12], exc)
        if uid:
            V.remove_pod_dir(self.state_dir, uid)
