#!/usr/bin/env python3
"""What TLS costs: the same requests against a plain-HTTP cluster (--insecure-http) and a
TLS cluster (the terminator in front of waitress, shepherd_ha/tls/), in the same run.

Two fresh 3-replica LocalClusters side by side; every phase alternates between them in
rounds (plain, TLS, TLS, plain, ...), so a noisy machine weighs on both alike; each is
measured the same way from this process:

- GET /healthz, one keep-alive connection, sequential (N requests): the per-request
  cost of the extra hop (TLS records, the terminator's pipe, the Unix socket);
- GET a ConfigMap with resourceVersion=0 (a read served by the worker's mirror);
- POST a ConfigMap (a create through Raft), sequential, round-robin over the replicas;
- POST creates from C concurrent clients (threads, one keep-alive connection each per
  replica): creates/s;
- GET /healthz on a NEW connection each time: the handshake (ECDHE + P-256 signature
  on the server, the verification on the client).

Prints p50/p99/mean per phase, creates/s, the replicas' CPU per request, and TLS/plain
ratios. Figures go to docs/benchmarks.md by hand.
"""
import argparse
import json
import os
import ssl
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import ms, percentile, say  # noqa: E402

CM_PATH = "/api/v1/namespaces/default/configmaps"


def _context(cluster):
    return ssl.create_default_context(cafile=cluster.cluster.ca_file) if cluster.tls else None


def _timed(fn, n):
    lat = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        lat.append(time.perf_counter() - t0)
    return lat


def _check(status, body, want, what):
    if status != want:
        raise SystemExit("%s: HTTP %d %s" % (what, status, body[:300]))


class Target:
    """One cluster and this process's connections to it."""

    def __init__(self, bc):
        self.bc, self.urls, self.ctx = bc, bc.urls(), _context(bc)
        self.conns = [common.KeepAlive(u, 10.0, self.ctx) for u in self.urls]
        self.meter = common.CpuMeter(bc.pids())
        self.run = uuid.uuid4().hex[:6]
        self.n = 0
        status, body = self.conns[0].request("POST", CM_PATH, _cm("probe"), _write_headers())
        _check(status, body, 201, "create probe")
        for _ in range(200):                                     # warm-up, not counted
            self.conns[0].request("GET", "/healthz", None, {})

    def name(self, prefix):
        self.n += 1
        return "%s-%s-%d" % (prefix, self.run, self.n)

    def close(self):
        for c in self.conns:
            c.close()


def _cm(name):
    return json.dumps({"metadata": {"name": name}, "data": {"k": "v" * 200}}).encode()


def _write_headers():
    return {"Content-Type": "application/json", "Idempotency-Key": uuid.uuid4().hex}


# ---- phases: each returns (latencies or None, requests done, replica CPU seconds) ----

def _metered(t, fn):
    t.meter.start()
    lat, done = fn()
    cpu = t.meter.stop()
    return lat, done, sum(cpu["per_process"].values()) * cpu["wall"], cpu["wall"]


def phase_healthz(t, n):
    return _metered(t, lambda: (_timed(lambda i: _check(*t.conns[0].request("GET", "/healthz", None, {}), 200,
                                                          "healthz"), n), n))


def phase_read(t, n):
    return _metered(t, lambda: (_timed(lambda i: _check(*t.conns[i % 3].request(
        "GET", CM_PATH + "/probe?resourceVersion=0", None, {}), 200, "read"), n), n))


def phase_create(t, n):
    return _metered(t, lambda: (_timed(lambda i: _check(*t.conns[i % 3].request(
        "POST", CM_PATH, _cm(t.name("s")), _write_headers()), 201, "create"), n), n))


def phase_fresh(t, n):
    def one(i):
        c = common.KeepAlive(t.urls[i % 3], 10.0, t.ctx)
        _check(*c.request("GET", "/healthz", None, {"Connection": "close"}), 200, "healthz")
        c.close()
    return _metered(t, lambda: (_timed(one, n), n))


