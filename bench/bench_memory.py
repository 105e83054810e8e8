#!/usr/bin/env python3
"""Memory per replica: RSS of each replica of a fresh 3-replica cluster when idle,
and after creating N (default 10,000) 1 KiB pods.

Also prints, for scale: the RSS of a bare interpreter and of one that only imports
what a replica imports, and per replica the part of RSS that is file mappings of
its Raft data directory (PySyncObj's mmapped journal) rather than heap.
"""
import argparse
import collections
import os
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import say  # noqa: E402

TARGET_IDLE_MB = 80.0      # issue 13: idle memory per replica, all its processes together
SERVER_IMPORTS = ("import shepherd_ha.cli.main, shepherd_ha.cli.server, shepherd_ha.api.app, "
                  "shepherd_ha.store.replica, shepherd_ha.config")


def interpreter_rss(code):
    """RSS (MB) of `python -c code` once it has run `code` (it then waits to be measured)."""
    script = code + "\nimport sys\nsys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()"
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            cwd=common.ROOT)
    try:
        line = proc.stdout.readline()
        if line.strip() != b"ready":
            return None
        return common.rss_mb(proc.pid)[0]
    finally:
        proc.stdin.close()
        proc.wait(10)


def describe(pid, data_dir):
    """Memory facts about one replica: its processes together (the server, its store
    process and API workers). RSS counts the pages the forked children share with the
    server once per process; PSS splits them, so PSS is what the replica costs."""
    import psutil
    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        return None
    total = {"rss": 0.0, "uss": 0.0, "pss": 0.0, "data_mmap": 0.0, "anon": 0.0, "libs": 0.0, "threads": 0}
    parts = []
    for proc in procs:
        try:
            info = proc.memory_full_info()
            maps = proc.memory_maps(grouped=True)
            threads = proc.num_threads()
        except psutil.Error:
            continue
        data_rss = sum(m.rss for m in maps if data_dir and m.path.startswith(data_dir))
        anon = sum(m.rss for m in maps if not m.path.startswith("/") or m.path in ("[heap]",))
        libs = sum(m.rss for m in maps if m.path.startswith("/") and not (data_dir and m.path.startswith(data_dir)))
        for key, value in (("rss", info.rss), ("uss", info.uss), ("pss", getattr(info, "pss", info.uss)),
                           ("data_mmap", data_rss), ("anon", anon), ("libs", libs)):
            total[key] += value / 1e6
        total["threads"] += threads
        parts.append("%d: RSS %.1f PSS %.1f" % (proc.pid, info.rss / 1e6, getattr(info, "pss", info.uss) / 1e6))
    total["processes"] = "; ".join(parts)
    return total


def create_objects(urls, count, size, threads):
    template = common.pod_template(size, name_len=20)
    prefix = "m" + uuid.uuid4().hex[:6]
    counter = iter(range(count))
    lock = threading.Lock()
    outcomes = collections.Counter()

    def worker(index):
        conns = [common.KeepAlive(u, 10.0) for u in urls]
        headers = {"Content-Type": "application/json"}
        while True:
            with lock:
                n = next(counter, None)
            if n is None:
                break
            name = "%s-%013d" % (prefix, n)
            headers["Idempotency-Key"] = name
            for attempt in range(5):
                try:
                    status, _ = conns[(index + n + attempt) % len(conns)].post(
                        common.PODS_PATH, common.pod_body(template, name), headers)
                except (OSError, common.http.client.HTTPException):
                    status = "error"
                if status in (200, 201):
                    break
                time.sleep(0.1)
            with lock:
                outcomes[str(status)] += 1
        for c in conns:
            c.close()

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    t0 = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.monotonic() - t0, outcomes


