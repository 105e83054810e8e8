"""The agent's pod network, flannel host-gw shape: what the pod code sees of it.

- waits until the control plane gave this node its block (node.spec.podCIDR), then
  makes the bridge network (bridge.py) and the iptables chains (rules.py);
- `attach(config, pod)`: a container that owns its pod's network goes on that
  bridge with an address the agent picks (ipam.py); Docker's IPAM is not asked;
- watches the Nodes and keeps a route to every other node's block via its
  InternalIP (routes.py), the whole set reconciled at most once a second after a
  change and every `resync` seconds regardless.

`block_listeners`: called with (pod CIDR, gateway) when the node's block is known or
changes, before pods may attach (the node's DNS listens on the gateway: agent/dns/).

Restarting the agent changes no running pod's address: the bridge, the chains and
the routes are found as they are, and the address plan is read back from the
containers on the bridge.
"""
import dataclasses
import ipaddress
import logging
import os
import threading
import time

from shepherd_ha.backoff import Backoff
from shepherd_ha.client import ClientError, WatchExpired
from shepherd_ha.model.network import internal_ip_of, pod_cidr_of

from ..runtime.base import CreateError, NotReadyYet
from . import rules
from .bridge import BridgeNetwork, bridge_name, gateway_of
from .ipam import AddressesExhausted, PodAddresses
from .routes import RouteTable, desired_routes

log = logging.getLogger(__name__)

MIN_SYNC_INTERVAL = 1.0


