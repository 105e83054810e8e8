"""Node IPAM controller: puts the cluster CIDR into the store, and tells a Node that
got no block of it why.

The blocks themselves are allocated by the FSM (store/pod_cidrs.py), atomically
with the Node's create or with the deletion that freed one, so two leaders can
never hand out one block twice. This controller only:
- commits the `network` command with --cluster-cidr / --node-cidr-mask-size on
  every resync (the same plan again is a no-op; a different one is refused by the
  store and logged: the plan cannot change once nodes hold blocks of it);
- gives a Node without a block the condition NetworkUnavailable True, reason
  CIDRNotAvailable, and a Warning Event; once it has one, the condition becomes
  False, reason CIDRAssigned.
"""
import copy

from shepherd_ha.model.network import pod_cidr_of
from shepherd_ha.store import commands
from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.model.times import now_rfc3339

from .controller import Controller, Retry, WriteFailed

NETWORK_KEY = "cluster-network"
CONDITION = "NetworkUnavailable"
NO_CIDR, ASSIGNED = "CIDRNotAvailable", "CIDRAssigned"


def network_condition(node):
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == CONDITION:
            return cond
    return None


class NodeIPAMController(Controller):
    name = "node-ipam"
    watches = ("nodes",)

    def __init__(self, store, events, settings, now=now_rfc3339):
        super().__init__(store, events)
        self.wanted = (settings.cluster_cidr, settings.node_cidr_mask_size)
        self.network = None        # the plan as the store holds it (from the network command's answer)
        self.now = now
        self._mismatch_told = False

    def all_keys(self):
        return [NETWORK_KEY] + super().all_keys()

    def reconcile(self, key):
        if key == NETWORK_KEY:
            return self._ensure_network()
        if self.network is None:
            self.queue.add(NETWORK_KEY)
            raise Retry("the cluster CIDR is not in the store yet", delay=0.5)
        node = self.store.get("nodes", None, key[1])
        if node is None or (node.get("metadata") or {}).get("deletionTimestamp"):
            return None
        cond = network_condition(node)
        cidr = pod_cidr_of(node)
        if cidr:
            if cond is None or cond.get("reason") != NO_CIDR:
                return None
            self._set_condition(node, "False", ASSIGNED, "pod CIDR %s assigned" % cidr)
            return "node %s got pod CIDR %s" % (key[1], cidr)
        if cond is not None and cond.get("reason") == NO_CIDR and cond.get("status") == "True":
            return None
        message = ("no free /%d block left in the cluster CIDR %s: every block is held by a node; delete "
                   "nodes that are gone, or build the cluster with a larger --cluster-cidr"
                   % (self.network["nodeCIDRMaskSize"], self.network["clusterCIDR"]))
        self._set_condition(node, "True", NO_CIDR, message)
        if self.events is not None:
            self.events.emit(node, NO_CIDR, "Node %s has no pod CIDR: %s" % (key[1], message), "Warning")
        return "node %s has no pod CIDR: %s" % (key[1], message)

    def _ensure_network(self):
        cidr, mask = self.wanted
        try:
            result = self.store.submit(commands.network(cidr, mask, self.store.epoch))
        except Unavailable as exc:
            raise Retry("store unavailable: %s" % exc)
        if result.get("network"):
            self.network = result["network"]
        if result.get("ok"):
            if result.get("changed"):
                self.resync()       # nodes that waited for the plan: their conditions
                return "set the cluster CIDR to %s with a /%d block per node" % (cidr, mask)
            return None
        if result.get("reason") == "Conflict" and self.network is not None:
            if self._mismatch_told:
                return None
            self._mismatch_told = True
            return "--cluster-cidr %s /%d ignored: %s" % (cidr, mask, result.get("message"))
        if result.get("reason") == "Fenced":
            raise Retry("fenced: %s" % result.get("message"))
        raise WriteFailed("%s (%s)" % (result.get("message"), result.get("reason")))

    def _set_condition(self, node, status, reason, message):
        now = self.now()
        new = copy.deepcopy(node)
        if not isinstance(new.get("status"), dict):
            new["status"] = {}
        st = new["status"]
        kept = [c for c in st.get("conditions") or [] if not (isinstance(c, dict) and c.get("type") == CONDITION)]
        old = network_condition(node)
        transition = old.get("lastTransitionTime") if old and old.get("status") == status else now
        kept.append({"type": CONDITION, "status": status, "reason": reason, "message": message,
                     "lastTransitionTime": transition or now})
        st["conditions"] = kept
        name = node["metadata"]["name"]
        try:
            self.write([commands.update("nodes", None, name, new, subresource="status",
                                        precondition={"resourceVersion": node["metadata"]["resourceVersion"]})])
        except WriteFailed as exc:
            raise Retry("node %s: %s" % (name, exc))


def controllers(store, recorder, settings):
    return [NodeIPAMController(store, recorder, settings)]
