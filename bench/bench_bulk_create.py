#!/usr/bin/env python3
"""A big Deployment beside small writes: how long its pods take to commit, what the
small writes' latency is meanwhile, how many Raft entries (groups) it took, and whether
any replica failed a Raft tick (PySyncObj's chunked transmission of a big entry).

A fresh 3-replica LocalCluster (no nodes: pods stay unscheduled). Per run: W threads
create small ConfigMaps (one keep-alive session each, round-robin over the replicas)
while one Deployment of N replicas is created in a new namespace; a watch on a
follower counts the pods ADDED. Prints per run: seconds from the Deployment's 201 to
the N-th pod seen, the small creates' p50/p99/max in that window, group commit's
groups and commands on the leader, and `failed _onTick` lines in the replicas' logs.

To compare entry bounds, run it on builds that differ in entry_size.GROUP_BYTES.
"""
import argparse
import json
import os
import sys
import threading
import time
import uuid

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import ms, percentile, say  # noqa: E402


def small_writer(urls, ns, stop, out):
    session = requests.Session()
    n = 0
    while not stop.is_set():
        url = urls[n % len(urls)]
        n += 1
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-%s" % uuid.uuid4().hex[:12]},
                "data": {"n": str(n)}}
        start = time.perf_counter()
        try:
            resp = session.post(url + "/api/v1/namespaces/%s/configmaps" % ns, json=body, timeout=10,
                                headers={"Idempotency-Key": uuid.uuid4().hex})
            out.append((time.monotonic(), time.perf_counter() - start, resp.status_code))
        except requests.RequestException:
            out.append((time.monotonic(), time.perf_counter() - start, 0))


def count_added(url, ns, revision, counter, done):
    resp = requests.get(url + "/api/v1/namespaces/%s/pods" % ns, stream=True, timeout=(3, 120),
                        params={"watch": "1", "resourceVersion": str(revision), "timeoutSeconds": "110"})
    for line in resp.iter_lines():
        if line.strip() and json.loads(line).get("type") == "ADDED":
            counter[0] += 1
            if counter[0] >= counter[1]:
                done.set()
                break
    resp.close()


def tick_failures(directory, ids):
    total = 0
    for ident in ids:
        with open(os.path.join(directory, ident, "server.log"), errors="replace") as fh:
            total += sum(1 for line in fh if "failed _onTick" in line)
    return total


def one_run(bench, replicas, writers, index):
    urls = bench.urls()
    leader = bench.leader()
    follower = [i for i in bench.ids() if i != leader][0]
    f_url = bench.cluster.replica(follower)["api"]
    ns = "bulk-%d-%s" % (index, uuid.uuid4().hex[:6])
    requests.post(urls[0] + "/api/v1/namespaces", json={"metadata": {"name": ns}}, timeout=10).raise_for_status()
    revision = int(requests.get(f_url + "/api/v1/namespaces/%s/pods" % ns, timeout=10).json()["metadata"]["resourceVersion"])
    l_url = bench.cluster.replica(leader)["api"]
    before = requests.get(l_url + "/shepherd/v1/replica", timeout=5).json()["groupCommit"]
    counter, done, stop, samples = [0, replicas], threading.Event(), threading.Event(), []
    watcher = threading.Thread(target=count_added, args=(f_url, ns, revision, counter, done), daemon=True)
    watcher.start()
    threads = [threading.Thread(target=small_writer, args=(urls, ns, stop, samples), daemon=True)
               for _ in range(writers)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "big"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "big"}},
                     "template": {"metadata": {"labels": {"app": "big"}},
                                  "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}}}
    requests.post(l_url + "/apis/apps/v1/namespaces/%s/deployments" % ns, json=body, timeout=10).raise_for_status()
    t0 = time.monotonic()
    done.wait(90)
    t1 = time.monotonic()
    stop.set()
    for t in threads:
        t.join(15)
    after = requests.get(l_url + "/shepherd/v1/replica", timeout=5).json()["groupCommit"]
    window = [s for s in samples if t0 <= s[0] - s[1] and s[0] <= t1]
    lat = [s[1] for s in window]
    errors = sum(1 for s in window if s[2] != 201)
    return [index, counter[0], "%.2f" % (t1 - t0), len(lat), ms(percentile(lat, 50)), ms(percentile(lat, 99)),
            ms(max(lat) if lat else None), errors, after["groups"] - before["groups"],
            after["commands"] - before["commands"], tick_failures(bench.dir, bench.ids())]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=5000, help="pods of the Deployment (default 5000)")
    parser.add_argument("--writers", type=int, default=4, help="threads doing small creates (default 4)")
    parser.add_argument("--runs", type=int, default=3, help="Deployments, one after the other (default 3)")
    args = parser.parse_args()
    common.exit_on_sigterm()
    common.print_machine()
    with common.BenchCluster() as bench:
        rows = [one_run(bench, args.replicas, args.writers, i + 1) for i in range(args.runs)]
    common.table(["run", "pods seen", "s to all", "small creates", "p50 ms", "p99 ms", "max ms", "errors",
                  "groups", "commands", "failed _onTick (all so far)"], rows)


if __name__ == "__main__":
    main()
