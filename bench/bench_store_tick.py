#!/usr/bin/env python3
"""The store processes' Raft tick under a 30,000-pod load, without the hollow fleet.

A fresh 3-replica cluster (store process + API worker per replica, no nodes: pods stay
Pending). Phases:

1. bulk: Deployments totalling P pods (the ReplicaSet controller's write_many, the bulk
   path), until every store holds them;
2. steady, S seconds: W threads PATCH pod status (a kubelet's writes: big changes, with
   the previous object, on the change stream) and create small ConfigMaps, round-robin
   over the replicas; beside them, on every store process, a subscriber that asks for
   the change stream from revision 0 (so a snapshot of the whole store) over and over,
   and one that reads the stream slowly (it falls behind the watch log, so it gets
   snapshots too and big frames).

Per store process and phase it prints: the longest Raft tick gap, gaps over 0.3 s (the
election timeout's minimum) and 1 s (from the tick-gap histogram, read from the store
process's own status call), leader changes, peak RSS of the store process and of the
replica's whole process tree, and the journal/dump on disk. With --pyspy, py-spy samples
every store process (`--gil`: the thread holding the GIL) and the top frames are printed.

Compare builds by ratios within one run of this machine (it is noisy): run this file
from each build's checkout, alternated, a few times each.
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import psutil
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import say  # noqa: E402
from replica_resources import dir_size, replica_processes  # noqa: E402

from shepherd_ha.cli.local_cluster import LocalClusterError  # noqa: E402
from shepherd_ha.cli.supervisor import socket_path  # noqa: E402
from shepherd_ha.store import local_protocol as lp  # noqa: E402

NS = "ticks"


class StoreWatch:
    """Samples each store process (its own status call) and RSS every `interval` s."""

    def __init__(self, bench, interval=0.5):
        self.bench, self.interval = bench, interval
        self.clients = {i: lp.Client(socket_path(self._data(i))) for i in bench.ids()}
        self.last = {}                 # id -> last status
        self.peak_store, self.peak_tree = {}, {}
        self.terms = set()
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _data(self, ident):
        return os.path.join(self.bench.dir, ident, "data")

    def status(self, ident):
        try:
            return self.clients[ident].call("status", 2.0)
        except Exception:                 # noqa: BLE001 - a store busy or restarting: sample again
            return None

    def sample(self):
        for ident in self.bench.ids():
            st = self.status(ident)
            if st is None:
                continue
            self.last[ident] = st
            self.terms.add(st["term"])
            try:
                rss = psutil.Process(st["storePid"]).memory_info().rss
            except psutil.Error:
                continue
            tree = sum(p.memory_info().rss for p in replica_processes(self.bench.pids()[ident])
                       if p.is_running())
            self.peak_store[ident] = max(self.peak_store.get(ident, 0), rss)
            self.peak_tree[ident] = max(self.peak_tree.get(ident, 0), tree)

    def _run(self):
        while not self.stop.wait(self.interval):
            try:
                self.sample()
            except Exception:        # noqa: BLE001 - a sample lost to a busy machine: the next one counts
                pass

    def start(self):
        self.sample()
        self._thread.start()
        return self

    def mark(self):
        """{id: (histogram buckets, longest, term)} now, and reset the RSS peaks."""
        self.sample()
        out = {i: (dict(st["tickGaps"]["buckets"]), st["tickGaps"]["longestSeconds"], st["term"], st["role"],
                   st["storePid"]) for i, st in self.last.items()}
        peaks = (dict(self.peak_store), dict(self.peak_tree))
        self.peak_store, self.peak_tree = {}, {}
        return out, peaks


def over(buckets, bound):
    """Gaps longer than `bound` (a bucket bound) from a cumulative histogram."""
    return buckets[float("inf")] - buckets[bound]


def phase_rows(name, before, after, peaks, bench):
    rows = []
    for ident in bench.ids():
        b, a = before[0].get(ident), after[0].get(ident)
        if not a or not b:
            continue
        ticks = a[0][float("inf")] - b[0][float("inf")]
        data = os.path.join(bench.dir, ident, "data")
        rows.append([name, ident, a[3], "%.3f" % a[1] if a[1] > b[1] else "<=%.3f" % b[1], ticks,
                     over(a[0], 0.3) - over(b[0], 0.3), over(a[0], 1.0) - over(b[0], 1.0),
                     "%d->%d" % (b[2], a[2]), "%.0f" % (peaks[0].get(ident, 0) / 1e6),
                     "%.0f" % (peaks[1].get(ident, 0) / 1e6),
                     "%.0f" % (dir_size(data) / 1e6)])
    return rows


def snapshot_subscriber(path, stop, counts, slow=False):
    """Subscribe from revision 0 (a snapshot) again and again; or, slow, read the stream
    at a crawl so the store sends snapshots and big frames to a laggard."""
    while not stop.is_set():
        try:
            conn = lp.connect(path, timeout=5.0)
            conn.send({"op": "subscribe", "args": {"from": 0}})
            conn.sock.settimeout(30.0)
            while not stop.is_set():
                frame = conn.recv()
                if frame.get("kind") == "snapshot-end":
                    counts["snapshots"] += 1
                    if not slow:
                        break
                if slow:
                    time.sleep(0.2)
            conn.close()
        except (OSError, EOFError, lp.ProtocolError):
            time.sleep(0.5)


def status_writer(urls, names, stop, out, offset):
    session = requests.Session()
    n = offset
    while not stop.is_set():
        name = names[n % len(names)]
        url = urls[n % len(urls)]
        n += 1
        body = {"status": {"phase": "Running", "podIP": "10.%d.%d.%d" % (n % 200, n // 200 % 250, n % 250),
                           "conditions": [{"type": "Ready", "status": "True" if n % 2 else "False"}]}}
        start = time.perf_counter()
        try:
            resp = session.patch(url + "/api/v1/namespaces/%s/pods/%s/status" % (NS, name), json=body, timeout=10,
                                 headers={"Content-Type": "application/merge-patch+json"})
            out.append((time.perf_counter() - start, resp.status_code))
        except requests.RequestException:
            out.append((time.perf_counter() - start, 0))


def small_writer(urls, stop, out, offset):
    session = requests.Session()
    n = offset
    while not stop.is_set():
        n += 1
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-%s" % uuid.uuid4().hex[:12]},
                "data": {"n": str(n)}}
        start = time.perf_counter()
        try:
            resp = session.post(urls[n % len(urls)] + "/api/v1/namespaces/%s/configmaps" % NS, json=body,
                                timeout=10, headers={"Idempotency-Key": uuid.uuid4().hex})
            out.append((time.perf_counter() - start, resp.status_code))
        except requests.RequestException:
            out.append((time.perf_counter() - start, 0))


def deployment(name, replicas, pad):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}, "annotations": {"pad": "x" * pad}},
                                  "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}}}


def post(bench, path, body, attempts=90):
    """POST to the leader with one idempotency key, retried through elections (5xx)."""
    key = uuid.uuid4().hex
    for _ in range(attempts):
        try:
            resp = requests.post(bench.cluster.replica(bench.leader())["api"] + path, json=body, timeout=30,
                                 headers={"Idempotency-Key": key})
            if resp.status_code < 500:
                resp.raise_for_status()
                return resp
        except (requests.ConnectionError, requests.Timeout, LocalClusterError):
            pass          # no leader known right now, or it went away: ask again
        time.sleep(1.0)
    raise RuntimeError("POST %s kept failing" % path)


def bulk(bench, watch, pods, deployments, pad, timeout):
    post(bench, "/api/v1/namespaces", {"metadata": {"name": NS}})
    base = min(st["objects"] for st in watch.last.values())
    for i in range(deployments):
        share = pods // deployments + (1 if i < pods % deployments else 0)
        post(bench, "/apis/apps/v1/namespaces/%s/deployments" % NS, deployment("d%d" % i, share, pad))
    t0 = time.monotonic()
    want = base + pods + 2 * deployments
    while time.monotonic() - t0 < timeout:
        watch.sample()
        have = [watch.last[i]["objects"] for i in bench.ids() if i in watch.last]
        common.progress("bulk: %s objects of %d in every store (%.0f s)" % (have, want, time.monotonic() - t0))
        if len(have) == len(bench.ids()) and min(have) >= want:
            break
        time.sleep(3.0)
    return time.monotonic() - t0


def pod_names(bench, page=500):
    """Every pod's name, in pages (one 30,000-pod list timed out on a saturated machine)."""
    names, token, failures = [], None, 0
    while True:
        params = {"limit": str(page)}
        if token:
            params["continue"] = token
        try:
            resp = requests.get(bench.urls()[failures % 3] + "/api/v1/namespaces/%s/pods" % NS, timeout=60,
                                params=params)
            resp.raise_for_status()
        except requests.RequestException:
            failures += 1
            if failures > 30:
                raise
            time.sleep(1.0)
            continue
        body = resp.json()
        names += [p["metadata"]["name"] for p in body["items"]]
        token = body["metadata"].get("continue")
        if not token:
            return names


