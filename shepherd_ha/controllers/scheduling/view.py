"""What one scheduling pass knows: every node with what is already bound to it.

Usage counts come from the pods in the store that name the node
(`spec.nodeName`) and are not finished (phase Succeeded or Failed), plus the
bindings this pass has made so far (`ClusterView.assume`); never from what an
agent last reported, which lags behind the bindings.

`PodInfo` and `NodeInfo` are plain objects with the fields filters and scorers
read, computed once per pod and per node version (quantities are parsed once);
which PodInfo fields each filter and scorer reads is declared (pod_reads.py).

The scheduler does not walk the pods to know that usage: `usage.UsageIndex` keeps
it per node (`NodeUsage`) from the store's changes, and a pass's `NodeInfo` starts
from it without copying (copy on write, both sides). `ViewBuilder.build` is the
same computation from scratch, over every pod: what tests compare the index with.
"""
import logging
import weakref

from shepherd_ha.model.quantity import QuantityError, parse_cpu, parse_memory

log = logging.getLogger("shepherd_ha.controllers")

TERMINAL_PHASES = ("Succeeded", "Failed")

# For scoring only, as kube-scheduler does: a container that requests nothing counts
# as 100 millicores and 200 MiB, so pods without requests still spread by load.
NONZERO_CPU = 100
NONZERO_MEMORY = 200 * 1024 * 1024

# A node that does not say how many pods it takes takes the kubelet's default.
DEFAULT_MAX_PODS = 110


