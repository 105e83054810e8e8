"""Pod garbage collector: pods bound to a node that no longer exists are deleted, so
their owners recreate them on nodes that do (Kubernetes' PodGC "orphaned pods").

A pod goes once its node has been missing for `orphan_pod_grace` (40 s, as
Kubernetes' quarantine): a node deleted by hand while its agent runs registers again
within seconds and keeps its pods, and a manifest with spec.nodeName set before its
node registered is not collected at once. No agent will ever stop or confirm such a
pod, so the delete is immediate (not graceful), guarded by the pod's uid. Keys are
node names.
"""
from shepherd_ha.store import commands

from .controller import Controller, Retry


def _node_of(pod):
    return ((pod or {}).get("spec") or {}).get("nodeName") or None


class PodGarbageCollector(Controller):
    name = "pod-gc"
    watches = ("nodes", "pods")

    def __init__(self, store, events=None, settings=None):
        super().__init__(store, events)
        self.grace = settings.orphan_pod_grace
        self.resync_period = settings.resync_period
        self._missing_since = {}   # node name -> clock time it was first found missing

    def keys_for(self, change):
        if change.resource == "nodes":
            name = (change.object or change.previous)["metadata"]["name"]
            return [name] if change.object is None else []
        node = _node_of(change.object)
        return [node] if node and change.object is not None and self.store.get("nodes", None, node) is None else []

    def all_keys(self):
        nodes = {n["metadata"]["name"] for n in self.store.list("nodes")}
        bound = self.select("pods", self.store.list("pods"), lambda p: isinstance(_node_of(p), str), "resync")
        return sorted({_node_of(p) for p in bound} - nodes)

    def reconcile(self, node_name):
        if self.store.get("nodes", None, node_name) is not None:
            self._missing_since.pop(node_name, None)
            return None
        pods = self.select("pods", self.store.list("pods"), lambda p: _node_of(p) == node_name)
        if not pods:
            self._missing_since.pop(node_name, None)
            return None
        now = self.store.clock()
        since = self._missing_since.setdefault(node_name, now)
        if now - since < self.grace:
            raise Retry("node %s missing for %.1fs of %.1fs" % (node_name, now - since, self.grace),
                        delay=since + self.grace - now)
        writes = [[commands.delete("pods", p["metadata"].get("namespace"), p["metadata"]["name"],
                                   precondition={"uid": p["metadata"].get("uid")})] for p in pods]
        results = self.write_many(writes)
        deleted = [p for p, r in zip(pods, results) if r.get("ok")]
        refused = [r for r in results if not r.get("ok") and r.get("reason") != "NotFound"]
        if self.events:
            for pod in deleted:
                self.events.emit(pod, "NodeGone", "pod deleted: it was bound to node %s, which no longer exists"
                                 % node_name, "Warning")
        if refused:
            raise Retry("deleting pods of missing node %s: %s" % (node_name, refused[0].get("message")))
        self._missing_since.pop(node_name, None)
        names = ", ".join("%s/%s" % (p["metadata"].get("namespace"), p["metadata"]["name"]) for p in deleted[:10])
        return "deleted %d pod(s) bound to missing node %s: %s%s" % (
            len(deleted), node_name, names, " ..." if len(deleted) > 10 else "") if deleted else None


def controllers(store, recorder, settings):
    return [PodGarbageCollector(store, recorder, settings)]
