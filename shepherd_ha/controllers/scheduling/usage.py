"""What is bound to every node, kept up to date from the store's changes, so that a
scheduling pass costs O(its pods + nodes) instead of O(every pod in the store).

`UsageIndex` holds, at one store revision (`revision`):

- the node objects by name;
- per node name, a `NodeUsage`: requests, pod count, host ports and pods per owner of
  the pods bound there and not finished (whether or not the node exists: a pod may
  name a node that is gone or not registered yet; a pass ignores such nodes);
- per owner uid, its pods per node (so the spread scorer's "most pods of this owner
  on one node" is known without looking at every node);
- which pods are bound (uid -> node, requests, owner) and which are pending (uid ->
  key, requests once parsed), which a pass needs to count its assumed bindings.

A pod or node the index cannot read (a wrong type stored past validation) is left
out of it, as if absent, and reported through `on_fault(resource, obj, exc)`: one
bad object must not stop every pass.

It changes in two ways, both under its lock, both idempotent by revision (a change
at or below `revision` is already in):

- `apply(change)`: the informer hands the scheduler each pod and node change
  (`Scheduler.handle`), in order, on the informer thread;
- `sync()`: pull whatever the store's watch log has beyond `revision`. A pass does
  this first, so it reads the index at the newest revision the watch log holds
  (which matters: see `view`). Should the log no longer reach back to `revision`, or
  have been reset (a snapshot installed), the index is rebuilt from a snapshot of
  every node and pod, as it is when the informer starts or resyncs (`rebuild`).

A pass reads the index through `view`, which takes everything at one revision under
the lock, without walking any pod: the nodes' NodeInfo objects borrow the NodeUsage
dicts (copy on write: the index replaces a borrowed NodeUsage with a copy before it
changes it, the NodeInfo copies it before the pass's own bindings change it).
"""
import logging
import threading

from shepherd_ha.store.watch_log import WatchExpired

from .view import (TERMINAL_PHASES, ClusterView, NodeInfo, NodeStatic, NodeUsage, PodInfo, controller_owner_uid,
                   is_pending, pod_requests)

log = logging.getLogger("shepherd_ha.controllers")

WATCHED = ("pods", "nodes")


def _ident(pod):
    """A pod's identity in the index: its uid (a pod deleted and created again under the
    same name is another pod)."""
    meta = pod.get("metadata") or {}
    uid = meta.get("uid")
    return uid if isinstance(uid, str) and uid else ("no-uid", meta.get("namespace") or "", meta.get("name"))


def _key(pod):
    meta = pod.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name"))


def _revision_of(pod):
    try:
        return int((pod.get("metadata") or {}).get("resourceVersion"))
    except (TypeError, ValueError):
        return None


