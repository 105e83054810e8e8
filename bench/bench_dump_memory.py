"""What writing a dump costs the store process: memory, time and the tick's wait.

A store of `--pods` pods (each with its own name, uid, labels, node, IPs and status, as
a fleet's are) is built in a fresh interpreter per mode by a stand-in tick thread (the
one thread that applies and asks for dumps, as in a store process), then `--dumps`
dumps are written with `--updates` pod updates before each but the first:

- `fork`: PySyncObj's own Serializer, a forked child pickling the store (before run AB);
- `thread`: store/pysyncobj_overrides/dump_writer.py, a thread pickling a copy of the
  state's containers, with glibc's default malloc arenas;
- `thread, one arena`: the same in a process limited to one arena, as the store
  process runs since run AB (store/malloc_arenas.py).

Printed per mode: PSS before the first dump; the most a dump added to the process and
its child together while being written (sampled every 5 ms); what the process kept after
the last dump; each dump's wall time, size and CPU (process and child); the time the
tick thread spent asking for it (the copy, for a thread); and the stand-in tick thread's
longest wait beyond its 5 ms while dumps ran.

    python3 bench/bench_dump_memory.py [--pods 30000] [--dumps 4] [--rounds 2]
"""
import argparse
import json
import queue
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import print_machine, progress, say, table  # noqa: E402


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


class TickThread:
    """Stands for PySyncObj's tick thread: the one thread that applies commands and asks
    for dumps (as in a store process), and whose longest wait for the GIL is measured
    while a dump is written (it waits 5 ms in a loop, as the tick waits in poll)."""

    def __init__(self):
        self.jobs, self.gap, self.measuring = queue.Queue(), 0.0, False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        last = time.monotonic()
        while True:
            try:
                job, done = self.jobs.get(timeout=0.005)
            except queue.Empty:
                now = time.monotonic()
                if self.measuring:
                    self.gap = max(self.gap, now - last - 0.005)
                last = now
                continue
            job()
            done.set()
            last = time.monotonic()

    def run(self, job):
        done = threading.Event()
        self.jobs.put((job, done))
        done.wait()


def child_main(mode, pods, dumps, updates):
    from pysyncobj.config import SERIALIZER_STATE
    from pysyncobj.serializer import Serializer

    from shepherd_ha.store import commands, malloc_arenas
    from shepherd_ha.store.fsm import StoreFSM
    from shepherd_ha.store.pysyncobj_overrides import dump_writer

    if mode == "thread, one arena":
        assert malloc_arenas.use_one_arena(), "mallopt refused"
    tick = TickThread()
    fsm = StoreFSM()

    def load():
        fsm.apply(commands.write([commands.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                                 "metadata": {"name": "default"}})]))
        for start in range(0, pods, 100):
            result = fsm.apply(commands.write([commands.create("pods", pod(i))
                                               for i in range(start, min(pods, start + 100))],
                                              key="idem:bench/%d" % start))
            assert result["ok"], result
    tick.run(load)
    directory = tempfile.mkdtemp(prefix="dump-memory-")
    path = os.path.join(directory, "raft.dump")
    cls = Serializer if mode == "fork" else dump_writer.DumpWriter
    writer = cls(path, 2 ** 16, True, None, None, None)
    me = os.getpid()
    shuffle = random.Random(2)
    rounds = []
    for number in range(dumps):
        def change():
            for i in range(updates if number else 0):
                j = shuffle.randrange(pods)
                obj = pod(j)
                obj["status"]["phase"] = "Running-%d" % number
                assert fsm.apply(commands.write([commands.update("pods", "default", obj["metadata"]["name"], obj)],
                                                key="idem:update/%d/%d" % (number, i)))["ok"]
        tick.run(change)
        time.sleep(0.3)
        before = pss_mb(me)
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        tick.gap, tick.measuring = 0.0, True
        t0 = time.monotonic()
        entry = 10 + 2 * number
        asked = []
        tick.run(lambda: (writer.serialize(([{"_SyncObj__enabledCodeVersion": 0}, {"fsm": fsm}],
                                            (b"\x00", entry, 1), (b"\x00", entry - 1, 1), set()), entry),
                          asked.append(time.monotonic() - t0)))
        child = writer._Serializer__pid if mode == "fork" else None
        peak = before
        while True:
            states = []
            tick.run(lambda: states.append(writer.checkSerializing()[0]))
            peak = max(peak, pss_mb(me) + (pss_mb(child) if child else 0.0))
            if states[0] != SERIALIZER_STATE.SERIALIZING:
                break
            time.sleep(0.005)
        wall = time.monotonic() - t0
        tick.measuring = False
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = sum(getattr(b, f) - getattr(a, f) for a, b in ((cpu0, cpu1), (kids0, kids1))
                  for f in ("ru_utime", "ru_stime"))
        time.sleep(0.3)
        rounds.append({"state": states[0], "before": before, "peak": peak, "after": pss_mb(me), "wall": wall,
                       "size": os.path.getsize(path) / 1e6, "cpu": cpu, "asked": asked[0],
                       "tick_gap": tick.gap})
    os.remove(path)
    os.rmdir(directory)
    print(json.dumps({"mode": mode, "objects": fsm.count(), "dumps": rounds}))


MODES = ("fork", "thread", "thread, one arena")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=30000)
    ap.add_argument("--dumps", type=int, default=4, help="dumps per process, --updates pod updates before each "
                    "but the first")
    ap.add_argument("--updates", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child_main(args.child, args.pods, args.dumps, args.updates)
    say("bench_dump_memory: %d dumps of a store of %d pods (%d pod updates between dumps) by PySyncObj's forked "
        "child, by a thread, and by a thread with one malloc arena (as the store process runs)"
        % (args.dumps, args.pods, args.updates))
    print_machine()
    rows = []
    for round_ in range(1, args.rounds + 1):
        for mode in MODES:
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, "--pods",
                                   str(args.pods), "--dumps", str(args.dumps), "--updates", str(args.updates)],
                                  capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                raise SystemExit("%s failed:\n%s" % (mode, done.stderr[-3000:]))
            r = json.loads(done.stdout.strip().splitlines()[-1])
            progress("round %d, %s: %s" % (round_, mode, r))
            first, last = r["dumps"][0], r["dumps"][-1]
            rows.append((round_, mode, r["objects"], "%.1f" % first["before"],
                         "%+.1f" % max(d["peak"] - d["before"] for d in r["dumps"]),
                         "%+.1f" % (last["after"] - first["before"]),
                         "%.2f" % statistics.median(d["wall"] for d in r["dumps"]), "%.1f" % last["size"],
                         "%.2f" % statistics.median(d["cpu"] for d in r["dumps"]),
                         "%.1f" % (max(d["asked"] for d in r["dumps"]) * 1000),
                         "%.1f" % (max(d["tick_gap"] for d in r["dumps"]) * 1000),
                         "all" if all(d["state"] == 2 for d in r["dumps"]) else "FAILED"))
    say()
    say("PSS before: before the first dump; added while writing: the most any dump added to the process and its "
        "child at one sample (every 5 ms); kept: PSS after the last dump minus PSS before the first (the "
        "updates' own growth included); asked: time the tick thread spent in serialize()")
    table(["round", "dump by", "objects", "PSS before MB", "added while writing MB", "kept after all MB",
           "wall s (median)", "file MB", "CPU s (median)", "asked ms (max)", "longest tick gap ms", "written"], rows)


if __name__ == "__main__":
    main()
