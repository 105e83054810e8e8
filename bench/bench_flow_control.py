#!/usr/bin/env python3
"""Lease renewal latency while 16 threads list 10,000 pods, without and with flow
control (shepherd_ha/api/flow_control.py), on fresh 3-replica local clusters.

Each mode gets its own cluster:
  off   --max-requests-inflight 0 --max-watches 0 --api-threads 48 (the replica as it was)
  on    the defaults (64 seats: system 16 / workload 47 / bulk 1, queues as long, 1 s wait)

In each: node n1 and its lease, N pods (1 KiB, bound to n1). Then on the leader:
  idle  a lease renewal (merge PATCH of renewTime) every 0.2 s for --idle seconds
  load  the same, while L lister threads (in a child process, so the bench's own GIL
        does not slow the renewals) list every pod without a selector (resourceVersion=0)
        over and over on the same replica, for --seconds seconds; a 429 is counted and
        the lister sleeps its Retry-After
Prints per mode and phase: renewals, p50 / p99 / max latency, renewals not answered
200, lists answered and refused, and the leader's Raft term before and after (a change
means an election). The machine is shared and noisy: compare modes in one run; --rounds
alternates them.
"""
import argparse
import http.client
import json
import multiprocessing
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import ms, percentile, progress, say  # noqa: E402

MODES = {
    "off": {"max_requests_inflight": 0, "max_watches": 0, "api_threads": 48},
    "on": {},
}
QUIET_NODES = {"node_grace_period": 600.0, "pod_eviction_timeout": 600.0, "orphan_pod_grace": 600.0}
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
JSON = {"Content-Type": "application/json"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def setup(url, pods, writers=8):
    conn = common.KeepAlive(url, 30)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "20000"},
                       "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "20000"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    conn.post("/api/v1/nodes", json.dumps(node).encode(), JSON)
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n1"},
             "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z"}}
    conn.post(LEASE.rsplit("/", 1)[0], json.dumps(lease).encode(), JSON)
    template = common.pod_template(1024, node_name="n1")
    failures = []

    def writer(k):
        c = common.KeepAlive(url, 30)
        for i in range(k, pods, writers):
            for _ in range(20):
                try:
                    status, _ = c.post(common.PODS_PATH, common.pod_body(template, "pod-%019d" % i), JSON)
                except (OSError, http.client.HTTPException):
                    continue
                if status in (201, 409):
                    break
                time.sleep(0.2)
            else:
                failures.append(i)
    common.in_threads(writers, writer)
    if failures:
        raise SystemExit("could not create %d pods" % len(failures))


def listers(url, count, seconds, out):
    """Child process: `count` threads listing every pod; puts (ok, refused, list seconds)."""
    stop = time.monotonic() + seconds
    lock = threading.Lock()
    result = {"ok": 0, "refused": 0, "other": 0, "latency": []}

    host, port = common.split_url(url)

    def run():
        conn = None
        while time.monotonic() < stop:
            start = time.monotonic()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(host, port, timeout=120)
                conn.request("GET", "/api/v1/pods?resourceVersion=0")
                resp = conn.getresponse()
                resp.read()
                retry = resp.getheader("Retry-After")
                if resp.will_close:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException):
                if conn is not None:
                    conn.close()
                conn = None
                with lock:
                    result["other"] += 1
                continue
            with lock:
                if resp.status == 200:
                    result["ok"] += 1
                    result["latency"].append(time.monotonic() - start)
                elif resp.status == 429:
                    result["refused"] += 1
                else:
                    result["other"] += 1
            if resp.status == 429:
                time.sleep(min(float(retry or 1), max(0.0, stop - time.monotonic())))
    threads = [threading.Thread(target=run) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(result)


def renew(url, seconds, interval=0.2):
    """Lease renewals every `interval` s for `seconds`: (latencies of 200s, other answers)."""
    conn = common.KeepAlive(url, 30)
    latencies, bad = [], []
    n = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        n += 1
        body = json.dumps({"spec": {"renewTime": "2026-01-01T00:00:00.%06dZ" % (n % 1000000)}}).encode()
        start = time.monotonic()
        try:
            status, _ = conn.request("PATCH", LEASE, body, MERGE)
        except (OSError, http.client.HTTPException) as exc:
            bad.append(type(exc).__name__)
            continue
        took = time.monotonic() - start
        if status == 200:
            latencies.append(took)
        else:
            bad.append(status)
        time.sleep(max(0.0, interval - took))
    return latencies, bad


def term(url):
    state = common.get_json(url, "/shepherd/v1/replica", timeout=5) or {}
    return state.get("term")


def run_mode(mode, args):
    options = dict(QUIET_NODES, **MODES[mode])
    rows = []
    with common.BenchCluster(server_options=options) as cluster:
        leader = cluster.leader()
        url = cluster.cluster.replica(leader)["api"]
        progress("%s: creating %d pods" % (mode, args.pods))
        setup(url, args.pods)
        term_before = term(url)
        lat, bad = renew(url, args.idle)
        rows.append([mode, "idle", len(lat) + len(bad), ms(percentile(lat, 50)), ms(percentile(lat, 99)),
                     ms(max(lat) if lat else None), len(bad), "-", "-", "-"])
        progress("%s: %d listers for %.0f s" % (mode, args.listers, args.seconds))
        queue = multiprocessing.Queue()
        child = multiprocessing.Process(target=listers, args=(url, args.listers, args.seconds, queue))
        child.start()
        time.sleep(1.0)            # let the lists pile up first
        lat, bad = renew(url, args.seconds - 2.0)
        result = queue.get(timeout=args.seconds + 300)
        child.join(60)
        term_after = term(url)
        rows.append([mode, "load", len(lat) + len(bad), ms(percentile(lat, 50)), ms(percentile(lat, 99)),
                     ms(max(lat) if lat else None), len(bad), result["ok"], result["refused"],
                     "%s->%s" % (term_before, term_after)])
        if bad:
            say("  %s: renewals not answered 200: %s" % (mode, bad[:10]))
        if result["other"]:
            say("  %s: %d lists failed otherwise (neither 200 nor 429)" % (mode, result["other"]))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--listers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the loaded phase")
    parser.add_argument("--idle", type=float, default=5.0, help="length of the idle phase")
    parser.add_argument("--rounds", type=int, default=1, help="off/on pairs, alternated")
    parser.add_argument("--modes", default="off,on", help="which modes, in order (off, on)")
    args = parser.parse_args()
    common.exit_on_sigterm()
    common.print_machine()
    say("lease renewal on the leader, %d pods, %d listers (lists of every pod, resourceVersion=0)"
        % (args.pods, args.listers))
    rows = []
    for n in range(args.rounds):
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        for mode in (modes if n % 2 == 0 else modes[::-1]):
            rows += run_mode(mode, args)
    say()
    common.table(["flow control", "phase", "renewals", "p50 ms", "p99 ms", "max ms", "not 200",
                  "lists 200", "lists 429", "term"], rows)


if __name__ == "__main__":
    main()
