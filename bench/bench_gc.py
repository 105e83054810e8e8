#!/usr/bin/env python3
"""Garbage-collection pauses of a replica's store at N pods, in-process (no cluster).

For each N (a fresh interpreter each), a StoreFSM is filled the way a replica fills
it: N pod creates in group-commit-sized commands, each command pickled and unpickled
as it would be through the Raft log, then a status update per pod (bound, Running,
with conditions). With the server's thresholds (gc_tuning.THRESHOLDS)
it prints, in milliseconds:

- build: the longest collection pause while the store grows, full collections seen;
- full collection of the store as it is (what a gen-2 collection cost before any
  freeze: the 117-232 ms of docs/benchmarks.md);
- snapshot load (PySyncObj's dump on start, a leader's snapshot on a follower):
  load time and longest pause with the collector on, as PySyncObj does it, then with
  gc_tuning.bulk_load (collector off, then frozen), and a full collection after each;
- steady state after the freeze: longest pause over U more status updates, a full
  collection then, and what gc_tuning.freeze_survivors costs;
- the store's own RSS and CPU per create and per status update;
- objects the collector tracks per pod, and what a full list of N pods costs read
  from the store against decoding each from pickled bytes.

  python bench/bench_gc.py --pods 10000,20000,30000
"""
import argparse
import gc
import itertools
import json
import os
import pickle
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import say  # noqa: E402

from shepherd_ha.model.defaults import apply_defaults  # noqa: E402
from shepherd_ha.store import gc_tuning  # noqa: E402
from shepherd_ha.store.fsm import StoreFSM  # noqa: E402
from shepherd_ha.store.stamping import stamp_new  # noqa: E402

_KEYS = itertools.count()
BATCH = 100          # creates per Raft entry, about what group commit puts together at 32 clients


class Pauses:
    """Every collection's duration, through gc.callbacks."""

    def __init__(self):
        self.durations = []          # (generation, seconds)
        self._start = None

    def __call__(self, phase, info):
        if phase == "start":
            self._start = time.perf_counter()
        elif self._start is not None:
            self.durations.append((info["generation"], time.perf_counter() - self._start))

    def __enter__(self):
        self.durations = []
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self)

    def longest_ms(self):
        return max((d for _, d in self.durations), default=0.0) * 1e3

    def full(self):
        return sum(1 for g, _ in self.durations if g == 2)

    def longest_by_generation_ms(self):
        return [max((d for g, d in self.durations if g == gen), default=0.0) * 1e3 for gen in range(3)]

    def total_ms(self):
        return sum(d for _, d in self.durations) * 1e3


def through_log(command):
    return pickle.loads(pickle.dumps(command, protocol=pickle.HIGHEST_PROTOCOL))


def namespace_op(name):
    return {"op": "create", "resource": "namespaces",
            "object": stamp_new({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                                 "spec": {}, "status": {"phase": "Active"}})}