class PodNetwork:
    def __init__(self, client, docker_api, node, cluster_cidr, stop, state_dir=None, route_table=None,
                 iptables=None, resync=10.0):
        self.client = client
        self.node = node
        self.cluster_cidr = str(ipaddress.IPv4Network(cluster_cidr))
        self.stop = stop
        self.bridge = BridgeNetwork(docker_api, node)
        self.routes = route_table or RouteTable(within=self.cluster_cidr)
        self.iptables = iptables
        self.state_file = os.path.join(state_dir, "pod-network.json") if state_dir else None
        self.resync = float(resync)
        self.pod_cidr = ""
        self.gateway = None                # the bridge's address once the block is known
        self.block_listeners = []          # f(pod_cidr, gateway), from the sync thread
        self.addresses = None              # PodAddresses once the block is known
        self.ready = threading.Event()     # bridge and rules in place: pods may attach
        self.error = "waiting for this node's pod CIDR from the control plane"
        self._nodes = {}                   # name -> Node, from the watch
        self._legacy_dropped = False       # the pod network chains of an older version: looked at once
        self._changed = threading.Event()
        self._lock = threading.Lock()
        self._threads = []
        self.syncs = 0
        self.problems = []                 # what the last sync could not do (iptables, routes)

    # ---- what the pod code calls ----

    def attach(self, config, pod):
        """`config` (a container owning its pod's network) on our bridge with its own address."""
        if not self.ready.is_set():
            raise NotReadyYet("the pod network is not ready: %s" % self.error)
        uid = (pod.get("metadata") or {}).get("uid") or ""
        try:
            address = self.addresses.assign(uid)
        except AddressesExhausted as exc:
            raise CreateError(str(exc))
        return dataclasses.replace(config, network_mode=self.bridge.name, ipv4_address=address)

    def started(self):
        """A container attached by `attach` runs now: its bridge port exists, hairpin it."""
        if self.ready.is_set():
            self.hairpin()

    def hairpin(self):
        """Hairpin mode on every port of our bridge that lacks it (a pod reaching itself
        through its Service gets its packet back out of the port it came in by).
        Returns the ports set; a failure is logged, never raised (the pod still runs)."""
        ip = getattr(self.routes, "ip", None)
        if ip is None:
            return []
        from agent.proxy.iptables import Iptables, IptablesError
        from agent.proxy.node_setup import set_hairpin
        try:
            ports = ports_without_hairpin(ip.json("-d", "link", "show", "master", bridge_name(self.node)))
            runner = Iptables(prefix=ip.prefix)
            for port in ports:
                set_hairpin(runner, port)
        except (OSError, ValueError, IptablesError) as exc:
            log.warning("pod network: hairpin mode on %s: %s (a pod cannot reach itself through its Service)",
                        bridge_name(self.node), exc)
            return []
        return ports

    # ---- threads ----

    def start(self):
        for name, target in (("pod-network-nodes", self._watch_nodes), ("pod-network-sync", self._sync_loop)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def join(self, timeout=None):
        self._changed.set()
        deadline = time.monotonic() + (timeout or 0)
        for thread in self._threads:
            thread.join(None if timeout is None else max(0.0, deadline - time.monotonic()))

    def _watch_nodes(self):
        retry = Backoff(0.5, 10.0)
        while not self.stop.is_set():
            try:
                listed = self.client.list("nodes", consistent=False)
                with self._lock:
                    self._nodes = {n["metadata"]["name"]: n for n in listed.get("items") or []}
                self._changed.set()
                rv = (listed.get("metadata") or {}).get("resourceVersion") or "0"
                retry.reset()
                for event in self.client.watch("nodes", resource_version=rv, stop=self.stop):
                    obj, kind = event.get("object") or {}, event.get("type")
                    name = (obj.get("metadata") or {}).get("name")
                    if not name or kind not in ("ADDED", "MODIFIED", "DELETED"):
                        continue
                    with self._lock:
                        before = self._nodes.get(name)
                        if kind == "DELETED":
                            self._nodes.pop(name, None)
                        else:
                            self._nodes[name] = obj
                    if _route_facts(before) != _route_facts(obj if kind != "DELETED" else None):
                        self._changed.set()
            except WatchExpired:
                continue
            except ClientError as exc:
                log.warning("node list/watch for the pod network failed: %s; retrying in %.1fs", exc, retry.peek())
            except Exception:  # noqa: BLE001 - the watch must survive anything
                log.exception("node watch for the pod network failed")
            retry.wait(self.stop)

    def _sync_loop(self):
        last = 0.0
        while not self.stop.is_set():
            self._changed.wait(self.resync)
            if self.stop.is_set():
                return
            wait = MIN_SYNC_INTERVAL - (time.monotonic() - last)
            if wait > 0 and self.stop.wait(wait):
                return
            self._changed.clear()
            last = time.monotonic()
            try:
                self.sync()
            except Exception as exc:  # noqa: BLE001 - logged, retried on the next pass
                self.error = str(exc)
                log.warning("pod network sync failed: %s", exc)

    # ---- one pass ----

    def sync(self):
        """Converge bridge, rules, address plan and routes to the Nodes known now."""
        with self._lock:
            nodes = list(self._nodes.values())
        own = next((n for n in nodes if n["metadata"]["name"] == self.node), None)
        cidr = pod_cidr_of(own) if own is not None else ""
        if not cidr:
            self.error = "node %s has no pod CIDR yet (see its NetworkUnavailable condition)" % self.node
            return
        if cidr != self.pod_cidr:
            if not ipaddress.IPv4Network(cidr).subnet_of(ipaddress.IPv4Network(self.cluster_cidr)):
                self.error = ("this node's pod CIDR %s is outside --cluster-cidr %s: give the agent the "
                              "servers' --cluster-cidr" % (cidr, self.cluster_cidr))
                log.error("%s", self.error)
                return
            self.bridge.ensure(cidr)
            self.addresses = PodAddresses(cidr, self.state_file)
            self.pod_cidr, self.gateway = cidr, gateway_of(cidr)
            log.info("pod network for node %s: block %s on %s", self.node, cidr, self.bridge.name)
            for listener in self.block_listeners:
                try:
                    listener(cidr, self.gateway)
                except Exception:  # noqa: BLE001 - a listener's failure must not stop the pod network
                    log.exception("pod network: a listener of the block %s failed", cidr)
        else:
            self.bridge.ensure(cidr)
        self.addresses.sync(self.bridge.attached())
        self.hairpin()            # ports of pods started before an agent restart, or missed
        problems = []
        try:
            rules.apply(self.cluster_cidr, self.iptables)
            if not self._legacy_dropped:
                rules.drop_own_legacy(self.cluster_cidr, self.iptables)
                self._legacy_dropped = True
        except OSError as exc:     # not root, or no iptables: say so, keep the pods going
            problems.append("iptables: %s" % exc)
        try:
            self.routes.sync(desired_routes(nodes, self.node, self.routes.local_addresses()))
        except (OSError, ValueError) as exc:
            problems.append("routes: %s" % exc)
        if problems != self.problems:
            for problem in problems:
                log.error("pod network of node %s: %s (pods on other nodes or networks may not reach this "
                          "node's pods)", self.node, problem)
            self.problems = problems
        self.error = None
        self.ready.set()          # failed rules or routes only cut traffic between nodes: pods may start
        self.syncs += 1


def ports_without_hairpin(links):
    """The names of the bridge ports in `ip -d -j link show master BR` not in hairpin mode yet."""
    return [link["ifname"] for link in links
            if link.get("ifname") and not ((link.get("linkinfo") or {}).get("info_slave_data") or {}).get("hairpin")]


def _route_facts(node):
    """What of a Node the routes depend on (a status post every 30 s changes nothing here)."""
    if node is None:
        return None
    return pod_cidr_of(node), internal_ip_of(node)
