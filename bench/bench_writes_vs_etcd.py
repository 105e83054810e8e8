#!/usr/bin/env python3
"""Write throughput beside etcd (issue 13): 1 KiB pod creates through the API at C
clients, next to a 3-member etcd doing 1 KiB puts through its v3 JSON gateway, on the
same machine in the same run, alternated; then the same with `--api-workers 2`.

Both use bench_writes.py's client loop: C threads in 4 processes, each with one
keep-alive connection per member and requests round-robin over the members (every
create with its own Idempotency-Key, every put with its own key). etcd (Debian's
etcd-server, bench/etcd_cluster.py: default 100 ms heartbeat, 1 s election) is up for
the whole run; a fresh 3-replica Shepherd HA cluster is started for each worker count.
In each of --rounds rounds each system runs once, the order alternating, so a machine
that drifts favours neither. Prints every run, the medians, the ratio of creates/s to
puts/s (target >= 1.0), and how creates/s change from 1 API worker to 2.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from bench_writes import run_api_phase  # noqa: E402
from common import ms, progress, say  # noqa: E402
from etcd_cluster import EtcdCluster, etcd_version  # noqa: E402

TARGET_RATIO = 1.0


def one_run(system, urls, pids, args):
    r = run_api_phase(urls, args.clients, args.processes, args.duration, args.warmup, args.size, args.timeout,
                      pids, etcd=(system == "etcd"))
    progress("%-22s %7.0f writes/s  p50 %s  p99 %s  server CPU %s ms/write  errors %s" % (
        system, r["rate"], ms(r["p50"]), ms(r["p99"]), _f(r["server_ms_per_op"]), r["errors"] or "none"))
    return r


def _f(value):
    return "-" if value is None else "%.2f" % value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--processes", type=int, default=4, help="client processes (default 4)")
    ap.add_argument("--duration", type=float, default=10.0, help="measured seconds per run (default 10)")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3, help="runs of each system per worker count (default 3)")
    ap.add_argument("--workers", default="1,2", help="--api-workers values, comma-separated (default 1,2)")
    ap.add_argument("--size", type=int, default=1024, help="bytes per create body / put value (default 1024)")
    ap.add_argument("--timeout", type=float, default=10.0, help="client socket timeout in s")
    args = ap.parse_args()
    common.exit_on_sigterm()
    workers = [int(w) for w in args.workers.split(",")]
    say("bench_writes_vs_etcd: %d clients, %d B writes, %d rounds of %.0f s per system and worker count (%s)"
        % (args.clients, args.size, args.rounds, args.duration, etcd_version()))
    common.print_machine()
    common.print_background_load()
    runs = []          # (workers, system, round, result)
    with EtcdCluster(3, progress=progress) as etcd:
        etcd_pids = {name: etcd.pid(name) for name in etcd.names()}
        for count in workers:
            with common.BenchCluster(3, server_options={"api_workers": count}) as bc:
                label = "shepherd (%d worker%s)" % (count, "" if count == 1 else "s")
                for n in range(args.rounds):
                    order = [(label, bc.urls(), bc.pids()), ("etcd", etcd.urls(), etcd_pids)]
                    for system, urls, pids in (order if (n + count) % 2 == 0 else order[::-1]):
                        runs.append((count, system, n, one_run(system, urls, pids, args)))
    report(runs, workers, args)


def report(runs, workers, args):
    say()
    say("runs (%d clients, %d B)" % (args.clients, args.size))
    common.table(["api workers", "system", "round", "writes/s", "p50", "p99", "server CPU ms/write", "errors"],
                 [[str(w), system, str(n + 1), "%.0f" % r["rate"], ms(r["p50"]), ms(r["p99"]),
                   _f(r["server_ms_per_op"]), str(sum(r["errors"].values()))] for w, system, n, r in runs])
    say()
    medians = {}
    for w in workers:
        shepherd = statistics.median(r["rate"] for ww, s, _, r in runs if ww == w and s != "etcd")
        etcd = statistics.median(r["rate"] for ww, s, _, r in runs if ww == w and s == "etcd")
        medians[w] = (shepherd, etcd)
        say("  api workers %d: creates/s median %.0f, etcd puts/s median %.0f (same rounds): ratio %.2f"
            % (w, shepherd, etcd, shepherd / etcd if etcd else 0.0))
    if len(workers) > 1:
        base = medians[workers[0]][0]
        for w in workers[1:]:
            say("  creates/s with %d API workers / with %d: %.2f" % (w, workers[0], medians[w][0] / base if base else 0))
    say()
    best = max(medians.values(), key=lambda m: m[0] / m[1] if m[1] else 0)
    ratio = best[0] / best[1] if best[1] else 0.0
    common.target_line("creates/s / etcd puts/s (%d clients)" % args.clients, "%.2f" % ratio,
                       ">= %.1f" % TARGET_RATIO, ratio >= TARGET_RATIO)


if __name__ == "__main__":
    main()
