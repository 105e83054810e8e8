"""Service proxy figures (root: the rules go into a network namespace, svbench, made
and deleted here; the host's tables are not touched).

1. A full sync with S Services of E endpoints each (default 1,000 x 10): render
   time, iptables-restore time (into an empty table, then again over itself), and a
   partial sync after one endpoint change.
2. Endpoint change to rule change: a real 1-replica control plane holds the same
   Services and Endpoints; the agent's ServiceProxy follows them (list + watch) and
   applies to svbench with its default 1 s minimum interval. Each change is a PUT of
   one Endpoints object; its latency runs from just before the PUT to the end of the
   iptables-restore holding the new endpoint. Changes come every 0.5-1.5 s.

    sudo python bench/bench_proxy.py [--services 1000] [--endpoints 10] [--changes 40]
"""
import argparse
import os
import random
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench.common import BenchCluster, ms, percentile, print_machine, progress, say, table  # noqa: E402

from agent.proxy import rules  # noqa: E402
from agent.proxy.iptables import Iptables  # noqa: E402
from agent.proxy.proxier import Proxier, ProxyState, ServiceProxy  # noqa: E402
from shepherd_ha.client import Client  # noqa: E402

NETNS = "svbench"


def service(i):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "default", "name": "s%04d" % i},
            "spec": {"clusterIP": "10.96.%d.%d" % (i // 250, i % 250 + 2), "type": "NodePort" if i % 10 == 0
                     else "ClusterIP", "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080,
                                                  **({"nodePort": 30000 + i} if i % 10 == 0 else {})}]}}


def endpoints(i, count, salt=0):
    ips = ["10.244.%d.%d" % ((i * count + j) // 250, (i * count + j) % 250 + 2) for j in range(count)]
    if salt:
        ips[0] = "10.%d.%d.%d" % (128 + salt // 62500 % 100, salt // 250 % 250, salt % 250 + 2)
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"namespace": "default", "name": "s%04d" % i},
            "subsets": [{"addresses": [{"ip": ip} for ip in ips], "ports": [{"port": 8080, "protocol": "TCP"}]}]}


def netns(action):
    subprocess.run(["ip", "netns", action, NETNS], capture_output=True)


class TimedIptables(Iptables):
    """Records when each restore finished and what it held."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.done = []          # (monotonic time at the end, text)
        self.lock = threading.Lock()

    def restore(self, text):
        super().restore(text)
        with self.lock:
            self.done.append((time.monotonic(), text))


def full_sync(args):
    say("1. Full sync: %d Services x %d endpoints" % (args.services, args.endpoints))
    netns("del")
    netns("add")
    try:
        iptables = Iptables(prefix=["ip", "netns", "exec", NETNS])
        state = ProxyState()
        state.replace("services", [service(i) for i in range(args.services)])
        state.replace("endpoints", [endpoints(i, args.endpoints) for i in range(args.services)])
        services, eps, _ = state.snapshot()
        renders = []
        for _ in range(5):
            started = time.perf_counter()
            ports = rules.service_ports(services, {(e["metadata"]["namespace"], e["metadata"]["name"]): e
                                                   for e in eps.values()})
            ruleset = rules.render(ports, ["192.168.0.1"], "10.244.0.0/16")
            text = rules.restore_text(ruleset)
            renders.append(time.perf_counter() - started)
        proxier = Proxier(state, iptables, node_ips=["192.168.0.1"], cluster_cidr="10.244.0.0/16")
        first = proxier.sync(full=True)
        again = proxier.sync(full=True)
        state.put("endpoints", endpoints(7, args.endpoints, salt=1))
        partial = proxier.sync()
        rows = [["render + restore text (median of 5)", ms(sorted(renders)[2]), "-", "-", "-"]]
        for label, f in (("full sync, empty table", first), ("full sync over itself", again),
                         ("one endpoint changed", partial)):
            rows.append([label, ms(f["render"]), ms(f["restore"]), f["chains"], "%.1f" % (f["bytes"] / 1e6)])
        table(["sync", "render ms", "restore ms", "chains", "restore MB"], rows)
        say("  rules rendered: %d; restore text %d bytes" % (first["rules"], len(text)))
    finally:
        netns("del")


def change_latency(args):
    say("")
    say("2. Endpoint change to rule change (real control plane, list + watch, min interval 1 s)")
    netns("del")
    netns("add")
    try:
        with BenchCluster(replicas=1) as bench:
            client = Client(bench.urls(), timeout=10.0)
            progress("creating %d services and endpoints" % args.services)
            for i in range(args.services):
                svc = service(i)
                client.create("services", svc, namespace="default")
                client.create("endpoints", endpoints(i, args.endpoints), namespace="default")
            iptables = TimedIptables(prefix=["ip", "netns", "exec", NETNS])
            stop = threading.Event()
            proxy = ServiceProxy(client, iptables, stop, node_ips=["192.168.0.1"], cluster_cidr="10.244.0.0/16")
            proxy.start()
            deadline = time.monotonic() + 120
            while proxy.proxier.syncs == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            first = proxy.proxier.last
            progress("first sync: %d chains, restore %s ms" % (first.get("chains", 0), ms(first.get("restore"))))
            latencies, restores = [], []
            rng = random.Random(7)
            for n in range(args.changes):
                time.sleep(rng.uniform(0.5, 1.5))
                i = rng.randrange(args.services)
                obj = endpoints(i, args.endpoints, salt=n + 1)
                new_ip = obj["subsets"][0]["addresses"][0]["ip"]
                current = client.get("endpoints", obj["metadata"]["name"], namespace="default")
                obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                started = time.monotonic()
                client.replace("endpoints", obj)
                needle = "--to-destination %s:8080" % new_ip
                end = None
                while end is None and time.monotonic() - started < 30:
                    with iptables.lock:
                        end = next((t for t, text in iptables.done if t >= started and needle in text), None)
                    if end is None:
                        time.sleep(0.002)
                if end is not None:
                    latencies.append(end - started)
                    restores.append(proxy.proxier.last.get("restore", 0))
            stop.set()
            proxy.join()
            client.close()
        table(["changes", "p50 ms", "p90 ms", "p99 ms", "max ms", "restore p50 ms"],
              [[len(latencies), ms(percentile(latencies, 50)), ms(percentile(latencies, 90)),
                ms(percentile(latencies, 99)), ms(max(latencies) if latencies else None),
                ms(percentile(restores, 50))]])
        say("  (a change landing within 1 s of the previous sync waits for the minimum interval)")
    finally:
        netns("del")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--endpoints", type=int, default=10)
    parser.add_argument("--changes", type=int, default=40)
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_proxy needs root (it programs iptables in a network namespace)")
    print_machine()
    full_sync(args)
    if not args.skip_latency:
        change_latency(args)


if __name__ == "__main__":
    main()
