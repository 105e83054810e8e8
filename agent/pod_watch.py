"""The pods bound to this node, from the API: a list (`spec.nodeName`,
resourceVersion=0, any replica), then a watch from the list's revision through the
client, which fails over between replicas; a 410 lists again. While no replica
answers, the pods known so far stay as they are.

PodWatch touches the API client (list, watch) and the pod table (observe, forget,
synced, api_reachable), nothing else.
"""
import logging

from shepherd_ha.backoff import Backoff
from shepherd_ha.client import ApiError, ClientError, NoReplicaReachable, WatchExpired

from .pod_state import resource_version

log = logging.getLogger(__name__)


class PodWatch:
    def __init__(self, client, table, stop):
        self.client = client
        self.table = table
        self.stop = stop

    def replace_all(self, items, list_rv):
        """A full list: pods missing from it are gone, unless we know a version of
        them newer than the list (a replica a little behind answered the list)."""
        table = self.table
        seen = set()
        for pod in items:
            if (pod.get("spec") or {}).get("nodeName") == table.node:
                seen.add((pod.get("metadata") or {}).get("uid"))
                table.observe(pod)
        for state in table.snapshot():
            if state.uid not in seen and not state.removed and resource_version(state.pod) <= list_rv:
                table.forget(state.pod)

    def run(self):
        table = self.table
        selector = "spec.nodeName=%s" % table.node
        retry = Backoff(0.5, 10.0)
        while not self.stop.is_set():
            try:
                listed = self.client.list("pods", None, field_selector=selector, consistent=False)
                items = (listed or {}).get("items") or []
                rv = ((listed or {}).get("metadata") or {}).get("resourceVersion") or "0"
                self.replace_all(items, int(rv) if str(rv).isdigit() else 0)
                table.api_reachable = True
                if not table.synced.is_set():
                    log.info("listed %d pod(s) bound to node %s", len(items), table.node)
                    table.synced.set()
                retry.reset()
                for event in self.client.watch("pods", None, resource_version=rv, field_selector=selector,
                                               stop=self.stop):
                    table.api_reachable = True
                    etype = event.get("type")
                    obj = event.get("object") or {}
                    if etype in ("ADDED", "MODIFIED"):
                        table.observe(obj)
                    elif etype == "DELETED":
                        table.forget(obj)
            except WatchExpired:
                log.info("pod watch expired; listing again")
                continue
            except (NoReplicaReachable, ApiError, ClientError) as exc:
                table.api_reachable = False
                log.warning("pod list/watch failed: %s; retrying in %.1fs (pods keep running)", exc, retry.peek())
            except Exception:  # noqa: BLE001 - the watch must survive anything
                log.exception("pod watch failed")
            retry.wait(self.stop)
