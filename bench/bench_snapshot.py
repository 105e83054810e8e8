"""Backup, restore and rolling restart on a local 3-replica cluster: how long a snapshot of
N ConfigMaps takes to save, how big it is, how long restore and the restored cluster's
start take, and the longest write gap of a rolling restart. Prints figures, asserts nothing.

    python3 bench/bench_snapshot.py [--objects 10000] [--size 1024]
"""
import argparse
import concurrent.futures
import contextlib
import io
import os
import shutil
import tempfile
import time

import requests

from common import BenchCluster, exit_on_sigterm, print_machine, progress, say, table

from ctl.main import main as sheepctl
from shepherd_ha import snapshot_file
from shepherd_ha.cli import restore
from shepherd_ha.cli.local_cluster import find_base_port
from shepherd_ha.cli.rolling_restart import roll


def fill(urls, count, size, threads=8):
    padding = "x" * max(0, size - 200)

    def create(i):
        with requests.Session() as session:
            for n in range(i, count, threads):
                body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bench-%06d" % n},
                        "data": {"padding": padding}}
                reply = session.post(urls[n % len(urls)] + "/api/v1/namespaces/default/configmaps", json=body,
                                     timeout=30)
                if reply.status_code != 201:
                    raise RuntimeError("create %d: %d %s" % (n, reply.status_code, reply.text[:200]))
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(threads)))
    return time.monotonic() - t0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--size", type=int, default=1024, help="bytes per ConfigMap (about)")
    args = parser.parse_args()
    exit_on_sigterm()
    print_machine()
    work = tempfile.mkdtemp(prefix="shepherd-bench-snapshot-")
    rows = []
    try:
        with BenchCluster(3) as bench:
            urls = bench.urls()
            took = fill(urls, args.objects, args.size)
            progress("%d ConfigMaps of ~%d bytes in %.1fs" % (args.objects, args.size, took))
            path = os.path.join(work, "bench.snap")
            t0 = time.monotonic()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = sheepctl(["--server", ",".join(urls), "cluster", "snapshot", "save", path])
            save = time.monotonic() - t0
            if code != 0:
                raise SystemExit("snapshot save failed (%d)" % code)
            size_mb = os.path.getsize(path) / 1e6
            t0 = time.monotonic()
            snap = snapshot_file.read(path)
            read = time.monotonic() - t0
            rows.append(["snapshot save (sheepctl, %d objects)" % snap.header["objects"], "%.2f s" % save,
                         "%.0f objects/s, %.1f MB" % (snap.header["objects"] / save, size_mb)])
            rows.append(["snapshot check (read + sha256)", "%.2f s" % read, ""])
            t0 = time.monotonic()
            restored, _ = restore.restore(path, os.path.join(work, "restored"), base_port=find_base_port(3),
                                          auth=False, tls=False)     # plain, as BenchCluster: figures compare
            rows.append(["restore (check + 3 dumps)", "%.2f s" % (time.monotonic() - t0), ""])
            try:
                t0 = time.monotonic()
                restored.start_all()
                restored.wait_ready(120)
                rows.append(["restored cluster start to ready", "%.2f s" % (time.monotonic() - t0), ""])
                state = requests.get(restored.api_urls()[0] + "/shepherd/v1/replica", params={"digest": "1"},
                                     timeout=30).json()
                same = state["digest"] == restore.started_digest(snap)
                rows.append(["restored digest equals the snapshot's", "yes" if same else "NO", ""])
            finally:
                restored.stop_all(timeout=5.0)
            result = roll(bench.cluster, timeout=120.0, progress=progress)
            rows.append(["rolling restart (3 replicas, %d objects)" % args.objects,
                         "%.1f s" % sum(s["seconds"] for s in result["steps"]),
                         "longest write gap %.2f s, %d writes acked, %d failed"
                         % (result["longest_gap"], result["acked"], result["failed"])])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say()
    table(["what", "time", "notes"], rows)


if __name__ == "__main__":
    main()