def snapshot(bc, label):
    rows = {}
    for ident, pid in sorted(bc.pids().items()):
        data_dir = os.path.join(bc.dir, ident, "data")
        rows[ident] = describe(pid, data_dir)
    states = {s["id"]: s for s in common.replica_states(bc.urls()).values() if s}
    say("  %s:" % label)
    for ident, d in rows.items():
        st = states.get(ident) or {}
        if d:
            say("    %s (%s): RSS %.1f MB, PSS %.1f MB, USS %.1f MB, of which Raft data mmap %.1f MB; %d threads; "
                "objects %s, commit index %s (%s)" % (ident, st.get("role", "?"), d["rss"], d["pss"], d["uss"],
                                                      d["data_mmap"], d["threads"], st.get("objects"),
                                                      st.get("commitIndex"), d["processes"]))
    return rows, states


def wait_applied(bc, revision, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [s for s in common.replica_states(bc.urls()).values() if s]
        if len(states) == len(bc.urls()) and all(s["revision"] >= revision for s in states):
            return True
        time.sleep(0.2)
    return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--idle", type=float, default=10.0, help="idle seconds before the first reading (default 10)")
    parser.add_argument("--objects", type=int, default=10000, help="pods to create (default 10000)")
    parser.add_argument("--size", type=int, default=1024, help="pod body bytes (default 1024)")
    parser.add_argument("--threads", type=int, default=8, help="client threads creating them (default 8)")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="idle seconds after the creates before the second reading (default 10)")
    parser.add_argument("--keep", action="store_true", help="keep the temp cluster directory")
    args = parser.parse_args(argv)
    common.exit_on_sigterm()

    say("bench_memory: replica RSS idle, then after %d creates of %d-byte pods" % (args.objects, args.size))
    common.print_machine()
    bare = interpreter_rss("pass")
    imported = interpreter_rss(SERVER_IMPORTS)
    say("for scale: a bare python3 process %.1f MB RSS; one that imports the server's modules %.1f MB"
        % (bare or 0, imported or 0))
    with common.BenchCluster(keep=args.keep) as bc:
        common.progress("idle for %.0f s ..." % args.idle)
        time.sleep(args.idle)
        idle, idle_states = snapshot(bc, "idle after %.0f s" % args.idle)
        base_rev = max(s["revision"] for s in idle_states.values())
        common.progress("creating %d pods with %d threads ..." % (args.objects, args.threads))
        took, outcomes = create_objects(bc.urls(), args.objects, args.size, args.threads)
        say("  created in %.1f s (%.0f/s): %s" % (took, args.objects / took, dict(outcomes)))
        wait_applied(bc, base_rev + outcomes.get("201", 0))
        common.progress("idle for %.0f s ..." % args.settle)
        time.sleep(args.settle)
        loaded, states = snapshot(bc, "after %d creates + %.0f s" % (args.objects, args.settle))

    say()
    say("summary (MB = 10^6 bytes)")
    rows = []
    for ident in sorted(idle):
        a, b = idle[ident], loaded.get(ident)
        if not a:
            continue
        rows.append([ident, (states.get(ident) or {}).get("role", "?"), "%.1f" % a["rss"], "%.1f" % a["pss"],
                     "%.1f" % b["rss"] if b else None, "%.1f" % b["pss"] if b else None,
                     "%.1f" % b["data_mmap"] if b else None,
                     "%.1f" % (b["rss"] - a["rss"]) if b else None,
                     "%.2f" % ((b["rss"] - a["rss"]) * 1000 / args.objects) if b else None])
    common.table(["replica", "role", "idle RSS", "idle PSS", "loaded RSS", "loaded PSS", "of it Raft mmap",
                  "growth", "KB/object"], rows)
    say()
    say("targets:")
    worst = max((d["pss"] for d in idle.values() if d), default=None)
    common.target_line("idle PSS (all its processes), largest replica", "%.1f MB" % worst if worst else "n/a",
                       "<= %d MB" % TARGET_IDLE_MB,
                       worst is not None and worst <= TARGET_IDLE_MB)
    return 0


if __name__ == "__main__":
    sys.exit(main())
