"""What kubelets' watches cost an API worker: W watches of pods on one node each
(fieldSelector=spec.nodeName=node-i, as every node agent runs) on one replica, while
the status of pods on those nodes is written at a fixed rate (P pods per node, created
once: the store's size is the same in every phase). Prints the replica's CPU per write
with and without the watchers, and checks that every watcher got its own pods' events.
Prints figures, asserts nothing.

    python3 bench/bench_node_watches.py [--watchers 300] [--pods-per-node 10] [--writes 3000]
                                        [--rate 100] [--rounds 2] [--watch configmaps]

--watch configmaps: the same number of watches of all ConfigMaps instead (a tool's or a
controller's watch of another resource, which the pod writes do not concern).

A 1-replica cluster (the store process and one API worker), so the figure is the
worker's and the store's, not Raft's. The watchers are raw sockets in one asyncio
loop of this process, the writer a keep-alive connection.
"""
import argparse
import asyncio
import json
import threading
import time

from common import (BenchCluster, CpuMeter, KeepAlive, exit_on_sigterm, in_threads, print_machine, progress, say,
                    split_url, table)
from replica_resources import pss_bytes, replica_processes

POD_PATH = "/api/v1/namespaces/default/pods"
AGENT = "shepherd-agent/bench"       # an agent's watch: the system pool of long-running slots


WATCH_PATH = {"pods": POD_PATH + "?watch=1&allowWatchBookmarks=true&fieldSelector=spec.nodeName%%3D%s"
                      "&timeoutSeconds=600",
              "configmaps": "/api/v1/configmaps?watch=1&allowWatchBookmarks=true&timeoutSeconds=600"}
WATCHED = "pods"      # what the watchers watch (--watch)


async def open_watch(host, port, node, deadline):
    """(reader, writer) of a watch the server accepted; a 429 is retried after a pause, as an
    agent does (a thousand watches opening at once queue for the system level's seats)."""
    while True:
        reader, writer = await asyncio.open_connection(host, port)
        # Bookmarks keep a quiet watch alive: the server closes a connection silent for its
        # --idle-connection-timeout (60 s), as an agent's watch would then be resumed.
        writer.write(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: %s\r\n\r\n"
                      % (WATCH_PATH[WATCHED] % node if WATCHED == "pods" else WATCH_PATH[WATCHED],
                         host, port, AGENT)).encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if head.startswith(b"HTTP/1.1 200"):
            return reader, writer
        writer.close()
        if not head.startswith(b"HTTP/1.1 429") or time.monotonic() > deadline:
            raise RuntimeError("watch of %s refused: %s" % (node, head.split(b"\r\n")[0].decode()))
        await asyncio.sleep(0.5)


async def watcher(host, port, node, counts, opened, errors, stop, gate):
    try:
        async with gate:
            reader, writer = await open_watch(host, port, node, time.monotonic() + 60)
    except Exception as exc:       # noqa: BLE001 - reported to the phase at once
        errors.append(exc)
        return
    opened.append(node)
    token, tail = b'"type":"MODIFIED"', b""
    try:
        while not stop.is_set():
            try:
                data = await asyncio.wait_for(reader.read(65536), 0.5)
            except asyncio.TimeoutError:
                continue
            if not data:
                return
            # A token split between two reads is counted once: the tail kept is one byte
            # shorter than the token, so no whole token is in it.
            seen = tail + data
            counts[node] = counts.get(node, 0) + seen.count(token)
            tail = seen[-(len(token) - 1):]
    finally:
        writer.close()


def run_watchers(url, nodes, counts, opened, stop, errors):
    host, port = split_url(url)

    async def main():
        gate = asyncio.Semaphore(8)       # watches being opened at once
        await asyncio.gather(*(watcher(host, port, n, counts, opened, errors, stop, gate) for n in nodes))
    asyncio.run(main())


def post(conn, path, obj):
    status, body = conn.post(path, json.dumps(obj).encode(), {"Content-Type": "application/json"})
    if status not in (201, 409):
        raise SystemExit("POST %s: HTTP %d %s" % (path, status, body[:200]))


def setup(url, nodes, pods_per_node):
    """Nodes (registered, so the pod GC leaves their pods alone) and their pods, once: the
    phases write only status, so the store's size is the same in every phase."""
    conn = KeepAlive(url, 10)
    for node in nodes:
        post(conn, "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
                                     "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    names = ["pod-%d" % i for i in range(len(nodes) * pods_per_node)]

    def create(k, step=8):
        own = KeepAlive(url, 10)
        for i in range(k, len(names), step):
            post(own, POD_PATH, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": names[i], "labels": {"app": "w"}},
                                 "spec": {"nodeName": nodes[i % len(nodes)],
                                          "containers": [{"name": "c", "image": "registry.example/c:1"}]}})
        own.close()
    in_threads(8, create)
    conn.close()
    return names


