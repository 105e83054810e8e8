"""Helpers shared by the benchmarks: a throw-away local cluster, a light HTTP
client, percentiles, CPU accounting, pod bodies, tables and a machine description.

Benchmarks print figures; nothing here asserts anything.
"""
import bisect
import contextlib
import http.client
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.parse

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from shepherd_ha.cli.local_cluster import LocalCluster, find_base_port  # noqa: E402, F401 - common.find_base_port: bench_writes, bench_http_stack

NAMESPACE = "default"
PODS_PATH = "/api/v1/namespaces/%s/pods" % NAMESPACE


# ---- output ----

def say(line=""):
    print(line, flush=True)


def progress(line):
    print("  ... " + line, flush=True)


def table(headers, rows, indent="  "):
    """Print rows (lists of values) under headers, columns padded to fit."""
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        say(indent + "  ".join(c.rjust(w) if n and _numeric(c) else c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            say(indent + "  ".join("-" * w for w in widths))


def _numeric(text):
    return text.replace(".", "", 1).replace("%", "").replace(",", "").replace("-", "", 1).isdigit()


def verdict(met):
    return "MET" if met else "NOT MET"


def target_line(label, value_text, target_text, met):
    say("  %-44s %-18s target %-14s %s" % (label, value_text, target_text, verdict(met)))


# ---- statistics ----

def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a list; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, int(-(-p * len(ordered) // 100)))   # ceil(p/100 * n), at least 1
    return ordered[min(rank, len(ordered)) - 1]


def ms(seconds, digits=1):
    return None if seconds is None else "%.*f" % (digits, seconds * 1000.0)


# ---- machine ----

def machine():
    """Facts about this machine and the software under test, as (label, value) pairs."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        # Not `import pysyncobj`: its win_inet_pton module replaces socket.inet_ntop with a
        # Windows-only function on every platform (breaks psutil.net_connections).
        from importlib.metadata import version
        pso = version("pysyncobj")
    except Exception:  # noqa: BLE001 - only for display
        pso = "unknown"
    os_name = platform.platform()
    try:
        with open("/etc/os-release") as fh:
            for line in fh:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"') + ", kernel " + platform.release()
    except OSError:
        pass
    return [("Shepherd HA", server_revision()),
            ("nproc", str(os.cpu_count())),
            ("CPU model", model),
            ("memory", "%.1f GiB" % (psutil.virtual_memory().total / 2 ** 30)),
            ("OS", os_name),
            ("Python", "%s (%s)" % (platform.python_version(), platform.python_implementation())),
            ("PySyncObj", pso)]


def server_revision():
    """The git commit of the code under test, and whether shepherd_ha/ has local changes."""
    import subprocess
    try:
        sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "shepherd_ha"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        subject = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%s"], capture_output=True, text=True,
                                 timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return "commit %s%s (%s)" % (sha, " + uncommitted changes in shepherd_ha/" if dirty else "", subject[:60])


def print_machine():
    say("machine:")
    for label, value in machine():
        say("  %-11s %s" % (label, value))


# ---- cluster ----

class BenchCluster:
    """A fresh N-replica LocalCluster in a temp dir, stopped (SIGTERM by PID) and
    removed on exit. Use as a context manager. Plain HTTP (--insecure-http) unless
    tls=True (bench_tls.py measures the difference)."""

    def __init__(self, replicas=3, keep=False, ready_timeout=60.0, server_options=None, tls=False):
        self.tls = tls
        self.replicas = replicas
        self.keep = keep
        self.ready_timeout = ready_timeout
        self.server_options = server_options
        self.dir = None
        self.cluster = None

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="shepherd-bench-")
        self.cluster = LocalCluster(self.dir)
        self.cluster.create_on_free_ports(self.replicas, server_options=self.server_options, tls=self.tls)
        started = self.cluster.start_all()
        progress("started %d replicas in %s (pids %s)" % (
            self.replicas, self.dir, ", ".join("%s=%s" % kv for kv in sorted(started.items()))))
        leader = self.cluster.wait_ready(self.ready_timeout, progress=progress)
        progress("cluster ready, leader %s" % leader)
        return self

    def __exit__(self, *exc):
        try:
            self.cluster.stop_all()
        finally:
            if self.keep:
                say("  cluster files kept in %s" % self.dir)
            else:
                shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def urls(self):
        return self.cluster.api_urls()

    def ids(self):
        return self.cluster.ids()

    def pids(self):
        return {ident: self.cluster.pid(ident) for ident in self.cluster.ids()}

    def leader(self):
        return self.cluster.leader()


def in_threads(count, target):
    """Run target(k) for k in range(count), each on a thread of its own; return when all have."""
    threads = [threading.Thread(target=target, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def exit_on_sigterm():
    """Turn SIGTERM into SystemExit so context managers stop the replicas we started."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)


# ---- HTTP ----

def split_url(url):
    parsed = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
    return parsed.hostname, parsed.port or 80


def get_json(url, path, timeout=1.0):
    """GET url+path and return the decoded JSON, or None on any failure."""
    host, port = split_url(url)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            return None
        return json.loads(body)
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()


def replica_states(urls, timeout=1.0):
    """{url: GET /shepherd/v1/replica or None}."""
    return {url: get_json(url, "/shepherd/v1/replica", timeout) for url in urls}


def pod_template(size=1024, name_len=24, node_name=None):
    """Bytes of a valid pod JSON body of about `size` bytes with NAME@@@@ where the name
    goes (names are `name_len` characters for the exact size): one container, padded
    with an annotation; already bound to `node_name` when given."""
    placeholder = "NAME@@@@"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": placeholder, "labels": {"app": "bench"},
                        "annotations": {"bench/padding": ""}},
           "spec": {"containers": [{"name": "app", "image": "registry.example/bench/app:1.0",
                                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}
    if node_name:
        pod["spec"]["nodeName"] = node_name
    base = len(json.dumps(pod, separators=(",", ":"))) - len(placeholder) + name_len
    pod["metadata"]["annotations"]["bench/padding"] = "x" * max(0, size - base)
    return json.dumps(pod, separators=(",", ":")).encode()


def pod_body(template, name):
    return template.replace(b"NAME@@@@", name.encode())


class KeepAlive:
    """One keep-alive http.client connection that reconnects after an error; https://
    URLs with `context` (an ssl.SSLContext verifying the cluster CA)."""

    def __init__(self, url, timeout, context=None):
        self.url = url
        self.host, self.port = split_url(url)
        self.timeout = timeout
        self.context = context
        self.https = url.startswith("https://")
        self.conn = None

    def post(self, path, body, headers):
        return self.request("POST", path, body, headers)

    def request(self, method, path, body, headers):
        """(status, body bytes); raises OSError/HTTPException after closing the connection."""
        if self.conn is None:
            if self.https:
                self.conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                                        context=self.context)
            else:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            self.conn.request(method, path, body, headers)
            resp = self.conn.getresponse()
            data = resp.read()
            if resp.will_close:
                self.close()
            return resp.status, data
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# ---- CPU and memory ----

class CpuMeter:
    """CPU seconds used by some processes (their threads and child processes included)
    and by the whole machine between start() and stop()."""

    def __init__(self, pids):
        self.procs = {}
        for label, pid in pids.items():
            with contextlib.suppress(psutil.Error, TypeError, ValueError):
                self.procs[label] = psutil.Process(pid)
        self.before = {}
        self.result = {}

    @staticmethod
    def _busy(times):
        return sum(times) - times.idle - getattr(times, "iowait", 0.0)

    @staticmethod
    def _tree_seconds(proc):
        """CPU seconds of a process and its live children (a replica's store process and API workers)."""
        total = 0.0
        for one in [proc] + proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                t = one.cpu_times()
                total += t.user + t.system
        return total

    def start(self):
        self.t0 = time.monotonic()
        self.sys0 = psutil.cpu_times()
        for label, proc in self.procs.items():
            with contextlib.suppress(psutil.Error):
                self.before[label] = self._tree_seconds(proc)
        return self

    def stop(self):
        wall = time.monotonic() - self.t0
        sys1 = psutil.cpu_times()
        per = {}
        for label, proc in self.procs.items():
            with contextlib.suppress(psutil.Error):
                per[label] = (self._tree_seconds(proc) - self.before.get(label, 0.0)) / wall
        machine_busy = (self._busy(sys1) - self._busy(self.sys0)) / wall   # in cores
        self.result = {"wall": wall, "per_process": per, "machine_cores_busy": machine_busy,
                       "cores": os.cpu_count(),
                       # everything else on the machine (other users' processes, kernel threads)
                       "others_cores_busy": max(0.0, machine_busy - sum(per.values()))}
        return self.result


def rss_mb(pid):
    """(RSS MB (10^6 bytes), USS MB) of a process, or (None, None)."""
    try:
        info = psutil.Process(pid).memory_full_info()
        return info.rss / 1e6, info.uss / 1e6
    except psutil.Error:
        return None, None


# ---- py-spy ----

def summarize_pyspy_raw(path, top=15):
    """From a `py-spy record -f raw` file: total samples, the top leaf frames (self
    time) and the top frames by inclusive time, as lists of (percent, frame)."""
    leaf, inclusive, total = {}, {}, 0
    with open(path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = stack.split(";")
            leaf[frames[-1]] = leaf.get(frames[-1], 0) + n
            for frame in set(frames[1:]):      # frame 0 is the thread
                inclusive[frame] = inclusive.get(frame, 0) + n
    def ranked(d):
        return [(100.0 * v / total, k) for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]] if total else []
    return total, ranked(leaf), ranked(inclusive)


def background_load(seconds=2.0):
    """Cores busy on the whole machine over `seconds` (before we start anything), and
    the busiest other processes as (percent of one core, pid, command)."""
    procs = {}
    for p in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error):
            p.cpu_percent(None)
            procs[p.pid] = p
    t0, sys0 = time.monotonic(), psutil.cpu_times()
    time.sleep(seconds)
    wall, sys1 = time.monotonic() - t0, psutil.cpu_times()
    busy = (CpuMeter._busy(sys1) - CpuMeter._busy(sys0)) / wall
    top = []
    for pid, p in procs.items():
        with contextlib.suppress(psutil.Error):
            pct = p.cpu_percent(None)
            if pct >= 5.0 and pid != os.getpid():
                top.append((pct, pid, " ".join(p.cmdline())[:100] or p.name()))
    return busy, sorted(top, reverse=True)[:5]


def print_background_load(seconds=2.0):
    busy, top = background_load(seconds)
    say("  background load before start: %.2f of %d cores busy%s" % (busy, os.cpu_count(),
                                                                    " (not ours:)" if top else ""))
    for pct, pid, cmd in top:
        say("    %5.1f%%  pid %d  %s" % (pct, pid, cmd))
    return busy


def wait_for_quiet(max_wait, threshold=0.25, exclude=(), sample=2.0):
    """Wait up to `max_wait` s until processes other than `exclude` (PIDs) use less than
    `threshold` cores over a `sample`-second window. Returns that figure (cores)."""
    if max_wait <= 0:
        return None
    deadline = time.monotonic() + max_wait
    shown = False
    while True:
        meter = CpuMeter({str(pid): pid for pid in exclude if pid}).start()
        time.sleep(sample)
        others = meter.stop()["others_cores_busy"]
        if others < threshold:
            return others
        if time.monotonic() >= deadline:
            progress("other processes still use %.2f cores after %.0f s of waiting: measuring anyway"
                     % (others, max_wait))
            return others
        if not shown:
            progress("other processes use %.2f cores: waiting up to %.0f s for a quieter machine"
                     % (others, max_wait))
            shown = True


# Where a sample's time goes: scanning its stack from the innermost frame out, the
# first frame matching a rule names the category.
PYSPY_CATEGORIES = (
    ("cryptography/", "Raft message encryption (Fernet)"),
    ("pysyncobj/pickle.py", "pickling Raft messages/entries"),
    ("pysyncobj/journal.py", "Raft journal"),
    ("pysyncobj/tcp_connection.py", "Raft TCP I/O and polling"),
    ("pysyncobj/poller.py", "Raft TCP I/O and polling"),
    ("pysyncobj/transport.py", "Raft TCP I/O and polling"),
    ("pysyncobj/", "other PySyncObj (log, commit, apply loop)"),
    ("shepherd_ha/store/fsm.py", "FSM apply"),
    ("shepherd_ha/store/watch_log.py", "watch log"),
    ("shepherd_ha/model/", "validation and defaults"),
    ("json/", "JSON encode/decode"),
    ("prometheus_client/", "request metrics (prometheus_client)"),
    ("Condition.", "thread hand-offs (conditions, events)"),
    ("Event.", "thread hand-offs (conditions, events)"),
    ("werkzeug/", "Flask/Werkzeug request handling"),
    ("flask/", "Flask/Werkzeug request handling"),
    ("waitress/", "waitress HTTP server"),
    ("shepherd_ha/", "other Shepherd HA code (handlers, group commit)"),
    ("uuid.py", "other Shepherd HA code (handlers, group commit)"),
)


def categorize_pyspy_raw(path, rules=PYSPY_CATEGORIES):
    """[(percent of samples, category)] from a `py-spy record -f raw` file."""
    counts, total = {}, 0
    with open(path) as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            total += n
            category = "other (interpreter, GC, stdlib)"
            for frame in reversed(stack.split(";")):
                hit = next((name for pattern, name in rules if pattern in frame), None)
                if hit:
                    category = hit
                    break
            counts[category] = counts.get(category, 0) + n
    return total, [(100.0 * v / total, k) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])] if total else []


class AckLog:
    """Lookups on `self.acks`, a sorted list of acknowledgement times (the write loops of
    bench_failover.py and bench_failover_vs_etcd.py keep one)."""

    def last_ack_before(self, t):
        i = bisect.bisect_right(self.acks, t)
        return self.acks[i - 1] if i else None

    def first_ack_after(self, t):
        i = bisect.bisect_right(self.acks, t)
        return self.acks[i] if i < len(self.acks) else None

    def acks_between(self, t0, t1):
        return bisect.bisect_right(self.acks, t1) - bisect.bisect_right(self.acks, t0)
