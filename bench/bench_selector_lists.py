"""CPU of a selected list in an API worker, with the selector index and by a scan
(store/selector_index.py); and what keeping the index costs per change and in memory.
Prints figures, asserts nothing.

    python3 bench/bench_selector_lists.py [--pods 30000] [--apps 30] [--nodes 1000] [--seconds 2]

The pods are held as an API worker holds them: a Mirror fed the store's encoded objects
(interned), read by the real Flask app through the Flask test client (no HTTP). Each
request is timed with and without the index, alternated, in CPU seconds of this process.
"""
import argparse
import os
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "unit"))

from common import print_machine, say, table  # noqa: E402

from real_api import memory_replica  # noqa: E402
from shepherd_ha.api.app import create_app  # noqa: E402
from shepherd_ha.model.selectors import parse_field_selector, parse_label_selector  # noqa: E402
from shepherd_ha.store.fsm import MODIFIED, Change  # noqa: E402
from shepherd_ha.store.mirror import Mirror  # noqa: E402


class WorkerReads:
    """A replica whose reads come from a Mirror, as an API worker's (RemoteReplica) do;
    everything else from the in-memory replica. `indexed=False` drops the selection, so
    the mirror scans as it did before the index."""

    def __init__(self, replica, mirror, indexed):
        self._replica, self.mirror, self.indexed = replica, mirror, indexed

    def __getattr__(self, name):
        return getattr(self._replica, name)

    def get(self, resource, namespace, name, consistent=True):
        with self.mirror.lock:
            return self.mirror.get(resource, namespace, name), self.mirror.revision

    def list(self, resource, namespace=None, consistent=True, selection=None):
        with self.mirror.lock:
            return self.mirror.list(resource, namespace, selection if self.indexed else None), self.mirror.revision

    def revision(self):
        return self.mirror.revision