def is_pending(pod):
    """Waiting for the scheduler: no node yet, not being deleted, not finished."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return False
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return ((pod.get("status") or {}).get("phase")) not in TERMINAL_PHASES


def occupies_node(pod):
    """Bound to a node and still holding its share of it."""
    spec = pod.get("spec") or {}
    return bool(spec.get("nodeName")) and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def controller_owner_uid(obj):
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") and isinstance(ref.get("uid"), str) and ref["uid"]:
            return ref["uid"]
    return None


_PARSED = {}         # (parser, value) -> amount: the same few strings ("100m", "128Mi") recur


def _quantity(parse, value, what, where):
    if value is None:
        return None
    key = (parse, value) if isinstance(value, str) else None
    if key is not None:
        found = _PARSED.get(key)
        if found is not None:
            return found
    try:
        amount = parse(value)
    except QuantityError as exc:
        log.warning("scheduler: %s of %s is not a quantity (%s); counting it as 0", what, where, exc)
        return 0
    if key is not None:
        if len(_PARSED) >= 4096:
            _PARSED.clear()
        _PARSED[key] = amount
    return amount


class PodInfo:
    """A pod as the filters and scorers see it. Each filter and scorer declares the
    fields it reads (pod_reads.reads); pods equal in those share its verdicts."""
    __slots__ = ("key", "obj", "cpu", "memory", "nonzero_cpu", "nonzero_memory", "node_selector",
                 "host_ports", "owner_uid")

    def __init__(self, obj, requests=None):
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        self.key = (meta.get("namespace") or "", meta.get("name"))
        self.obj = obj
        self.cpu, self.memory, self.nonzero_cpu, self.nonzero_memory, self.host_ports = \
            requests or pod_requests(obj)
        selector = spec.get("nodeSelector")
        self.node_selector = selector if isinstance(selector, dict) else {}
        self.owner_uid = controller_owner_uid(obj)


def pod_requests(obj):
    """(cpu millicores, memory bytes, the same with the scoring minimum per container,
    host ports as a tuple of (protocol, port)). Absent requests count as 0.

    Raises (TypeError, AttributeError...) on a pod of the wrong shape, before the
    caller has counted anything of it: the caller skips such a pod."""
    spec = obj.get("spec") or {}
    where = "pod %s/%s" % ((obj.get("metadata") or {}).get("namespace"), (obj.get("metadata") or {}).get("name"))
    cpu = memory = nz_cpu = nz_memory = 0
    ports = []
    host_network = spec.get("hostNetwork") is True
    for c in spec.get("containers") or ():
        if not isinstance(c, dict):
            continue
        requests = (c.get("resources") or {}).get("requests") or {}
        c_cpu = _quantity(parse_cpu, requests.get("cpu"), "the cpu request", where)
        c_mem = _quantity(parse_memory, requests.get("memory"), "the memory request", where)
        cpu += c_cpu or 0
        memory += c_mem or 0
        nz_cpu += NONZERO_CPU if c_cpu is None else c_cpu
        nz_memory += NONZERO_MEMORY if c_mem is None else c_mem
        for port in c.get("ports") or ():
            if not isinstance(port, dict):
                continue
            number = port.get("hostPort") or (port.get("containerPort") if host_network else None)
            if number:
                protocol = port.get("protocol") or "TCP"
                if not isinstance(number, int) or not isinstance(protocol, str):
                    raise TypeError("%s: a container port is %r/%r, not a port number and a protocol name"
                                    % (where, number, protocol))
                ports.append((protocol, number))
    return cpu, memory, nz_cpu, nz_memory, tuple(ports)


def ready_status(node):
    for cond in (node.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status")
    return None


class NodeStatic:
    """The parts of a node that do not depend on its pods, parsed once per node version."""
    __slots__ = ("name", "labels", "ready", "unschedulable", "cpu", "memory", "pods")

    def __init__(self, obj):
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        allocatable = status.get("allocatable") or status.get("capacity") or {}
        where = "node %s" % meta.get("name")
        self.name = meta.get("name")
        labels = meta.get("labels")
        self.labels = labels if isinstance(labels, dict) else {}
        self.ready = ready_status(obj) == "True"
        self.unschedulable = bool((obj.get("spec") or {}).get("unschedulable"))
        self.cpu = _quantity(parse_cpu, allocatable.get("cpu"), "allocatable cpu", where) or 0
        self.memory = _quantity(parse_memory, allocatable.get("memory"), "allocatable memory", where) or 0
        pods = allocatable.get("pods")
        try:
            self.pods = DEFAULT_MAX_PODS if pods is None else int(pods)
        except (TypeError, ValueError):
            log.warning("scheduler: allocatable pods of %s is %r, not a number; using %d", where, pods,
                        DEFAULT_MAX_PODS)
            self.pods = DEFAULT_MAX_PODS


class NodeUsage:
    """What the pods bound to one node take of it (kept by `usage.UsageIndex`).
    `ports` and `owners` count pods per host port and per owner uid, so a pod leaving
    takes away exactly what it added. Once `shared` (a pass's NodeInfo reads its dicts),
    the index replaces it with a copy instead of changing it."""
    __slots__ = ("cpu", "memory", "nonzero_cpu", "nonzero_memory", "pods", "ports", "owners", "shared")

    def __init__(self):
        self.cpu = self.memory = self.nonzero_cpu = self.nonzero_memory = self.pods = 0
        self.ports = {}          # (protocol, port) -> pods using it
        self.owners = {}         # owner uid -> pods of that owner
        self.shared = False

    def copy(self):
        other = NodeUsage()
        other.cpu, other.memory, other.nonzero_cpu, other.nonzero_memory, other.pods = \
            self.cpu, self.memory, self.nonzero_cpu, self.nonzero_memory, self.pods
        other.ports = dict(self.ports)
        other.owners = dict(self.owners)
        return other

    def add(self, requests, owner_uid, sign=1):
        """Count (sign 1) or uncount (sign -1) a pod with these pod_requests(...) and owner."""
        cpu, memory, nonzero_cpu, nonzero_memory, ports = requests
        self.cpu += sign * cpu
        self.memory += sign * memory
        self.nonzero_cpu += sign * nonzero_cpu
        self.nonzero_memory += sign * nonzero_memory
        self.pods += sign
        for port in ports:
            _bump(self.ports, port, sign)
        if owner_uid:
            _bump(self.owners, owner_uid, sign)


def _bump(counts, key, sign):
    n = counts.get(key, 0) + sign
    if n > 0:
        counts[key] = n
    else:
        counts.pop(key, None)


class NodeInfo:
    """A node plus what is bound to it now (store and this pass's bindings).

    `ports` holds the (protocol, port) pairs in use (a set, or the keys of a dict);
    `owner_counts` maps owner uid -> pods. Built from a NodeUsage, both are the index's
    own dicts, copied here before this pass's first binding to the node changes them."""
    __slots__ = ("static", "obj", "name", "labels", "ready", "unschedulable", "alloc_cpu", "alloc_memory",
                 "alloc_pods", "cpu", "memory", "nonzero_cpu", "nonzero_memory", "pod_count", "ports",
                 "owner_counts", "view", "version", "_borrowed")

    def __init__(self, obj, static, view=None, usage=None):
        self.static = static
        self.obj = obj
        self.name = static.name
        self.labels = static.labels
        self.ready = static.ready
        self.unschedulable = static.unschedulable
        self.alloc_cpu, self.alloc_memory, self.alloc_pods = static.cpu, static.memory, static.pods
        if usage is None:
            self.cpu = self.memory = self.nonzero_cpu = self.nonzero_memory = self.pod_count = 0
            self.ports = set()
            self.owner_counts = {}
            self._borrowed = False
        else:
            self.cpu, self.memory, self.nonzero_cpu, self.nonzero_memory, self.pod_count = \
                usage.cpu, usage.memory, usage.nonzero_cpu, usage.nonzero_memory, usage.pods
            self.ports = usage.ports
            self.owner_counts = usage.owners
            self._borrowed = True         # the index's dicts: copy before changing them
        self.view = view
        self.version = 0              # bumped by every pod added: cached verdicts on this node expire

    def add(self, pod):
        """Count a PodInfo as bound here."""
        if self._borrowed:
            self.ports = set(self.ports)
            self.owner_counts = dict(self.owner_counts)
            self._borrowed = False
        self.version += 1
        self.cpu += pod.cpu
        self.memory += pod.memory
        self.nonzero_cpu += pod.nonzero_cpu
        self.nonzero_memory += pod.nonzero_memory
        self.pod_count += 1
        if pod.host_ports:
            self.ports.update(pod.host_ports)
        if pod.owner_uid:
            self.owner_counts[pod.owner_uid] = self.owner_counts.get(pod.owner_uid, 0) + 1

    def __repr__(self):
        return "<NodeInfo %s pods=%d cpu=%dm memory=%d>" % (self.name, self.pod_count, self.cpu, self.memory)


class OwnerMax(dict):
    """owner uid -> most pods of that owner on any one node of the view. An owner not
    filled in yet is computed from the nodes when first asked for (the index fills in
    the owners of the pass's pods beforehand, from its own per-owner counts)."""
    __slots__ = ("_nodes",)

    def __init__(self, nodes):
        super().__init__()
        self._nodes = nodes

    def __missing__(self, owner):
        most = 0
        for node in self._nodes:
            n = node.owner_counts.get(owner, 0)
            if n > most:
                most = n
        self[owner] = most
        return most

    def get(self, owner, default=None):
        most = self[owner] if owner is not None else 0
        return most if most else default


class ClusterView:
    """Every node (by name, in a stable order) with its usage, for one pass."""

    def __init__(self, nodes, presorted=False):
        self.nodes = list(nodes) if presorted else sorted(nodes, key=lambda n: n.name)
        self.by_name = {n.name: n for n in self.nodes}
        self.owner_max = OwnerMax(self.nodes)    # owner uid -> most pods of that owner on any one node
        # A weak back-reference: view and nodes in a cycle outlive the pass until the cyclic
        # collector finds them, and the server freezes survivors out of its reach
        # (store/gc_tuning.py), so every frozen pass's view (~0.6 MB at 1,000 nodes) stayed.
        back = weakref.proxy(self)
        for n in self.nodes:
            n.view = back

    def add(self, pod, node_name):
        """Count a pod bound to node_name (store or this pass); unknown nodes are ignored."""
        node = self.by_name.get(node_name)
        if node is None:
            return None
        node.add(pod)
        owner = pod.owner_uid
        if owner:
            count = node.owner_counts[owner]
            if count > self.owner_max[owner]:     # (an owner not known yet is computed, this pod included)
                self.owner_max[owner] = count
        return node

    def assume(self, pod, node):
        """A binding this pass decided: later pods in the pass see it."""
        return self.add(pod, node.name)


class ViewBuilder:
    """Builds a ClusterView from every node and pod object, reusing parsed nodes and pod
    requests from the last build. The scheduler's passes use `usage.UsageIndex` instead;
    this from-scratch computation is the reference the index is tested against."""

    def __init__(self):
        self._nodes = {}       # name -> (resourceVersion, NodeStatic)
        self._requests = {}    # pod uid -> pod_requests(...)

    def requests(self, pod):
        uid = (pod.get("metadata") or {}).get("uid")
        found = self._requests.get(uid)
        if found is None:
            found = pod_requests(pod)
            if uid:
                self._requests[uid] = found
        return found

    def pod_info(self, pod):
        return PodInfo(pod, self.requests(pod))

    def build(self, nodes, pods, pending_keys=(), assumed=None):
        """(ClusterView, {key: pending pod}) for the given node and pod objects; only pending
        pods whose key is in pending_keys are returned.

        `assumed` ({pod uid: [(PodInfo, node name), ...]}) are bindings decided but perhaps
        not applied yet: a pod the store still shows unbound counts on every node it is
        assumed on (it is still returned as pending if wanted); one the store shows bound
        counts once, from the store."""
        statics = {}
        infos = []
        for obj in nodes:
            meta = obj.get("metadata") or {}
            rv = meta.get("resourceVersion")
            cached = self._nodes.get(meta.get("name"))
            static = cached[1] if cached is not None and cached[0] == rv else NodeStatic(obj)
            statics[static.name] = (rv, static)
            infos.append(NodeInfo(obj, static))
        self._nodes = statics
        view = ClusterView(infos)
        pending = {}
        live_requests = {}
        wanted = pending_keys if isinstance(pending_keys, (set, frozenset, dict)) else set(pending_keys)
        assumed = assumed or {}
        for pod in pods:
            meta = pod.get("metadata") or {}
            spec = pod.get("spec") or {}
            uid = meta.get("uid")
            node_name = spec.get("nodeName")
            if node_name:
                if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                    continue
                req = self._requests.get(uid)
                if req is None:
                    req = pod_requests(pod)
                live_requests[uid] = req
                view.add(PodInfo(pod, req), node_name)
            else:
                if uid in assumed and is_pending(pod):
                    for info, assumed_node in assumed[uid]:
                        view.add(info, assumed_node)
                    live_requests[uid] = self._requests.get(uid) or pod_requests(pod)
                if wanted:
                    key = (meta.get("namespace") or "", meta.get("name"))
                    if key in wanted and is_pending(pod):
                        pending[key] = pod
                        if uid in self._requests:
                            live_requests[uid] = self._requests[uid]
        self._requests = live_requests    # forget pods that are gone or finished
        return view, pending