class UsageIndex:
    def __init__(self, store, on_fault=None):
        self.store = store
        self.on_fault = on_fault    # (resource, object, exception): an object left out
        self.lock = threading.Lock()
        self.revision = None        # every change up to here is in; None: never built
        self._resets = None         # the watch log's reset count when last built
        self.nodes = {}             # node name -> node object
        self._statics = {}          # node name -> (resourceVersion, NodeStatic)
        self._order = None          # node names, sorted; None once a node came or went
        self.usage = {}             # node name -> NodeUsage (only nodes with pods bound)
        self.bound = {}             # pod ident -> (node name, requests, owner uid)
        self.pending = {}           # pod ident -> [key, requests or None]
        self.owner_nodes = {}       # owner uid -> {node name: pods of that owner there}
        self._requests_seen = {}    # requests -> the same requests: one tuple per distinct value
        # What it did (tests and benchmarks read these).
        self.rebuilds = 0           # from a snapshot of every pod
        self.pods_walked = 0        # pods read by those rebuilds
        self.changes_applied = 0

    # ---- keeping it up to date ----

    def _watch_resets(self):
        return getattr(self.store.watch_log, "resets", 0)

    def rebuild(self):
        """Start over from a snapshot of every node and pod; returns the keys of the
        pending pods at that revision (what a resync queues)."""
        with self.lock:
            self._rebuild_locked()
            return [entry[0] for entry in self.pending.values()]

    def _rebuild_locked(self):
        resets = self._watch_resets()       # before the snapshot: a reset in between is seen next time
        objects, revision = self.store.snapshot(WATCHED)
        parsed = {ident: entry[1] for ident, entry in self.bound.items()}
        parsed.update((ident, entry[1]) for ident, entry in self.pending.items() if entry[1] is not None)
        self.nodes, self._order, self.usage = {}, None, {}
        self.bound, self.pending, self.owner_nodes = {}, {}, {}
        for node in objects["nodes"]:
            self.nodes[node["metadata"]["name"]] = node
        self._statics = {name: s for name, s in self._statics.items() if name in self.nodes}
        for pod in objects["pods"]:
            try:
                self._add_pod(pod, parsed.get(_ident(pod)))
            except Exception as exc:
                self._left_out("pods", pod, exc)
        self.revision, self._resets = revision, resets
        self.rebuilds += 1
        self.pods_walked += len(objects["pods"])

    def apply(self, change):
        """One pod or node change, from the informer (skipped if already in)."""
        if change.resource not in WATCHED:
            return
        with self.lock:
            if self.revision is None or change.revision <= self.revision or self._resets != self._watch_resets():
                return                       # not built yet, already in, or a reset: sync() rebuilds
            self._apply_or_leave_out(change)
            self.revision = change.revision

    def sync(self):
        with self.lock:
            self._sync_locked()

    def _sync_locked(self):
        if self.revision is None or self._resets != self._watch_resets():
            if self.revision is not None:
                log.info("scheduler: the watch log was reset; rebuilding the usage index from a snapshot")
            self._rebuild_locked()
            return
        try:
            changes = self.store.watch_log.since(self.revision)
        except WatchExpired:
            log.info("scheduler: the watch log moved past revision %d; rebuilding the usage index from a snapshot",
                     self.revision)
            self._rebuild_locked()
            return
        for change in changes:
            if change.revision <= self.revision:
                continue
            if change.resource in WATCHED:
                self._apply_or_leave_out(change)
            self.revision = change.revision

    def _apply_or_leave_out(self, change):
        try:
            self._apply(change)
        except Exception as exc:
            # Neither version of the pod counts now (pod_requests raises before counting).
            for pod in (change.previous, change.object):
                if pod is not None and change.resource == "pods":
                    self._forget(_ident(pod))
            self._left_out(change.resource, change.object or change.previous, exc)

    def _left_out(self, resource, obj, exc):
        if self.on_fault is not None:
            self.on_fault(resource, obj, exc)
        else:
            log.error("scheduler: left %s %s out of the usage index: %r", resource, _key(obj), exc)

    def _apply(self, change):
        self.changes_applied += 1
        obj, prev = change.object, change.previous
        if change.resource == "nodes":
            name = ((obj or prev).get("metadata") or {}).get("name")
            if obj is None:
                if self.nodes.pop(name, None) is not None:
                    self._order = None
                self._statics.pop(name, None)
            else:
                if name not in self.nodes:
                    self._order = None
                self.nodes[name] = obj
            return
        ident = _ident(obj) if obj is not None else None
        before = _ident(prev) if prev is not None else None
        if ident is not None and ident == before and self._unchanged(obj, ident):
            return                   # e.g. a status write: same node, owner and phase class
        requests = self._forget(before) if before is not None else None
        if ident is not None:
            if ident != before:                  # (a stored pod keeps its uid: not expected)
                requests = self._forget(ident)
            self._add_pod(obj, requests, ident)

    def _unchanged(self, pod, ident):
        """The index already counts this version of the pod exactly as it is."""
        entry = self.bound.get(ident)
        if entry is not None:
            return (entry[0] == (pod.get("spec") or {}).get("nodeName") and
                    (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES and
                    entry[2] == controller_owner_uid(pod))
        entry = self.pending.get(ident)
        return entry is not None and entry[0] == _key(pod) and is_pending(pod)

    def _forget(self, ident):
        """Take a pod out; returns its parsed requests if known."""
        entry = self.bound.pop(ident, None)
        if entry is not None:
            node, requests, owner = entry
            usage = self._writable(node)
            usage.add(requests, owner, -1)
            if usage.pods <= 0:
                del self.usage[node]
            if owner:
                per = self.owner_nodes[owner]
                n = per[node] - 1
                if n > 0:
                    per[node] = n
                else:
                    del per[node]
                    if not per:
                        del self.owner_nodes[owner]
            return requests
        entry = self.pending.pop(ident, None)
        return entry[1] if entry is not None else None

    def _add_pod(self, pod, requests=None, ident=None):
        if ident is None:
            ident = _ident(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                return                           # finished: its room is free
            if requests is None:
                requests = pod_requests(pod)
            requests = self._shared(requests)
            owner = controller_owner_uid(pod)
            self.bound[ident] = (node, requests, owner)
            self._writable(node).add(requests, owner)
            if owner:
                per = self.owner_nodes.get(owner)
                if per is None:
                    per = self.owner_nodes[owner] = {}
                per[node] = per.get(node, 0) + 1
        elif is_pending(pod):
            self.pending[ident] = [_key(pod), requests]

    SHARED_REQUESTS = 4096      # distinct requests remembered (pods of a template ask alike)

    def _shared(self, requests):
        """`requests` as the tuple other pods that ask the same hold: at 30,000 pods the
        index held 7.1 MB of the leader's worker (docs/benchmarks.md, run AA), a tuple of
        five and its large ints per pod, where a rollout's pods ask for a few values."""
        seen = self._requests_seen
        shared = seen.get(requests)
        if shared is not None:
            return shared
        if len(seen) >= self.SHARED_REQUESTS:
            seen.clear()            # many distinct requests: start over rather than grow
        seen[requests] = requests
        return requests

    def _writable(self, node):
        usage = self.usage.get(node)
        if usage is None:
            usage = self.usage[node] = NodeUsage()
        elif usage.shared:                       # a pass reads its dicts: change a copy
            usage = self.usage[node] = usage.copy()
        return usage

    # ---- what a pass reads ----

    def pod_info(self, pod):
        """A PodInfo, with the pod's requests parsed once while it is pending."""
        entry = self.pending.get(_ident(pod))
        requests = entry[1] if entry is not None else None
        return PodInfo(pod, requests or pod_requests(pod))

    def view(self, pods=(), assumed=None):
        """(ClusterView, {key: (pod, PodInfo)}) at the newest revision, walking no pod.

        `pods`: (pod object, PodInfo) pairs the pass read by key, pending when read.
        Returned are those still pending at the index's revision (pods bound or gone by
        then are left out; a pod newer than the index is kept).

        `assumed` ({pod uid: [(PodInfo, node name), ...]}) are bindings decided but perhaps
        not applied yet: a pod the index still shows pending counts on every node it is
        assumed on; one it shows bound counts once, from the index; one it shows gone or
        finished does not count. (The caller reads `assumed` before calling this: a
        binding forgotten in between was applied, hence is in the watch log, hence in the
        index after the sync below.)"""
        with self.lock:
            self._sync_locked()
            revision = self.revision
            if self._order is None:
                self._order = sorted(self.nodes)
            infos = []
            statics, usages = self._statics, self.usage
            for name in self._order:
                obj = self.nodes[name]
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                cached = statics.get(name)
                if cached is not None and cached[0] == rv:
                    static = cached[1]
                else:
                    try:
                        static = NodeStatic(obj)
                    except Exception as exc:     # left out of every pass until it changes
                        static = None
                        self._left_out("nodes", obj, exc)
                    statics[name] = (rv, static)
                if static is None:
                    continue
                usage = usages.get(name)
                if usage is not None:
                    usage.shared = True
                infos.append(NodeInfo(obj, static, usage=usage))
            view = ClusterView(infos, presorted=True)
            chosen = {}
            for pod, info in pods:
                ident = _ident(pod)
                if ident in self.bound:
                    continue                     # bound since it was read
                entry = self.pending.get(ident)
                if entry is None:
                    rv = _revision_of(pod)
                    if rv is not None and rv <= revision:
                        continue                 # the index has seen this version: gone or finished since
                elif entry[1] is None:
                    entry[1] = (info.cpu, info.memory, info.nonzero_cpu, info.nonzero_memory, info.host_ports)
                chosen[info.key] = (pod, info)
            # The spread scorer's scale for the owners of this pass's pods, before any
            # binding (assumed or new) changes it.
            by_name = view.by_name
            for owner in {info.owner_uid for _, info in chosen.values() if info.owner_uid}:
                most = 0
                for node, n in (self.owner_nodes.get(owner) or {}).items():
                    if n > most and node in by_name:
                        most = n
                view.owner_max[owner] = most
            if assumed:
                for uid, entries in assumed.items():
                    if uid in self.bound or uid not in self.pending:
                        continue
                    for info, node_name in entries:
                        view.add(info, node_name)
            return view, chosen