def start_pyspy(pyspy, pids, directory, seconds):
    procs = []
    for ident, pid in pids.items():
        path = os.path.join(directory, "pyspy-%s.raw" % ident)
        procs.append((ident, path, subprocess.Popen(
            [pyspy, "record", "-p", str(pid), "-r", "50", "-d", str(int(seconds)), "-f", "raw", "--gil",
             "--nonblocking", "-o", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    return procs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=30000)
    parser.add_argument("--deployments", type=int, default=30)
    parser.add_argument("--pad", type=int, default=600, help="bytes of annotation per pod (default 600: ~1 KiB pods)")
    parser.add_argument("--steady-seconds", type=float, default=60)
    parser.add_argument("--writers", type=int, default=8, help="status PATCH threads (default 8)")
    parser.add_argument("--small-writers", type=int, default=2, help="ConfigMap create threads (default 2)")
    parser.add_argument("--no-subscribers", action="store_true", help="no snapshot/slow subscribers")
    parser.add_argument("--pyspy", default=None, help="py-spy binary: sample the store processes in the steady phase")
    parser.add_argument("--server-option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    common.exit_on_sigterm()
    common.print_machine()
    common.print_background_load()
    options = dict(o.split("=", 1) for o in args.server_option)
    with common.BenchCluster(keep=args.keep, server_options=options or None) as bench:
        watch = StoreWatch(bench).start()
        rows = []
        m0 = watch.mark()
        bulk_s = bulk(bench, watch, args.pods, args.deployments, args.pad, 600)
        m1 = watch.mark()
        rows += phase_rows("bulk", m0, m1, m1[1], bench)
        names = pod_names(bench)
        say("  bulk: %d pods in every store after %.1f s" % (len(names), bulk_s))
        stop, counts, samples, small = threading.Event(), {"snapshots": 0}, [], []
        threads = [threading.Thread(target=status_writer, args=(bench.urls(), names, stop, samples, i * 7919),
                                    daemon=True) for i in range(args.writers)]
        threads += [threading.Thread(target=small_writer, args=(bench.urls(), stop, small, i), daemon=True)
                    for i in range(args.small_writers)]
        if not args.no_subscribers:
            for ident in bench.ids():
                path = socket_path(os.path.join(bench.dir, ident, "data"))
                threads.append(threading.Thread(target=snapshot_subscriber, args=(path, stop, counts), daemon=True))
                threads.append(threading.Thread(target=snapshot_subscriber, args=(path, stop, counts, True),
                                                daemon=True))
        spies = []
        if args.pyspy:
            spies = start_pyspy(args.pyspy, {i: st[4] for i, st in m1[0].items()}, bench.dir, args.steady_seconds)
        t0 = time.monotonic()
        for t in threads:
            t.start()
        while time.monotonic() - t0 < args.steady_seconds:
            time.sleep(5.0)
            common.progress("steady: %.0f s, %d status writes, %d snapshots" % (
                time.monotonic() - t0, len(samples), counts["snapshots"]))
        stop.set()
        for t in threads:
            t.join(20)
        m2 = watch.mark()
        rows += phase_rows("steady", m1, m2, m2[1], bench)
        lat = [s[0] for s in samples]
        say("  steady: %d status PATCHes (%.0f/s, p50 %s ms, p99 %s ms, %d errors), %d creates, %d snapshots sent"
            % (len(lat), len(lat) / args.steady_seconds, common.ms(common.percentile(lat, 50)),
               common.ms(common.percentile(lat, 99)), sum(1 for s in samples if s[1] != 200), len(small),
               counts["snapshots"]))
        say("  terms seen: %s" % sorted(watch.terms))
        common.table(["phase", "replica", "role", "longest tick gap s", "ticks", "gaps>0.3s", "gaps>1s", "term",
                      "store RSS MB", "replica RSS MB", "data dir MB"], rows)
        for ident, path, proc in spies:
            proc.wait(30)
            if os.path.exists(path):
                total, leaf, inclusive = common.summarize_pyspy_raw(path, top=12)
                say("  py-spy %s (GIL holder, %d samples): top self / top inclusive" % (ident, total))
                for (p1, f1), (p2, f2) in zip(leaf, inclusive):
                    say("    %5.1f%% %-60s %5.1f%% %s" % (p1, f1[:60], p2, f2[:90]))
        watch.stop.set()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
