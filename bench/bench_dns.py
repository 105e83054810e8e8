#!/usr/bin/env python3
"""The node DNS server's answer latency under a steady query rate (open loop).

The server (agent/dns/server.py) runs in its own process on a loopback address, with
a zone of --services Services of --endpoints endpoints each (every tenth headless), as
the agent's watch would fill it, forwarding outside names to a fake upstream in a
third process. This process sends --rate queries per second over UDP for --seconds
(each sent on schedule, whether earlier ones were answered or not) in a pod's mix:
  hit     A of `<svc>.<ns>.svc.cluster.local` (a pod's first search try for `svc`)
  miss    A of `<name>.<ns>.svc.cluster.local` that does not exist (NXDOMAIN + SOA:
          what every search try of an outside name costs with ndots:5)
  srv     SRV of `_http._tcp.<svc>.<ns>.svc.cluster.local`
  forward A of an outside name (to the upstream and back)
and prints p50/p99/max per kind and lost answers.

    python bench/bench_dns.py                     # 1,000 queries/s for 10 s
    python bench/bench_dns.py --rate 3000 --seconds 5
"""
import argparse
import multiprocessing
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "unit"))

from dnslib import DNSRecord  # noqa: E402

from bench.common import ms, percentile, print_background_load, print_machine, say, table, wait_for_quiet  # noqa: E402

MIX = (("hit", 0.6), ("miss", 0.25), ("srv", 0.05), ("forward", 0.10))


def zone_objects(n_services, n_endpoints):
    services, endpoints = [], []
    for i in range(n_services):
        ns = "ns%d" % (i % 20)
        name = "svc%d" % i
        headless = i % 10 == 0
        services.append({"metadata": {"name": name, "namespace": ns},
                         "spec": {"clusterIP": "None" if headless else "10.96.%d.%d" % (i // 250, i % 250 + 1),
                                  "ports": [{"name": "http", "port": 80}]}})
        endpoints.append({"metadata": {"name": name, "namespace": ns}, "subsets": [{
            "addresses": [{"ip": "10.244.%d.%d" % (j, i % 250 + 1)} for j in range(n_endpoints)],
            "ports": [{"name": "http", "port": 8080}]}]})
    return services, endpoints


def run_upstream(ready, host):
    from dns_kit import FakeUpstream
    import dns_kit
    dns_kit.loopback_ip = lambda: host
    up = FakeUpstream(port=53)
    ready.put((up.host, up.port))
    while True:
        time.sleep(3600)


def run_server(ready, host, upstream, n_services, n_endpoints):
    from agent.dns.forwarder import Forwarder
    from agent.dns.records import Zone
    from agent.dns.server import DNSServer
    zone = Zone()
    services, endpoints = zone_objects(n_services, n_endpoints)
    zone.replace_all(services=services, endpoints=endpoints)
    server = DNSServer(zone, host, 0, Forwarder(lambda: [upstream])).start()
    ready.put((server.port, zone.sizes()))
    while True:
        time.sleep(3600)


def questions(n_services, count, rng):
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    out = []
    for _ in range(count):
        kind = rng.choices(kinds, weights)[0]
        i = rng.randrange(n_services)
        ns = "ns%d" % (i % 20)
        if kind == "hit":
            q = DNSRecord.question("svc%d.%s.svc.cluster.local" % (i, ns))
        elif kind == "miss":
            q = DNSRecord.question("example%d.com.%s.svc.cluster.local" % (i, ns))
        elif kind == "srv":
            q = DNSRecord.question("_http._tcp.svc%d.%s.svc.cluster.local" % (i, ns), "SRV")
        else:
            q = DNSRecord.question("example.com")
        out.append((kind, q))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="queries per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--endpoints", type=int, default=10)
    parser.add_argument("--quiet-wait", type=float, default=60.0,
                        help="wait up to this many seconds for other processes to calm down first")
    args = parser.parse_args()
    print_machine()
    wait_for_quiet(args.quiet_wait)
    print_background_load()
    host = "127.%d.%d.%d" % (random.randint(1, 254), random.randint(1, 254), random.randint(2, 254))
    up_host = "127.%d.%d.%d" % (random.randint(1, 254), random.randint(1, 254), random.randint(2, 254))
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Queue()
    upstream = ctx.Process(target=run_upstream, args=(ready, up_host), daemon=True)
    upstream.start()
    up_addr = ready.get(timeout=10)
    server = ctx.Process(target=run_server, args=(ready, host, up_addr, args.services, args.endpoints), daemon=True)
    server.start()
    port, sizes = ready.get(timeout=60)
    say("zone: %(services)d services, %(endpoints)d endpoints objects, %(names)d names" % sizes)
    say("load: %.0f queries/s for %.0f s over UDP, open loop; mix %s" % (
        args.rate, args.seconds, ", ".join("%s %d%%" % (k, w * 100) for k, w in MIX)))

    rng = random.Random(1)
    count = int(args.rate * args.seconds)
    plan = questions(args.services, count, rng)
    packets = []
    for i, (kind, q) in enumerate(plan):
        q.header.id = i % 65536
        packets.append((kind, q.pack()))
    sent = {}                  # id -> (kind, send time)
    latencies = {k: [] for k, _ in MIX}
    lost = {k: 0 for k, _ in MIX}
    rcodes = {}
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect((host, port))
    sock.settimeout(0.2)
    done = threading.Event()

    def receive():
        while not done.is_set() or sent:
            try:
                data = sock.recv(65535)
            except socket.timeout:
                if done.is_set():
                    return
                continue
            now = time.perf_counter()
            qid = int.from_bytes(data[:2], "big")
            entry = sent.pop(qid, None)
            if entry is None:
                continue
            kind, at = entry
            latencies[kind].append(now - at)
            rcodes[data[3] & 0x0F] = rcodes.get(data[3] & 0x0F, 0) + 1

    receiver = threading.Thread(target=receive, daemon=True)
    receiver.start()
    start = time.perf_counter()
    late = 0
    for i, (kind, packet) in enumerate(packets):
        due = start + i / args.rate
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        elif wait < -0.005:
            late += 1
        qid = i % 65536
        old = sent.pop(qid, None)
        if old is not None:
            lost[old[0]] += 1
        sent[qid] = (kind, time.perf_counter())
        sock.send(packet)
    elapsed = time.perf_counter() - start
    time.sleep(1.0)            # the last answers
    done.set()
    receiver.join(5)
    for kind, _ in sent.values():
        lost[kind] += 1
    server.terminate()
    upstream.terminate()

    say("sent %d queries in %.1f s (%.0f/s; %d sent more than 5 ms late)" % (count, elapsed, count / elapsed, late))
    rows = []
    for kind, _ in MIX:
        values = latencies[kind]
        rows.append([kind, len(values), lost[kind], ms(percentile(values, 50), 2) if values else None,
                     ms(percentile(values, 99), 2) if values else None, ms(max(values), 2) if values else None])
    allv = [v for vs in latencies.values() for v in vs]
    if not allv:
        say("no answers at all")
        return
    rows.append(["all", len(allv), sum(lost.values()), ms(percentile(allv, 50), 2), ms(percentile(allv, 99), 2),
                 ms(max(allv), 2)])
    table(["kind", "answered", "lost", "p50 ms", "p99 ms", "max ms"], rows)
    say("rcodes: %s" % ", ".join("%s %d" % ({0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN"}.get(k, k), v)
                                 for k, v in sorted(rcodes.items())))


if __name__ == "__main__":
    main()
