"""Pod CIDR allocation inside the FSM (a mixin of StoreFSM): every Node gets one
block of the cluster CIDR in spec.podCIDR / spec.podCIDRs.

Pure like the FSM: the cluster CIDR is state, set by a `network` command (the
leader's node IPAM controller commits it, store/commands.py), never read from a
configuration here. Rules, identical on every replica:
- a Node created without a podCIDR gets the lowest free block; one created with a
  podCIDR keeps it if it is a free block of the plan (else 409/422);
- once set, a podCIDR never changes: an update that leaves it out keeps it;
- when the cluster CIDR is first set, the Nodes without a block get one, in name
  order; when a Node holding a block is deleted, the freed block goes to the
  first waiting Node by name in the same write;
- no free block: the Node stays without one (the node IPAM controller gives it the
  NetworkUnavailable condition, reason CIDRNotAvailable, and an Event).

Which Node holds which block is indexed (`_cidr_owner`, block number -> node name),
kept with each committed change and rebuilt from the Nodes when missing (a snapshot
written before this existed), so an allocation costs a walk over the used blocks,
not over every Node.
"""
from shepherd_ha.model.network import NetworkError, block, block_count, block_index, parse_plan, pod_cidr_of


class PodCIDRs:
    network = None            # {"clusterCIDR": str, "nodeCIDRMaskSize": int} once a network command set it
    _cidr_owner = None        # block number -> node name, for the committed Nodes (None: rebuild)

    # ---- the network command ----

    def _apply_network(self, command, changes):
        epoch = command.get("epoch")
        if epoch is not None and list(epoch) != self.epoch:
            self.fenced_rejections += 1
            return _refused(409, "Fenced", "network command from controller epoch %s refused: current epoch "
                            "is %s" % (list(epoch), self.epoch))
        wanted = {"clusterCIDR": command["clusterCIDR"], "nodeCIDRMaskSize": command["nodeCIDRMaskSize"]}
        try:
            parse_plan(wanted["clusterCIDR"], wanted["nodeCIDRMaskSize"])
        except NetworkError as exc:
            return _refused(422, "Invalid", str(exc))
        if self.network == wanted:
            return {"ok": True, "network": dict(self.network), "changed": False}
        if self.network is not None:
            return dict(_refused(409, "Conflict", "the cluster CIDR is %s with /%d node blocks already and "
                                 "cannot change (nodes hold blocks of it); start the servers with --cluster-cidr "
                                 "%s again" % (self.network["clusterCIDR"], self.network["nodeCIDRMaskSize"],
                                               self.network["clusterCIDR"])),
                        network=dict(self.network))
        self.network = wanted
        self._cidr_owner = None
        staged, planned = {}, []
        self._stage_waiting_nodes(staged, planned)
        self._commit(planned, changes)
        return {"ok": True, "network": dict(wanted), "changed": True, "revision": self.revision}

    # ---- what the ops ask ----

    def _pod_cidr_plan(self):
        if self.network is None:
            return None
        return parse_plan(self.network["clusterCIDR"], self.network["nodeCIDRMaskSize"])

    def _owners(self):
        if self._cidr_owner is None:
            owners, plan = {}, self._pod_cidr_plan()
            if plan is not None:
                for (_, name), node in sorted(self.objects.get("nodes", {}).items()):
                    idx = block_index(plan[0], plan[1], pod_cidr_of(node))
                    if idx is not None and idx not in owners:
                        owners[idx] = name
            self._cidr_owner = owners
        return self._cidr_owner

    def _used_blocks(self, staged):
        """{block number: node name} for the committed Nodes overlaid by this write's staging."""
        plan = self._pod_cidr_plan()
        used = dict(self._owners())
        staged_nodes = {k[1][1]: v for k, v in staged.items() if k[0] == "nodes"}
        if staged_nodes:
            used = {i: n for i, n in used.items() if n not in staged_nodes}
            for name, node in staged_nodes.items():
                idx = block_index(plan[0], plan[1], pod_cidr_of(node)) if node is not None else None
                if idx is not None:
                    used[idx] = name
        return used

    def _lowest_free(self, used):
        plan = self._pod_cidr_plan()
        for idx in range(block_count(*plan)):
            if idx not in used:
                return block(plan[0], plan[1], idx)
        return None

    def _pod_cidr_for_create(self, obj, staged):
        """The Node `obj` with its podCIDR decided, or (code, reason, message) refusing it."""
        plan = self._pod_cidr_plan()
        wanted = pod_cidr_of(obj)
        if plan is None:
            return obj
        used = self._used_blocks(staged)
        if wanted:
            idx = block_index(plan[0], plan[1], wanted)
            if idx is None:
                return (422, "Invalid", "spec.podCIDR: %s is not a /%d block of the cluster CIDR %s: leave it "
                        "out and the control plane picks a free one" % (wanted, plan[1], plan[0]))
            if idx in used:
                return (409, "Conflict", 'spec.podCIDR: %s is node "%s"\'s block: leave it out and the control '
                        "plane picks a free one" % (wanted, used[idx]))
            return _with_pod_cidr(obj, wanted)
        free = self._lowest_free(used)
        return obj if free is None else _with_pod_cidr(obj, free)

    def _pod_cidr_for_update(self, obj, current, staged):
        """An update never changes a set podCIDR (the API refuses a client trying, with a 422);
        one that sets it on a Node without one is checked like a create."""
        held = pod_cidr_of(current)
        if held:
            spec = current.get("spec") or {}
            return _with_pod_cidr(obj, held, spec.get("podCIDRs"))
        if pod_cidr_of(obj):
            return self._pod_cidr_for_create(obj, staged)
        return obj

    def _stage_waiting_nodes(self, staged, planned):
        """Give free blocks to the Nodes without one, in name order, as MODIFIED changes."""
        if self.network is None:
            return
        names = {k[1] for k in self.objects.get("nodes", {})} | {k[1][1] for k in staged if k[0] == "nodes"}
        used = None
        for name in sorted(names):
            node = self._current(staged, "nodes", None, name)
            if node is None or pod_cidr_of(node) or (node.get("metadata") or {}).get("deletionTimestamp"):
                continue
            used = self._used_blocks(staged) if used is None else used
            free = self._lowest_free(used)
            if free is None:
                return
            new = _with_pod_cidr(node, free)
            self._stage_node_update(node, new, staged, planned)
            used[block_index(*self._pod_cidr_plan(), free)] = name

    def _frees_a_block(self, planned):
        return self.network is not None and any(
            c.resource == "nodes" and c.object is None and pod_cidr_of(c.previous) for c in planned)

    def _track_pod_cidr(self, change):
        """Keep the block index with a committed Node change."""
        if self._cidr_owner is None or change.resource != "nodes":
            return
        plan = self._pod_cidr_plan()
        before = block_index(plan[0], plan[1], pod_cidr_of(change.previous)) if change.previous else None
        after = block_index(plan[0], plan[1], pod_cidr_of(change.object)) if change.object else None
        name = (change.object or change.previous)["metadata"]["name"]
        if before is not None and self._cidr_owner.get(before) == name:
            del self._cidr_owner[before]
        if after is not None:
            self._cidr_owner.setdefault(after, name)


def _with_pod_cidr(node, cidr, cidrs=None):
    spec = dict(node.get("spec") or {})
    spec["podCIDR"] = cidr
    spec["podCIDRs"] = list(cidrs) if isinstance(cidrs, list) and cidrs else [cidr]
    return dict(node, spec=spec)


def _refused(code, reason, message):
    return {"ok": False, "code": code, "reason": reason, "message": message, "index": None}
