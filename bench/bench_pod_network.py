"""Cross-node pod-to-pod throughput through the pod network (bridge + host-gw route +
our iptables chains) next to node-to-node throughput over the same link. Root only.

Two nodes are network namespaces with their own dockerd, joined by a veth
(bench/netns_nodes.py). The pod network is made by the agent's own code
(agent/network/: bridge, rules, routes, addresses); the pods are busybox containers
on it. Both figures use the same tools (busybox `dd | nc` into `nc -l > /dev/null`);
the node-to-node pair runs in host-network containers, i.e. in the node namespaces.

    sudo python bench/bench_pod_network.py [--megabytes 512] [--rounds 3]
"""
import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import docker  # noqa: E402

from agent.network import rules  # noqa: E402
from agent.network.bridge import BridgeNetwork  # noqa: E402
from agent.network.ipam import PodAddresses  # noqa: E402
from agent.network.routes import IpCommand, RouteTable  # noqa: E402
from bench.netns_nodes import IMAGE, NodePair  # noqa: E402

CLUSTER = "10.244.0.0/16"
BLOCKS = ("10.244.0.0/24", "10.244.1.0/24")
PORT = 5001


def pod_network(node, name, block, other_block, other_address):
    api = docker.APIClient(base_url=node.docker_url, version="auto", timeout=120)
    bridge = BridgeNetwork(api, name)
    bridge.ensure(block)
    rules.apply(CLUSTER, rules.Iptables(prefix=node.prefix))
    RouteTable(IpCommand(prefix=node.prefix)).sync({other_block: other_address})
    return api, bridge, PodAddresses(block)


def container(api, name, command, network, address=None):
    kwargs = {}
    if address:
        kwargs["networking_config"] = api.create_networking_config(
            {network: api.create_endpoint_config(ipv4_address=address)})
    cid = api.create_container(IMAGE, command=command, name=name, detach=True,
                               host_config=api.create_host_config(network_mode=network), **kwargs)["Id"]
    api.start(cid)
    return cid


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--megabytes", type=int, default=512, help="per transfer")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_pod_network: needs root (network namespaces, dockerd, iptables)", file=sys.stderr)
        return 2
    print("bench_pod_network: %d MiB per transfer, %d rounds, best and median MiB/s" % (args.megabytes, args.rounds))
    with NodePair("pnb") as pair:
        n1, n2 = pair.nodes
        api1, bridge1, ips1 = pod_network(n1, "pnb-w1", BLOCKS[0], BLOCKS[1], n2.address)
        api2, bridge2, ips2 = pod_network(n2, "pnb-w2", BLOCKS[1], BLOCKS[0], n1.address)
        sender_pod = container(api1, "pnb-pod-send", ["sleep", "3600"], bridge1.name, ips1.assign("send"))
        host_sender = container(api1, "pnb-host-send", ["sleep", "3600"], "host")
        results = {"pod to pod (bridge, route, iptables)": [], "node to node (veth)": []}
        for r in range(args.rounds):
            receiver_ip = _pod_receiver(api2, bridge2.name, ips2.assign("recv-%d" % r), r)
            seconds = _push(api1, sender_pod, receiver_ip, args.megabytes)
            api2.remove_container("pnb-recv-pod-%d" % r, force=True)
            results["pod to pod (bridge, route, iptables)"].append(args.megabytes / seconds)
            _host_receiver(api2, r)
            seconds = _push(api1, host_sender, n2.address, args.megabytes)
            api2.remove_container("pnb-recv-host-%d" % r, force=True)
            results["node to node (veth)"].append(args.megabytes / seconds)
        for label, rates in results.items():
            rates.sort()
            print("  %-40s best %8.1f MiB/s   median %8.1f MiB/s" % (label, rates[-1], rates[len(rates) // 2]))
        pod, node = (sorted(v)[len(v) // 2] for v in results.values())
        print("  pod-to-pod / node-to-node (medians): %.2f" % (pod / node))
    return 0


def _pod_receiver(api, network, address, r):
    container(api, "pnb-recv-pod-%d" % r, ["sh", "-c", "nc -l -p %d > /dev/null" % PORT], network, address)
    time.sleep(0.3)
    return address


def _host_receiver(api, r):
    container(api, "pnb-recv-host-%d" % r, ["sh", "-c", "nc -l -p %d > /dev/null" % PORT], "host")
    time.sleep(0.3)


def _push(api, sender, target_ip, megabytes):
    command = ["sh", "-c", "dd if=/dev/zero bs=65536 count=%d 2>/dev/null | nc %s %d"
               % (megabytes * 16, target_ip, PORT)]
    exec_id = api.exec_create(sender, command)["Id"]
    started = time.monotonic()
    api.exec_start(exec_id)
    elapsed = time.monotonic() - started
    code = api.exec_inspect(exec_id).get("ExitCode")
    if code != 0:
        raise RuntimeError("the sender exited %s (target %s)" % (code, target_ip))
    return elapsed


if __name__ == "__main__":
    sys.exit(main())
