"""What writing a dump costs the store process: memory, time and the tick's wait.

A store of `--pods` pods (each with its own name, labels, node, IPs and status, as a
fleet's are) is built in a fresh interpreter per mode, then one dump is written:

- `fork`: PySyncObj's own Serializer, a forked child pickling the store (before run AB);
- `thread`: store/pysyncobj_overrides/dump_writer.py, a thread pickling a copy of the
  state's containers.

Printed per mode: the process's PSS before the dump, the peak PSS of the process and its
child together while the dump was written (sampled every 5 ms) and what that adds, the
dump's wall time and size, the CPU it took (process and child), the time the tick thread
spent taking the copy (`thread` only), and the longest gap of a stand-in tick thread
(sleeps 5 ms in a loop, as PySyncObj's tick thread waits in poll) while the dump ran.

    python3 bench/bench_dump_memory.py [--pods 30000] [--rounds 2]
"""
import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import print_machine, say, table  # noqa: E402


def pss_mb(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


RANDOM = random.Random(1)


def pod(i):
    node = "node-%04d" % (i % 1000)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-%d-%06d" % (i // 1000, i), "namespace": "default",
                         "uid": "%08x-%04x-%04x-%04x-%012x" % tuple(RANDOM.getrandbits(b) for b in (32, 16, 16, 16, 48)),
                         "labels": {"app": "web-%d" % (i // 1000), "pod-template-hash": "%08x" % (i // 1000)},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "web-%d-%08x" % (i // 1000, i // 1000),
                                              "uid": "%032x" % (i // 1000), "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "web", "image": "nginx:1.27",
                                                       "resources": {"requests": {"cpu": "10m",
                                                                                  "memory": "16Mi"}}}]},
            "status": {"phase": "Running", "podIP": "10.%d.%d.%d" % (i >> 16 & 255, i >> 8 & 255, i & 255),
                       "hostIP": "192.168.%d.%d" % (i % 1000 // 250, i % 250),
                       "startTime": "2026-12-05T00:%02d:%02dZ" % (i // 60 % 60, i % 60),
                       "conditions": [{"type": t, "status": "True",
                                       "lastTransitionTime": "2026-12-05T00:%02d:%02dZ" % (i // 60 % 60, i % 60)}
                                      for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
                       "containerStatuses": [{"name": "web", "ready": True, "restartCount": 0,
                                              "image": "nginx:1.27", "containerID": "docker://%064x" % i}]}}


def child_main(mode, pods):
    from pysyncobj.config import SERIALIZER_STATE
    from pysyncobj.serializer import Serializer

    from shepherd_ha.store import commands
    from shepherd_ha.store.fsm import StoreFSM
    from shepherd_ha.store.pysyncobj_overrides import dump_writer

    fsm = StoreFSM()
    fsm.apply(commands.write([commands.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": "default"}})]))
    for start in range(0, pods, 100):
        result = fsm.apply(commands.write([commands.create("pods", pod(i))
                                           for i in range(start, min(pods, start + 100))],
                                          key="idem:bench/%d" % start))
        assert result["ok"], result
    directory = tempfile.mkdtemp(prefix="dump-memory-")
    path = os.path.join(directory, "raft.dump")
    cls = dump_writer.DumpWriter if mode == "thread" else Serializer
    writer = cls(path, 2 ** 16, True, None, None, None)
    data = ([{"_SyncObj__enabledCodeVersion": 0}, {"fsm": fsm}], (b"\x00", 12, 1), (b"\x00", 11, 1), set())
    me = os.getpid()
    time.sleep(0.5)
    before = pss_mb(me)
    gaps, stop = [0.0], threading.Event()

    def tick():                     # stands for PySyncObj's tick thread: waits 5 ms, wants the GIL back
        last = time.monotonic()
        while not stop.is_set():
            time.sleep(0.005)
            now = time.monotonic()
            gaps[0] = max(gaps[0], now - last - 0.005)
            last = now
    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    time.sleep(0.2)
    gaps[0] = 0.0
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    writer.serialize(data, 12)
    handed_back = time.monotonic() - t0
    child = writer._Serializer__pid if mode == "fork" else None
    peak = before
    while True:
        state, _ = writer.checkSerializing()
        total = pss_mb(me) + (pss_mb(child) if child else 0.0)
        peak = max(peak, total)
        if state != SERIALIZER_STATE.SERIALIZING:
            break
        time.sleep(0.005)
    wall = time.monotonic() - t0
    stop.set()
    ticker.join()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) + kids.ru_utime + kids.ru_stime
    size = os.path.getsize(path) / 1e6
    os.remove(path)
    os.rmdir(directory)
    print(json.dumps({"mode": mode, "state": state, "before": before, "peak": peak, "wall": wall,
                      "size": size, "cpu": cpu, "handed_back": handed_back, "tick_gap": gaps[0],
                      "objects": fsm.count()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=30000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", choices=("fork", "thread"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child_main(args.child, args.pods)
    say("bench_dump_memory: one dump of a store of %d pods, PySyncObj's forked child against a thread"
        % args.pods)
    print_machine()
    rows = []
    for round_ in range(1, args.rounds + 1):
        for mode in ("fork", "thread"):
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, "--pods",
                                   str(args.pods)], capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                raise SystemExit("%s failed:\n%s" % (mode, done.stderr[-3000:]))
            r = json.loads(done.stdout.strip().splitlines()[-1])
            say("  ... round %d, %s: %s" % (round_, mode, r))
            rows.append((round_, mode, r["objects"], "%.1f" % r["before"], "%.1f" % r["peak"],
                         "%+.1f" % (r["peak"] - r["before"]), "%.2f" % r["wall"], "%.1f" % r["size"],
                         "%.2f" % r["cpu"], "%.1f" % (r["handed_back"] * 1000), "%.1f" % (r["tick_gap"] * 1000),
                         "ok" if r["state"] == 2 else "FAILED"))
    say()
    table(["round", "dump by", "objects", "PSS before MB", "peak PSS MB", "added MB", "wall s", "file MB",
           "CPU s", "tick thread held ms", "longest tick gap ms", "dump"], rows)


if __name__ == "__main__":
    main()