def pod(i, apps, nodes):
    app = "app-%d" % (i % apps)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "%s-%06d" % (app, i), "namespace": "default",
                         "labels": {"app": app, "pod-template-hash": "h%d" % (i % apps)},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app + "-h",
                                              "uid": "rs-%d" % (i % apps), "controller": True}]},
            "spec": {"nodeName": "node-%d" % (i % nodes),
                     "containers": [{"name": "app", "image": "registry.example/app:1.0",
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
            "status": {"phase": "Running", "podIP": "10.%d.%d.%d" % (i >> 16 & 255, i >> 8 & 255, i & 255)}}


def mirror_of(fsm):
    mirror = Mirror()
    mirror.apply_frame({"kind": "snapshot-begin", "revision": fsm.revision})
    for resource, bucket in fsm.objects.items():
        mirror.apply_frame({"kind": "snapshot-chunk", "resource": resource, "objects": bucket.raw_values()})
    mirror.apply_frame({"kind": "snapshot-end", "revision": fsm.revision})
    return mirror


def cpu_per_call(fn, seconds):
    fn()
    count, t0 = 0, time.process_time()
    while time.process_time() - t0 < seconds:
        fn()
        count += 1
    return (time.process_time() - t0) / count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=30000)
    ap.add_argument("--apps", type=int, default=30)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=2.0, help="CPU seconds per case and build, each of 2 rounds")
    args = ap.parse_args()
    print_machine()
    replica = memory_replica()
    t0 = time.perf_counter()
    for i in range(args.pods):
        replica.put("pods", pod(i, args.apps, args.nodes))
        if i and i % 10000 == 0:
            say("... %d pods stored" % i)
    mirror = mirror_of(replica.fsm)
    say("%d pods in a worker's mirror (%.1f s)" % (args.pods, time.perf_counter() - t0))
    clients = {build: create_app(WorkerReads(replica, mirror, build == "index")).test_client()
               for build in ("scan", "index")}
    per_app, per_node = args.pods // args.apps, args.pods // args.nodes
    cases = [
        ("label app=X (%d pods), linearizable" % per_app, "/api/v1/namespaces/default/pods?labelSelector=app=app-7"),
        ("label app=X, resourceVersion=0", "/api/v1/namespaces/default/pods?labelSelector=app=app-7&resourceVersion=0"),
        ("label app in (X,Y) (%d pods)" % (2 * per_app), "/api/v1/pods?labelSelector=app+in+(app-3,app-4)"),
        ("field spec.nodeName=N (%d pods, an agent's list)" % per_node, "/api/v1/pods?fieldSelector=spec.nodeName=node-5"),
        ("label app=X, limit 100", "/api/v1/pods?labelSelector=app=app-9&limit=100"),
        ("label app!=X (no index: scans)", "/api/v1/pods?labelSelector=app!=app-1&limit=10"),
    ]
    rows = []
    for label, path in cases:
        answers = {build: client.get(path) for build, client in clients.items()}
        assert all(a.status_code == 200 for a in answers.values()), {b: a.status_code for b, a in answers.items()}
        items = {build: [o["metadata"]["name"] for o in a.get_json()["items"]] for build, a in answers.items()}
        assert items["scan"] == items["index"], label        # the same answer either way
        cpu = {"scan": [], "index": []}
        for _ in range(2):
            for build in ("scan", "index"):
                cpu[build].append(cpu_per_call(lambda c=clients[build]: c.get(path), args.seconds / 2))
        scan, index = min(cpu["scan"]), min(cpu["index"])
        rows.append((label, len(items["index"]), "%.2f" % (scan * 1e3), "%.2f" % (index * 1e3),
                     "%.3fx" % (index / scan)))
    say()
    table(["request", "items", "scan: ms CPU", "index: ms CPU", "index / scan"], rows)

    # Keeping the index: a status write (labels and node unchanged) and a relabel, per change.
    say()
    keys = sorted(mirror.objects["pods"])
    rows = []
    for label, relabel in (("status write", False), ("relabel", True)):
        costs = {False: float("inf"), True: float("inf")}
        for indexed in (False, True, False, True):      # alternated; the lower of two each
            m = mirror_of(replica.fsm)
            if indexed:
                m.list("pods", None, (parse_label_selector("app=app-1"), parse_field_selector(None, "pods")))
            revision = m.revision
            changes = []
            for n, key in enumerate(keys[:5000]):
                old = m.objects["pods"][key]
                new = dict(old, status=dict(old["status"], phase="Succeeded" if n % 2 else "Running"))
                if relabel:
                    new["metadata"] = dict(old["metadata"], labels=dict(old["metadata"]["labels"], app="moved"))
                revision += 1
                changes.append(Change(revision, MODIFIED, "pods", new, None))
            t = time.process_time()
            for start in range(0, len(changes), 200):
                m.apply_changes(changes[start:start + 200])
            costs[indexed] = min(costs[indexed], (time.process_time() - t) / len(changes))
        rows.append((label, "%.1f" % (costs[False] * 1e6), "%.1f" % (costs[True] * 1e6),
                     "%+.1f" % ((costs[True] - costs[False]) * 1e6)))
    table(["change applied to the mirror", "not indexed: us", "indexed: us", "index's share: us"], rows)

    m = mirror_of(replica.fsm)
    t = time.process_time()
    m.list("pods", None, (parse_label_selector("app=app-1"), parse_field_selector(None, "pods")))
    say()
    say("building the index (a resource's first selected read, under the mirror's lock; after a snapshot "
        "the mirror builds it before taking the lock): %.1f ms CPU for %d pods" % ((time.process_time() - t) * 1e3,
                                                                                 args.pods))
    m = mirror_of(replica.fsm)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    m.list("pods", None, (parse_label_selector("app=app-1"), parse_field_selector(None, "pods")))
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    say()
    say("the index of %d pods (labels: 2 each, spec.nodeName) holds %.1f MB (%.0f B per pod)"
        % (args.pods, held / 1e6, held / args.pods))


if __name__ == "__main__":
    main()
