"""What the replicas' processes cost while a benchmark runs: RSS and CPU of every
process of every replica (the recorded PID and its children, e.g. a store process,
API workers or a snapshot child), the store's size on disk, and how long each dump
(snapshot) took, seen from its data directory.

ResourceWatch samples on a thread every `interval` s; mark(name) remembers each
process's CPU time at a point, so a phase's CPU is the difference of two marks. A
replica's memory is the peak of what its live processes hold at one sample, as RSS
(shared pages counted in each process: a forked child, as PySyncObj's dump writer was
before run AB, counts the store twice)
and as PSS (shared pages split between the processes sharing them: what it costs).
DumpWatch sees PySyncObj write `raft.dump.tmp` and rename it to `raft.dump`: the
time from first seeing the temporary file to the new dump's mtime (resolution: the
polling interval) is the dump time.
"""
import contextlib
import os
import threading
import time

import psutil

from periodic import PeriodicSampler


def replica_processes(pid):
    """[psutil.Process] of a replica: its own process and all its descendants."""
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.Error:
        return []


def describe(proc):
    with contextlib.suppress(psutil.Error):
        cmd = proc.cmdline()
        if "server" in cmd:
            return "server"
        return (" ".join(cmd[-3:]) or proc.name())[:40]
    return "?"


class ResourceWatch(PeriodicSampler):
    thread_name = "resource-watch"

    def __init__(self, pids, interval=2.0, max_seconds=6 * 3600):
        """pids: {replica id: recorded PID}."""
        super().__init__(interval, max_seconds)
        self.pids = dict(pids)
        self.procs = {}            # pid -> (replica, psutil.Process, what)
        self.peak_rss = {}         # pid -> bytes
        self.last_rss = {}
        self.last_cpu = {}         # pid -> cpu seconds at the last sample
        self.marks = {}            # name -> (monotonic, {pid: cpu seconds})
        self.peak_sum = {}         # replica -> (RSS bytes, PSS bytes): peaks of the per-sample sums
        self._lock = threading.Lock()

    def sample(self):
        with self._lock:
            for replica, pid in self.pids.items():
                for proc in replica_processes(pid):
                    if proc.pid not in self.procs:
                        self.procs[proc.pid] = (replica, proc, describe(proc))
            sums = {}
            for pid, (replica, proc, _) in self.procs.items():
                with contextlib.suppress(psutil.Error):
                    rss = proc.memory_info().rss
                    t = proc.cpu_times()
                    self.last_rss[pid] = rss
                    self.peak_rss[pid] = max(rss, self.peak_rss.get(pid, 0))
                    self.last_cpu[pid] = t.user + t.system
                    total = sums.setdefault(replica, [0, 0])
                    total[0] += rss
                    total[1] += pss_bytes(pid, rss)
            for replica, (rss, pss) in sums.items():
                before = self.peak_sum.get(replica, (0, 0))
                self.peak_sum[replica] = (max(before[0], rss), max(before[1], pss))

    def mark(self, name):
        self.sample()
        with self._lock:
            self.marks[name] = (time.monotonic(), dict(self.last_cpu))

    def rows(self, since, until):
        """[(replica, pid, what, RSS MB now, peak RSS MB, CPU s, cores)] between two marks."""
        t0, cpu0 = self.marks[since]
        t1, cpu1 = self.marks[until]
        wall = max(1e-9, t1 - t0)
        out = []
        for pid, (replica, _, what) in sorted(self.procs.items(), key=lambda kv: (kv[1][0], kv[0])):
            used = cpu1.get(pid, self.last_cpu.get(pid, 0.0)) - cpu0.get(pid, 0.0)
            out.append((replica, pid, what, self.last_rss.get(pid, 0) / 1e6, self.peak_rss.get(pid, 0) / 1e6,
                        used, used / wall))
        return out

    def replica_peak_mb(self):
        """{replica: (peak RSS MB, peak PSS MB)} of its processes alive at one sample."""
        with self._lock:
            return {r: (rss / 1e6, pss / 1e6) for r, (rss, pss) in self.peak_sum.items()}


def pss_bytes(pid, default):
    """A process's proportional set size from /proc/PID/smaps_rollup (one read, not a
    walk of every mapping); `default` where the kernel has no rollup."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/%d/smaps_rollup" % pid) as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    return default


def dir_size(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(root, name))
    return total


def data_files(path):
    """{file name: bytes} in a replica's data dir."""
    out = {}
    with contextlib.suppress(OSError):
        for name in os.listdir(path):
            with contextlib.suppress(OSError):
                out[name] = os.path.getsize(os.path.join(path, name))
    return out


class DumpWatch(PeriodicSampler):
    thread_name = "dump-watch"

    def __init__(self, data_dirs, interval=0.1, max_seconds=6 * 3600):
        """data_dirs: {replica id: its data dir}."""
        super().__init__(interval, max_seconds)
        self.dirs = dict(data_dirs)
        self.dumps = []            # (replica, seconds, dump bytes)
        self.intervals = []        # (replica, wall time the temporary file was first seen, renamed)
        self._seen_tmp = {}        # replica -> monotonic/wall time the temporary file was first seen
        self._mtime = {}
        for replica, d in self.dirs.items():     # dumps from before the start do not count
            with contextlib.suppress(OSError):
                self._mtime[replica] = os.stat(os.path.join(d, "raft.dump")).st_mtime

    def sample(self):
        for replica, d in self.dirs.items():
            if os.path.exists(os.path.join(d, "raft.dump.tmp")):
                self._seen_tmp.setdefault(replica, time.time())
            try:
                st = os.stat(os.path.join(d, "raft.dump"))
            except OSError:
                continue
            if st.st_mtime != self._mtime.get(replica):
                self._mtime[replica] = st.st_mtime
                began = self._seen_tmp.pop(replica, None)
                self.dumps.append((replica, None if began is None else max(0.0, st.st_mtime - began),
                                   st.st_size))
                if began is not None:
                    self.intervals.append((replica, began, max(began, st.st_mtime)))

    def seconds_at_once(self):
        """Seconds during which two or more replicas were writing a dump."""
        edges = sorted([(b, 1) for _, b, _ in self.intervals] + [(e, -1) for _, _, e in self.intervals])
        total, writing, since = 0.0, 0, None
        for at, step in edges:
            if writing >= 2:
                total += at - since
            writing, since = writing + step, at
        return total

    def count_during(self, times, after=5.0):
        """How many of `times` (wall clock) fell while a dump was written or within `after` s of its end,
        and how many seconds those windows cover."""
        windows = sorted((b, e + after) for _, b, e in self.intervals)
        merged = []
        for b, e in windows:
            if merged and b <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([b, e])
        inside = sum(1 for t in times if any(b <= t <= e for b, e in merged))
        return inside, sum(e - b for b, e in merged)

    def in_progress(self):
        """Replicas writing a dump now (its temporary file seen, not renamed yet)."""
        return sorted(dict(self._seen_tmp))