def phase_concurrent(t, clients, seconds):
    done = [0] * clients
    stop = threading.Event()

    def client(k):
        own = [common.KeepAlive(u, 10.0, t.ctx) for u in t.urls]
        i = 0
        while not stop.is_set():
            _check(*own[i % 3].request("POST", CM_PATH, _cm(t.name("c%d" % k)), _write_headers()), 201, "create")
            i += 1
            done[k] = i
        for c in own:
            c.close()

    def run():
        threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
        for th in threads:
            th.start()
        time.sleep(seconds)
        stop.set()
        for th in threads:
            th.join(30)
        return None, sum(done)
    return _metered(t, run)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000, help="sequential GETs per phase (default 2000)")
    ap.add_argument("--creates", type=int, default=500, help="sequential creates (default 500)")
    ap.add_argument("--clients", type=int, default=8, help="concurrent creating clients (default 8)")
    ap.add_argument("--seconds", type=float, default=8.0, help="length of the concurrent phase (default 8)")
    ap.add_argument("--fresh", type=int, default=300, help="GETs on a new connection each (default 300)")
    ap.add_argument("--rounds", type=int, default=6, help="alternations of plain and TLS per phase (default 6)")
    args = ap.parse_args(argv)
    common.exit_on_sigterm()
    common.print_machine()
    common.print_background_load()
    with common.BenchCluster(3, tls=False) as plain_bc, common.BenchCluster(3, tls=True) as tls_bc:
        targets = {"plain": Target(plain_bc), "TLS": Target(tls_bc)}
        phases = (("healthz", lambda t: phase_healthz(t, args.requests // args.rounds)),
                  ("read", lambda t: phase_read(t, args.requests // args.rounds)),
                  ("create", lambda t: phase_create(t, args.creates // args.rounds)),
                  ("fresh", lambda t: phase_fresh(t, args.fresh // args.rounds)),
                  ("rate", lambda t: phase_concurrent(t, args.clients, args.seconds / args.rounds)))
        results = {label: {p: [[], 0, 0.0, 0.0] for p, _ in phases} for label in targets}
        say()
        say("both clusters run side by side; each phase alternates plain, TLS, plain, TLS ... "
            "(%d rounds each), so the machine's noise falls on both alike" % args.rounds)
        for phase, fn in phases:
            for r in range(args.rounds):
                for label in (("plain", "TLS") if r % 2 == 0 else ("TLS", "plain")):
                    lat, done, cpu, wall = fn(targets[label])
                    acc = results[label][phase]
                    acc[0] += lat or []
                    acc[1] += done
                    acc[2] += cpu
                    acc[3] += wall
            common.progress("%s done" % phase)
        for t in targets.values():
            t.close()
    say()
    say("sequential latency (one client, ms): p50 / p99 / mean")
    rows = []
    for phase, what in (("healthz", "GET /healthz, keep-alive"), ("read", "GET configmap rv=0, keep-alive"),
                        ("create", "POST configmap (Raft), keep-alive"), ("fresh", "GET /healthz, new connection")):
        cells = [what]
        mean = {}
        for label in ("plain", "TLS"):
            lat = results[label][phase][0]
            mean[label] = sum(lat) / len(lat)
            cells.append("%s / %s / %s" % (ms(percentile(lat, 50), 2), ms(percentile(lat, 99), 2),
                                           ms(mean[label], 2)))
        cells.append("%.2f" % (mean["TLS"] / mean["plain"]))
        cells.append("+%s" % ms(mean["TLS"] - mean["plain"], 3))
        rows.append(cells)
    common.table(["phase", "plain", "TLS", "TLS/plain (mean)", "TLS extra ms"], rows)
    say()
    say("replica CPU per request (ms, all 3 replicas' processes together), and concurrent creates")
    rows = []
    for phase, what in (("healthz", "GET /healthz"), ("read", "GET configmap rv=0"), ("create", "sequential create"),
                        ("rate", "concurrent create"), ("fresh", "new connection + GET")):
        p, t = (results[label][phase][2] / max(1, results[label][phase][1]) for label in ("plain", "TLS"))
        rows.append([what, ms(p, 3), ms(t, 3), "%.2f" % (t / p if p else 0)])
    p, t = (results[label]["rate"][1] / results[label]["rate"][3] for label in ("plain", "TLS"))
    rows.append(["creates/s, %d clients" % args.clients, "%.0f" % p, "%.0f" % t, "%.2f" % (t / p)])
    common.table(["", "plain", "TLS", "TLS/plain"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