def write_status(url, pods, count, rate, tag, writers=8):
    """`count` status writes (merge PATCH), round-robin over the pods, at `rate` a second in
    all, from `writers` keep-alive connections (one alone waits for each write's commit)."""
    failed = []

    def writer(k):
        conn = KeepAlive(url, 10)
        start, bad = time.monotonic(), 0
        for n, i in enumerate(range(k, count, writers)):
            body = json.dumps({"status": {"phase": "Running", "message": "%s-%d" % (tag, i)}}).encode()
            status, _ = conn.request("PATCH", "%s/%s/status" % (POD_PATH, pods[i % len(pods)]), body,
                                     {"Content-Type": "application/merge-patch+json"})
            bad += status != 200
            behind = start + (n + 1) * writers / rate - time.monotonic()
            if behind > 0:
                time.sleep(behind)
        conn.close()
        failed.append(bad)
    in_threads(writers, writer)
    return sum(failed)


def replica_memory(cluster):
    """(PSS in bytes, OS threads) of the replica's processes together."""
    procs = [p for pid in cluster.pids().values() for p in replica_processes(pid)]
    return sum(pss_bytes(p.pid, 0) for p in procs), sum(p.num_threads() for p in procs)


def phase(cluster, label, nodes, pods, watch, writes, rate, tag):
    url = cluster.urls()[0]
    watched = nodes if watch else []
    counts, opened, errors, stop = {}, [], [], threading.Event()
    thread = threading.Thread(target=run_watchers, args=(url, watched, counts, opened, stop, errors), daemon=True)
    if watched:
        thread.start()
        deadline = time.monotonic() + 90
        while len(opened) + len(errors) < len(watched) and time.monotonic() < deadline:
            time.sleep(0.2)
        if errors or len(opened) < len(watched):
            raise SystemExit("%d of %d watches opened: %s" % (len(opened), len(watched), errors[:1]))
        progress("%d watches open" % len(opened))
        time.sleep(5)        # the opening's own requests are over
        counts.clear()       # from here: the phase's events only
    meter = CpuMeter(cluster.pids()).start()
    t0 = time.monotonic()
    failed = write_status(url, pods, writes, rate, tag)
    achieved = writes / (time.monotonic() - t0)
    time.sleep(1.0)          # the last events go out
    cpu = meter.stop()
    pss, threads = replica_memory(cluster)     # the watches still open
    stop.set()
    if watched:
        thread.join(5)
        time.sleep(3)        # the server frees the watches' threads (within a second of the close)
    seconds = sum(cpu["per_process"].values()) * cpu["wall"]
    expected = {}
    for i in range(writes):
        node = nodes[(i % len(pods)) % len(nodes)]
        expected[node] = expected.get(node, 0) + 1
    if WATCHED == "pods":
        wrong = sum(1 for n in watched if counts.get(n, 0) < expected.get(n, 0))
    else:                      # the writes concern none of them: any MODIFIED event is wrong
        wrong = sum(1 for n in watched if counts.get(n, 0))
    return (label, len(watched), writes, "%.0f/s" % achieved, failed, "%.2f" % (seconds / writes * 1e3),
            "%.2f" % cpu["machine_cores_busy"], "%.1f" % (pss / 2 ** 20), threads,
            "%d of %d" % (len(watched) - wrong, len(watched)) if watched else "-"), seconds / writes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--watchers", type=int, default=300)
    ap.add_argument("--pods-per-node", type=int, default=10)
    ap.add_argument("--writes", type=int, default=3000)
    ap.add_argument("--rate", type=float, default=100.0, help="pod status writes per second")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--watch", choices=sorted(WATCH_PATH), default="pods",
                    help="pods: each watcher its node's pods; configmaps: every watcher all ConfigMaps")
    args = ap.parse_args()
    global WATCHED
    WATCHED = args.watch
    exit_on_sigterm()
    print_machine()
    # Every watch comes from this one address: lift the per-address connection bound (128).
    # The nodes renew no lease: they stay Ready for the run (no NotReady marks, no evictions).
    options = {"max_watches": str(max(256, 2 * args.watchers)), "node_grace_period": "3600",
               "max_connections_per_address": str(args.watchers + 64),
               "max_connections": str(max(1000, args.watchers + 200))}
    rows, per_write = [], {"without": [], "with": []}
    nodes = ["node-%d" % i for i in range(args.watchers)]
    with BenchCluster(replicas=1, server_options=options) as cluster:
        pods = setup(cluster.urls()[0], nodes, args.pods_per_node)
        progress("%d nodes and %d pods stored" % (len(nodes), len(pods)))
        for r in range(args.rounds):
            for label, watch in (("no watches", False), ("%s watches" % ("node" if WATCHED == "pods" else WATCHED),
                                                           True)):
                row, cost = phase(cluster, label, nodes, pods, watch, args.writes, args.rate,
                                  "r%d-%s" % (r, "watched" if watch else "alone"))
                rows.append(row)
                per_write["with" if watch else "without"].append(cost)
                progress("round %d, %s: %s ms of replica CPU per write" % (r + 1, label, row[5]))
    say()
    table(["phase", "watches", "writes", "rate", "failed", "replica CPU per write (ms)", "machine busy (cores)",
           "replica PSS (MB)", "replica threads", "watchers right (pods: all their pods' writes; configmaps: none)"], rows)
    extra = min(per_write["with"]) - min(per_write["without"])
    say()
    say("what %d %s watches add per write: %.2f ms of replica CPU (%.1f us per watch)"
        % (args.watchers, "node" if WATCHED == "pods" else WATCHED, extra * 1e3, extra * 1e6 / args.watchers))


if __name__ == "__main__":
    main()
