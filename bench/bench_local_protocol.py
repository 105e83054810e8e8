#!/usr/bin/env python3
"""What the store-process split costs per call: the local socket between a
replica's API worker and its store process, without Raft (an in-memory FSM behind
the real StoreService), so the figures are the protocol's own.

For 1 and T threads it prints calls/s and p50/p99 in ms of:
- status: a small call and answer (pickle + socket + the service's pool);
- barrier: a read-barrier call (the revision), then the mirror wait;
- create: a 1 KiB pod create through RemoteReplica.write, answered once the
  worker's mirror holds it (read-your-writes: the change stream is on the path);
and the time to send a snapshot of N pods to a new subscriber.

  python bench/bench_local_protocol.py --calls 2000 --threads 32 --snapshot-pods 30000
"""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from shepherd_ha.controllers.store_access import MemoryStore  # noqa: E402
from shepherd_ha.store import commands  # noqa: E402
from shepherd_ha.store.remote_replica import RemoteReplica  # noqa: E402
from shepherd_ha.store.store_service import StoreService  # noqa: E402
from shepherd_ha.store.watch_log import WatchLog  # noqa: E402


class MemoryReplica:
    """Replica's surface over an in-memory FSM: commands apply at once."""

    def __init__(self):
        self.store = MemoryStore()
        self.watch_log = self.store.watch_log = WatchLog()
        self.watch_log.reset(self.store.fsm.revision)     # as a store process starts: log from its state on
        self.node, self.committer, self.barrier = self, self, self
        self.lock, self.barriers_sent = self.store._lock, 0

    fsm = property(lambda self: self.store.fsm)

    def term(self):
        return 1

    def call(self, command, timeout):
        return self.store.apply(command)

    def call_many(self, commands_, timeout):
        return [self.store.apply(c) for c in commands_]

    def wait(self):
        pass

    def revision(self):
        return self.store.fsm.revision

    def status(self):
        return {"revision": self.revision()}

    def ready(self):
        return True, "ok"

    def tick_gaps(self):
        return {}


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": name, "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"app": "bench"}, "annotations": {"pad": "x" * 700}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}


def run(threads, calls, fn):
    latencies, lock = [], threading.Lock()
    per = calls // threads

    def worker(t):
        mine = []
        for i in range(per):
            start = time.perf_counter()
            fn(t, i)
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)
    started = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    wall = time.perf_counter() - started
    latencies.sort()
    return len(latencies) / wall, latencies[len(latencies) // 2] * 1e3, latencies[int(len(latencies) * 0.99)] * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--snapshot-pods", type=int, default=30000)
    args = parser.parse_args()
    fake = MemoryReplica()
    service = StoreService(fake, os.path.join(tempfile.mkdtemp(), "run", "store.sock"))
    service.start()
    remote = RemoteReplica("bench", service.path, [], write_timeout=5.0).start()
    while not remote.connected:
        time.sleep(0.01)
    counter = iter(range(10 ** 9))
    ops = {
        "status": lambda t, i: remote.client.call("status", 5),
        "barrier": lambda t, i: remote.sync(True),
        "create": lambda t, i: remote.write([commands.create("pods", pod("p%d" % next(counter)))]),
    }
    print("%-8s %8s %10s %9s %9s" % ("call", "threads", "calls/s", "p50 ms", "p99 ms"))
    for name, fn in ops.items():
        for threads in (1, args.threads):
            rate, p50, p99 = run(threads, args.calls, fn)
            print("%-8s %8d %10.0f %9.2f %9.2f" % (name, threads, rate, p50, p99))
    have = fake.store.fsm.count()
    batch = []
    for i in range(args.snapshot_pods - have):
        batch.append(commands.write([commands.create("pods", pod("s%d" % i))], None, None))
        if len(batch) == 500:
            fake.call_many(batch, 5)
            batch = []
    fake.call_many(batch, 5)
    late = RemoteReplica("late", service.path, [], write_timeout=5.0)
    late.mirror.revision = -1                 # behind everything: it gets a snapshot
    started = time.perf_counter()
    late.start()
    while late.mirror.revision < fake.revision():
        time.sleep(0.005)
    print("snapshot of %d objects to a new subscriber: %.2f s" % (fake.store.fsm.count(),
                                                                 time.perf_counter() - started))


if __name__ == "__main__":
    main()
