"""The pods bound to this node, from the API: a list (`spec.nodeName`,
resourceVersion=0, any replica), then a watch from the list's revision through the
client, which fails over between replicas; a 410 lists again. While no replica
answers, the pods known so far stay as they are.

A mixin of PodManager (agent/pods.py), whose attributes it uses.
"""
import logging

from shepherd_ha.client import ApiError, ClientError, NoReplicaReachable, WatchExpired

from .pod_state import resource_version

log = logging.getLogger(__name__)


class PodWatchMixin:
    def _replace_all(self, items, list_rv):
        """A full list: pods missing from it are gone, unless we know a version of
        them newer than the list (a replica a little behind answered the list)."""
        seen = set()
        for pod in items:
            if (pod.get("spec") or {}).get("nodeName") == self.node:
                seen.add((pod.get("metadata") or {}).get("uid"))
                self.observe(pod)
        for state in self.snapshot():
            if state.uid not in seen and not state.removed and resource_version(state.pod) <= list_rv:
                self.forget(state.pod)

    def _watch_loop(self):
        selector = "spec.nodeName=%s" % self.node
        delay = 0.5
        while not self.stop.is_set():
            try:
                listed = self.client.list("pods", None, field_selector=selector, consistent=False)
                items = (listed or {}).get("items") or []
                rv = ((listed or {}).get("metadata") or {}).get("resourceVersion") or "0"
                self._replace_all(items, int(rv) if str(rv).isdigit() else 0)
                self.api_reachable = True
                if not self.synced.is_set():
                    log.info("listed %d pod(s) bound to node %s", len(items), self.node)
                    self.synced.set()
                delay = 0.5
                for event in self.client.watch("pods", None, resource_version=rv, field_selector=selector,
                                               stop=self.stop):
                    self.api_reachable = True
                    etype = event.get("type")
                    obj = event.get("object") or {}
                    if etype in ("ADDED", "MODIFIED"):
                        self.observe(obj)
                    elif etype == "DELETED":
                        self.forget(obj)
            except WatchExpired:
                log.info("pod watch expired; listing again")
                continue
            except (NoReplicaReachable, ApiError, ClientError) as exc:
                self.api_reachable = False
                log.warning("pod list/watch failed: %s; retrying in %.1fs (pods keep running)", exc, delay)
            except Exception:  # noqa: BLE001 - the watch must survive anything
                log.exception("pod watch failed")
            self.stop.wait(delay)
            delay = min(10.0, delay * 2)
