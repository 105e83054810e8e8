"""What writing a dump does to the writes around it, on a loaded 3-replica cluster.

A replica writes its dump (its store process pickles the whole store: a forked child
until run AB, a thread since) when its log is long enough. At 1,000 hollow nodes most failed lease renewals
came in the seconds around dumps (docs/benchmarks.md, run T). This isolates that:

1. a local 3-replica cluster with a low `log_compaction_entries`, so that dumps come
   every ~10-30 s;
2. `--objects` ConfigMaps of `--fields` small fields, so that a dump has something to
   pickle (its cost goes with the number of Python objects, as with pods);
3. `--rate` merge PATCHes a second (paced, spread over the replicas, each with its own
   keep-alive connection), for `--seconds`: small writes like lease renewals;
4. the dump files watched (temporary file seen -> renamed).

Printed: the dumps (count, duration, seconds with two or more at once), the
PATCHes' latency and failures while a dump was being written (or in the 2 s after)
against the rest of the run, each replica's peak memory (PSS of its processes alive at
one sample, every 0.25 s: a dump child's copied pages count) and each store process's
longest Raft tick gap. Compare builds by running this from each build's tree.
"""
import argparse
import json
import os
import queue
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from common import BenchCluster, ms, percentile, progress, say, table  # noqa: E402
from fleet_checks import metric_like, metrics_text  # noqa: E402
from replica_resources import DumpWatch, ResourceWatch  # noqa: E402

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MERGE = {"Content-Type": "application/merge-patch+json"}
JSON = {"Content-Type": "application/json"}


def preload(urls, count, fields, size, workers=8):
    names = queue.Queue()
    for i in range(count):
        names.put("cm-%d" % i)
    # Many small fields, as a pod has: a dump's cost goes with the number of Python objects.
    data = {"k%d" % i: "v" * size for i in range(fields)}
    failed = []

    def work(url):
        conn = common.KeepAlive(url, 30)
        while True:
            try:
                name = names.get_nowait()
            except queue.Empty:
                return
            body = json.dumps({"metadata": {"name": name}, "data": data}).encode()
            for _ in range(5):
                try:
                    status, _ = conn.post(CONFIGMAPS, body, JSON)
                except OSError:
                    continue
                if status in (201, 409):
                    break
            else:
                failed.append(name)
    threads = [threading.Thread(target=work, args=(urls[i % len(urls)],)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failed


def load(urls, objects, rate, seconds, workers=12):
    """[(wall time sent, seconds, ok)] of paced merge PATCHes."""
    results = []
    lock = threading.Lock()
    start = time.monotonic() + 0.5
    end = start + seconds
    per_worker = rate / workers

    def work(index):
        conn = common.KeepAlive(urls[index % len(urls)], 10)
        n = 0
        while True:
            due = start + n / per_worker + index / rate
            if due >= end:
                return
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            name = "cm-%d" % ((index + n * workers) % objects)
            body = json.dumps({"metadata": {"annotations": {"renewed": "%d-%d" % (index, n)}}}).encode()
            sent, began = time.time(), time.monotonic()
            try:
                status, _ = conn.request("PATCH", "%s/%s" % (CONFIGMAPS, name), body, MERGE)
                ok = status == 200
            except OSError:
                ok = False
            with lock:
                results.append((sent, time.monotonic() - began, ok))
            n += 1
    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def inside(windows, t):
    return any(b <= t <= e for b, e in windows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=8000)
    ap.add_argument("--fields", type=int, default=40, help="data fields per ConfigMap")
    ap.add_argument("--size", type=int, default=20, help="bytes of each field's value")
    ap.add_argument("--rate", type=float, default=150.0, help="PATCHes per second, all replicas together")
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--compaction-entries", type=int, default=2000)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    common.exit_on_sigterm()
    say("bench_dump_impact %s: %d ConfigMaps of %d fields of %d bytes, %.0f PATCHes/s for %.0f s, "
        "log_compaction_entries %d" % (args.label, args.objects, args.fields, args.size, args.rate, args.seconds,
                                       args.compaction_entries))
    common.print_machine()
    with BenchCluster(server_options={"log_compaction_entries": args.compaction_entries}) as bench:
        urls = bench.urls()
        t0 = time.monotonic()
        failed = preload(urls, args.objects, args.fields, args.size)
        progress("preloaded %d ConfigMaps in %.0f s (%d failed)" % (args.objects, time.monotonic() - t0,
                                                                    len(failed)))
        dumps = DumpWatch({i: os.path.join(bench.cluster.dir, i, "data") for i in bench.ids()}).start()
        memory = ResourceWatch(bench.pids(), interval=0.25).start()
        cpu = common.CpuMeter(bench.pids())
        cpu.start()
        results = load(urls, args.objects, args.rate, args.seconds)
        used = cpu.stop()
        time.sleep(1.0)
        dumps.stop()
        memory.stop()
        gaps = {ident: metric_like(metrics_text(bench.cluster.replica(ident)["api"]),
                                   "shepherd_raft_tick_gap_max_seconds") for ident in bench.ids()}
    windows = [(b, e + 2.0) for _, b, e in dumps.intervals]
    during = [r for r in results if inside(windows, r[0])]
    rest = [r for r in results if not inside(windows, r[0])]
    times = [t for _, t, _ in dumps.dumps if t is not None]
    say()
    say("dumps: %d (%s); duration median %s s, max %s s; two or more at once: %.1f s"
        % (len(dumps.dumps), ", ".join(sorted({r for r, _, _ in dumps.dumps})) or "-",
           "%.2f" % percentile(times, 50) if times else "-", "%.2f" % max(times) if times else "-",
           dumps.seconds_at_once()))
    rows = []
    for label, part in (("while a dump was written (+2 s)", during), ("the rest", rest), ("all", results)):
        lat = [d for _, d, ok in part if ok]
        rows.append((label, len(part), sum(1 for r in part if not r[2]), ms(percentile(lat, 50)),
                     ms(percentile(lat, 99)), ms(max(lat) if lat else None)))
    table(["PATCHes sent", "n", "failed", "p50 ms", "p99 ms", "max ms"], rows)
    say("peak memory per replica (PSS of its processes at one sample): %s" % ", ".join(
        "%s %.0f MB" % (r, pss) for r, (_, pss) in sorted(memory.replica_peak_mb().items())))
    say("longest Raft tick gap: %s" % ", ".join(
        "%s %s" % (r, "%.3f s" % max(g.values()) if g else "n/a") for r, g in sorted(gaps.items())))
    say("server CPU: %s cores (the machine: %.2f of %d busy)" % (
        ", ".join("%s %.2f" % kv for kv in sorted(used["per_process"].items())), used["machine_cores_busy"],
        used["cores"]))


if __name__ == "__main__":
    main()
