#!/usr/bin/env python3
"""What a PodMetrics list (`kubectl top pods`) costs the replica that serves it.

A child process runs NODES real agent log servers (agent/log_server.py, hollow runtime,
plain HTTP, each with PODS pods sampled twice, verifying metrics grants); this process
holds the real API's PodMetrics code (api/pod_metrics.py over an in-memory store with
those nodes and pods) and asks: all namespaces, one namespace (a tenth of the pods),
one pod. It prints, per question, the wall time (median of --rounds), how many
PodMetrics came back and how many nodes were left out (past the 5 s deadline or
failing). No Raft write is involved: that is the design's point.

    python bench/bench_pod_metrics.py --nodes 200 --pods 30
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import flask

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "unit"))

from shepherd_ha.api import pod_metrics  # noqa: E402
from shepherd_ha.api.replica_credentials import ReplicaCredentials  # noqa: E402

PASSWORD = "bench-pod-metrics-password-0042"
NAMESPACES = 10


def node_name(i):
    return "bench-n%04d" % i


def pod_of(node, j):
    return {"metadata": {"name": "%s-p%03d" % (node, j), "namespace": "bench-%d" % (j % NAMESPACES),
                         "uid": "%s-u%03d" % (node, j), "labels": {"app": "a%d" % (j % 3)}},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "i"}]},
            "status": {"phase": "Running"}}


def serve_agents(nodes, pods):
    """The child: NODES log servers; prints their ports; serves until stdin closes."""
    from agent.labels import container_labels
    from agent.log_access import LogAccess
    from agent.log_server import LogServer
    from agent.pod_usage import PodUsage
    from agent.runtime.base import ContainerConfig
    from agent.runtime.hollow_runtime import HollowRuntime
    key = ReplicaCredentials(PASSWORD, "00" * 16).log_grant_key
    servers, ports = [], []
    for i in range(nodes):
        name = node_name(i)
        runtime = HollowRuntime(name)
        for j in range(pods):
            p = pod_of(name, j)
            p["metadata"]["uid"] = ""        # the store stamps its own uid: the agent then reports none
            cid = runtime.create(ContainerConfig(name="%s-%d" % (name, j), image="i",
                                                 labels=container_labels(name, p, "app", 0)))
            runtime.start(cid)
        usage = PodUsage(runtime, name)
        usage.sample()
        time.sleep(0.01)
        usage.sample()
        server = LogServer(runtime, name, threads=2, access=LogAccess([], name, "t", fetch_key=lambda: [key]),
                           usage=usage).start()
        servers.append(server)
        ports.append(server.port)
    print(json.dumps(ports), flush=True)
    sys.stdin.read()
    for s in servers:
        s.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=30, help="pods per node")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve_agents(args.nodes, args.pods)
    from real_api import memory_replica
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", "--nodes", str(args.nodes),
                              "--pods", str(args.pods)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ports = json.loads(child.stdout.readline())
        replica = memory_replica(tuple("bench-%d" % n for n in range(NAMESPACES)))
        for i, port in enumerate(ports):
            name = node_name(i)
            replica.store.put("nodes", {"metadata": {"name": name}, "status": {
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}})
            for j in range(args.pods):
                replica.store.put("pods", pod_of(name, j))
        grants = ReplicaCredentials(PASSWORD, "00" * 16)
        context = flask.Flask("bench").test_request_context
        print("%d nodes x %d pods (%d pods), %d rounds each" % (args.nodes, args.pods, args.nodes * args.pods,
                                                               args.rounds))
        for label, namespace, name in (("all namespaces", None, None), ("one namespace", "bench-3", None),
                                       ("one pod", "bench-3", node_name(0) + "-p003")):
            times, got, left = [], 0, 0
            for _ in range(args.rounds):
                started = time.perf_counter()
                with context():          # collect() reads labelSelector from the request
                    items, failures, _, _ = pod_metrics.collect(replica, namespace, name, grants)
                times.append(time.perf_counter() - started)
                got, left = len(items), len(failures)
            print("  %-15s %7.3f s median (min %.3f, max %.3f)  %6d PodMetrics  %4d nodes left out" % (
                label, statistics.median(times), min(times), max(times), got, left))
    finally:
        child.stdin.close()
        child.wait(30)


if __name__ == "__main__":
    main()