def running_status(i, restarts=0):
    ts = "2026-12-01T12:00:00Z"
    return {"phase": "Running", "hostIP": "10.0.%d.%d" % (i // 250 % 250, i % 250 + 1),
            "podIP": "10.244.%d.%d" % (i // 250 % 250, i % 250 + 1), "startTime": ts,
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": ts}
                           for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
            "containerStatuses": [{"name": "app", "ready": True, "restartCount": restarts,
                                   "image": "registry.example/bench/app:1.0",
                                   "state": {"running": {"startedAt": ts}}}]}


def build(pods, costs=None):
    """The store at `pods` pods; `costs` (a dict) gets the CPU per create and per status
    update in microseconds (the FSM's apply, unpickling the command included) and what
    the store added to the process's RSS (MB, after a full collection)."""
    gc.collect()
    rss_before = _rss_mb()
    fsm = StoreFSM()
    fsm.apply(through_log({"type": "write", "key": "ns", "epoch": None, "ops": [namespace_op("default")]}))
    with Pauses() as pauses:
        t = time.process_time()
        create(fsm, 0, pods)
        t_created = time.process_time()
        update(fsm, range(pods))
        t_updated = time.process_time()
    if costs is not None:
        gc.collect()
        costs.update(create_us=(t_created - t) * 1e6 / pods, update_us=(t_updated - t_created) * 1e6 / pods,
                     store_mb=_rss_mb() - rss_before)
    return fsm, pauses


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def create(fsm, first, end):
    template = json.loads(common.pod_template(1024, name_len=20))
    for start in range(first, end, BATCH):
        ops = []
        for i in range(start, min(end, start + BATCH)):
            pod = json.loads(json.dumps(template))
            pod["metadata"]["name"], pod["metadata"]["namespace"] = "pod-%015d" % i, "default"
            pod["spec"]["nodeName"] = "node-%04d" % (i % 1000)
            ops.append({"op": "create", "resource": "pods", "object": stamp_new(apply_defaults("pods", pod))})
        result = fsm.apply(through_log({"type": "write", "key": "c%d-%d" % (start, next(_KEYS)), "epoch": None,
                                        "ops": ops}))
        assert result["ok"], result


def update(fsm, indexes, restarts=0):
    """A status update per pod (a new status each time: `restarts` differs)."""
    indexes = list(indexes)
    for start in range(0, len(indexes), BATCH):
        ops = [{"op": "update", "resource": "pods", "namespace": "default", "name": "pod-%015d" % i,
                "subresource": "status", "object": {"status": running_status(i, restarts)}}
               for i in indexes[start:start + BATCH]]
        result = fsm.apply(through_log({"type": "write", "key": "u%d-%d" % (start, next(_KEYS)),
                                        "epoch": None, "ops": ops}))
        assert result["ok"] and not result["results"][0].get("unchanged"), result


def full_collection_ms(repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def load(blob, bulk):
    with Pauses() as pauses:
        t = time.perf_counter()
        if bulk:
            with gc_tuning.bulk_load():
                fsm = pickle.loads(blob)
        else:
            fsm = pickle.loads(blob)
        seconds = time.perf_counter() - t
    return fsm, seconds, pauses


def one(pods, updates, thresholds, growth):
    # The measured store first, in a fresh interpreter: its RSS growth is its own (a store
    # built and freed before would leave memory this one reuses).
    costs = {}
    fsm, pauses = build(pods, costs)
    tracked = len(gc.get_objects())
    builds = []
    for setting in thresholds:
        gc.set_threshold(*setting)
        other, other_pauses = build(pods)
        builds.append([list(setting)] + other_pauses.longest_by_generation_ms() + [other_pauses.total_ms()])
        del other
        gc.collect()
    gc.set_threshold(*gc_tuning.THRESHOLDS)
    row = {"pods": pods, "tracked": tracked, "builds": builds, **costs,
           "build_longest": pauses.longest_ms(), "build_full": pauses.full(),
           "full_before": full_collection_ms()}
    blob = pickle.dumps(fsm, protocol=pickle.HIGHEST_PROTOCOL)
    del fsm
    gc.collect()
    row["dump_mb"] = len(blob) / 1e6
    for bulk, key in ((False, "on"), (True, "bulk")):
        fsm, seconds, pauses = load(blob, bulk)
        row["load_%s_s" % key], row["load_%s_longest" % key] = seconds, pauses.longest_ms()
        row["load_%s_full" % key] = pauses.full()
        row["full_after_load_%s" % key] = full_collection_ms()
        if not bulk:
            del fsm
            gc.collect()
    row["frozen"] = gc.get_freeze_count()
    with Pauses() as pauses:
        update(fsm, range(0, min(updates, pods)), restarts=1)
    row["steady_longest"], row["steady_full"] = pauses.longest_ms(), pauses.full()
    row["full_steady"] = full_collection_ms()
    t = time.perf_counter()
    gc_tuning.freeze_survivors()
    row["freeze_survivors"] = (time.perf_counter() - t) * 1e3
    row["full_refrozen"] = full_collection_ms()
    # Growth between two periodic freezes: `growth` new pods (created, then Running) on
    # top of the frozen store, under each threshold setting.
    row["growth"] = []
    for setting in thresholds:
        gc.set_threshold(*setting)
        with Pauses() as pauses:
            create(fsm, pods, pods + growth)
            update(fsm, range(pods, pods + growth))
        full = full_collection_ms(1)
        row["growth"].append([list(setting)] + pauses.longest_by_generation_ms() + [pauses.full(), full])
        for i in range(pods, pods + growth):
            del fsm.objects["pods"][("default", "pod-%015d" % i)]
        gc.collect()
    gc.set_threshold(*gc_tuning.THRESHOLDS)
    # Storage form: what the collector tracks per pod, and a full list as dicts vs from bytes.
    bucket = fsm.objects["pods"]
    sample = next(iter(bucket.values()))
    gc.unfreeze()
    before = len(gc.get_objects())
    copy = pickle.loads(pickle.dumps(sample))
    row["tracked_per_pod"] = len(gc.get_objects()) - before
    del copy
    as_bytes = {k: pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL) for k, v in bucket.items()}
    t = time.perf_counter()
    listed = list(bucket.values())
    row["list_dicts"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    listed = [pickle.loads(b) for b in as_bytes.values()]
    row["list_bytes"] = (time.perf_counter() - t) * 1e3
    del listed
    print(json.dumps(row), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", default="10000,20000,30000", help="comma-separated store sizes")
    parser.add_argument("--updates", type=int, default=5000, help="status updates after the freeze")
    parser.add_argument("--thresholds", default="700,10,10;20000,10,10;20000,2,10",
                        help="gc.set_threshold settings to build the store under, ';'-separated")
    parser.add_argument("--growth", type=int, default=15000,
                        help="pods added on top of the frozen store (30 s of creates at 500/s)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    thresholds = [tuple(int(x) for x in t.split(",")) for t in args.thresholds.split(";")]
    if args.one:
        return one(args.one, args.updates, thresholds, args.growth)
    common.print_machine()
    common.print_background_load()
    rows = []
    for pods in [int(p) for p in args.pods.split(",")]:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", str(pods),
                              "--updates", str(args.updates), "--thresholds", args.thresholds,
                              "--growth", str(args.growth)], capture_output=True, text=True, check=True,
                             cwd=common.ROOT)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        common.progress("%d pods done" % pods)
    say("Store built: tracked objects, longest collection pause while building (ms), full collections seen,")
    say("the store's RSS (MB, growth of the process) and CPU per apply (us: create, status update to Running)")
    common.table(["pods", "tracked objects", "per pod", "build: longest", "full GCs", "dump MB", "store MB",
                  "KB/pod", "create us", "update us"],
                 [[r["pods"], r["tracked"], r["tracked_per_pod"], "%.0f" % r["build_longest"], r["build_full"],
                   "%.1f" % r["dump_mb"], "%.1f" % r["store_mb"], "%.2f" % (r["store_mb"] * 1e3 / r["pods"]),
                   "%.1f" % r["create_us"], "%.1f" % r["update_us"]] for r in rows])
    say()
    say("Building the store under other thresholds: longest pause per generation, all GC time (ms)")
    common.table(["pods", "thresholds", "gen 0", "gen 1", "gen 2", "total"],
                 [[r["pods"], "/".join(str(x) for x in b[0])] + ["%.0f" % v for v in b[1:]]
                  for r in rows for b in r["builds"]])
    say()
    say("Full collection (ms, median of 3): before any freeze / after a load as PySyncObj does it /")
    say("after gc_tuning.bulk_load / after %d more status updates / after freeze_survivors" % args.updates)
    common.table(["pods", "before", "load, GC on", "bulk_load", "steady", "refrozen"],
                 [[r["pods"], "%.1f" % r["full_before"], "%.1f" % r["full_after_load_on"],
                   "%.1f" % r["full_after_load_bulk"], "%.1f" % r["full_steady"], "%.1f" % r["full_refrozen"]]
                  for r in rows])
    say()
    say("Snapshot load (s) and the longest collection pause during it (ms), full collections")
    common.table(["pods", "GC on: s", "longest", "full", "bulk_load: s", "longest", "full"],
                 [[r["pods"], "%.2f" % r["load_on_s"], "%.0f" % r["load_on_longest"], r["load_on_full"],
                   "%.2f" % r["load_bulk_s"], "%.0f" % r["load_bulk_longest"], r["load_bulk_full"]] for r in rows])
    say()
    say("After the freeze: %d status updates (longest pause ms, full GCs), freeze_survivors (ms)" % args.updates)
    common.table(["pods", "longest", "full GCs", "freeze_survivors"],
                 [[r["pods"], "%.1f" % r["steady_longest"], r["steady_full"], "%.1f" % r["freeze_survivors"]]
                  for r in rows])
    say()
    say("%d pods more on top of the frozen store, no freeze in between: longest pause per generation (ms),"
        % args.growth)
    say("full collections seen, then one full collection (ms)")
    common.table(["pods", "thresholds", "gen 0", "gen 1", "gen 2", "full GCs", "full then"],
                 [[r["pods"], "/".join(str(x) for x in g[0])] + ["%.0f" % v for v in g[1:4]] + [g[4], "%.0f" % g[5]]
                  for r in rows for g in r["growth"]])
    say()
    say("A full list of every pod (ms): read from the store as it keeps them (since 2026-12: JSON bytes,")
    say("compressed since run X; decoded) vs decoding each from pickled bytes")
    common.table(["pods", "from the store", "from pickles", "ratio"],
                 [[r["pods"], "%.1f" % r["list_dicts"], "%.0f" % r["list_bytes"],
                   "%.0fx" % (r["list_bytes"] / max(r["list_dicts"], 1e-3))] for r in rows])


if __name__ == "__main__":
    main()
