#!/usr/bin/env python3
"""Write throughput and latency: creates of 1 KiB pods through the HTTP API, beside
raw PySyncObj writes on the same kind of 3-replica set-up, in the same run.

API: a fresh 3-replica LocalCluster in a temp dir (or --servers). C clients, each a
thread with one keep-alive http.client connection per replica, sending its
requests round-robin over the replicas (so requests are spread evenly), each with
its own Idempotency-Key; the clients run as several processes (default 4 x 8 for
32) so the Python client does not serialise on one GIL.

Raw: 3 processes, each a plain SyncObj subclass with one @replicated method
storing a 1 KiB value in a dict, with the SyncObjConf that
shepherd_ha/store/raft_node.py builds (captured from RaftNode itself, so the
settings cannot drift). K writes in flight in total, split over the 3 processes
(async calls whose callback sends the next one). With 1 in flight the run is three
equal slices, one per process (leader and both followers), like the single API
client that goes round-robin.

Phases run one after the other (API cluster stopped before raw starts), each with
a warm-up that is not counted. Prints creates/s, p50, p99, API/raw, CPU use.
"""
import argparse
import base64
import collections
import itertools
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import ms, percentile, say  # noqa: E402

TARGET_RATE = 1500.0
TARGET_P99 = 0.050
TARGET_RATIO = 0.50
PROFILE_RATE = 100          # py-spy samples per second (--profile-rate)


# ====================================================================== API clients

FLOOR_PATH = "/healthz"     # --http-floor: the cheapest request the API serves


ETCD_PUT_PATH = "/v3/kv/put"   # etcd's JSON gateway (bench_writes_vs_etcd.py)


def _etcd_put_body(size, name):
    """A put of about `size` bytes of value under key `name` (base64, as the gateway wants)."""
    value = (name + "x" * size)[:size]
    return json.dumps({"key": base64.b64encode(name.encode()).decode(),
                       "value": base64.b64encode(value.encode()).decode()}).encode()


def _api_client_thread(client, urls, template, prefix, timeout, go, clock, out, floor=False, etcd_size=None):
    conns = [common.KeepAlive(u, timeout) for u in urls]
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    ok = 200 if floor or etcd_size else 201
    latencies, errors, done = [], collections.Counter(), 0
    for conn in conns:                        # connect before the clock starts
        try:
            conn.conn = common.http.client.HTTPConnection(conn.host, conn.port, timeout=timeout)
            conn.conn.connect()
        except OSError:
            conn.close()
    go.wait()
    measure_from, stop_at = clock["measure_from"], clock["stop_at"]
    for n in itertools.count():
        if time.monotonic() >= stop_at:
            break
        conn = conns[(client + n) % len(conns)]
        name = "%s-%04d-%07d" % (prefix, client, n)
        headers["Idempotency-Key"] = name
        t0 = time.perf_counter()
        try:
            if floor:
                status, _ = conn.request("GET", FLOOR_PATH, None, {})
            elif etcd_size:
                status, _ = conn.post(ETCD_PUT_PATH, _etcd_put_body(etcd_size, name), headers)
            else:
                status, _ = conn.post(common.PODS_PATH, common.pod_body(template, name), headers)
        except (OSError, common.http.client.HTTPException) as exc:
            status = type(exc).__name__
        t1 = time.perf_counter()
        now = time.monotonic()
        if measure_from <= now <= stop_at:
            if status == ok:
                latencies.append(t1 - t0)
                done += 1
            else:
                errors[str(status)] += 1
    for conn in conns:
        conn.close()
    out.append((done, latencies, errors))


def api_client_process(index, clients, urls, size, prefix, timeout, ready_q, go_event, clock_value, result_q,
                       node_name=None, floor=False, etcd=False):
    """One client process: `clients` is the list of client numbers it runs as threads."""
    template = common.pod_template(size, name_len=len(prefix) + 13, node_name=node_name)
    go = threading.Event()
    clock = {}
    out = []
    threads = [threading.Thread(target=_api_client_thread,
                                args=(c, urls, template, prefix, timeout, go, clock, out, floor,
                                      size if etcd else None))
               for c in clients]
    for t in threads:
        t.start()
    ready_q.put(index)
    go_event.wait(60)
    # clock_value: (wall time to start measuring, seconds to measure)
    measure_wall, duration = clock_value[0], clock_value[1]
    clock["measure_from"] = time.monotonic() + (measure_wall - time.time())
    clock["stop_at"] = clock["measure_from"] + duration
    cpu0 = None
    go.set()
    delay = clock["measure_from"] - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    cpu0 = time.process_time()
    time.sleep(max(0.0, clock["stop_at"] - time.monotonic()))
    cpu = time.process_time() - cpu0
    for t in threads:
        t.join(30)
    done = sum(o[0] for o in out)
    latencies = [x for o in out for x in o[1]]
    errors = collections.Counter()
    for o in out:
        errors.update(o[2])
    result_q.put({"index": index, "done": done, "latencies": latencies, "errors": dict(errors), "cpu": cpu})


def run_api_phase(urls, clients, processes, duration, warmup, size, timeout, server_pids, profile_dir=None,
                  profile_targets=None, node_name=None, floor=False, etcd=False):
    """Creates through the API (or, with etcd=True, puts of `size` bytes to etcd's JSON
    gateway at `urls`): the same client loop either way."""
    ctx = multiprocessing.get_context("spawn")
    processes = max(1, min(processes, clients))
    groups = [list(range(clients))[i::processes] for i in range(processes)]
    prefix = "b" + uuid.uuid4().hex[:6]
    ready_q, result_q = ctx.Queue(), ctx.Queue()
    go_event = ctx.Event()
    clock_value = ctx.Array("d", 2)
    procs = [ctx.Process(target=api_client_process,
                         args=(i, g, urls, size, prefix, timeout, ready_q, go_event, clock_value, result_q,
                               node_name, floor, etcd),
                         daemon=True) for i, g in enumerate(groups)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready_q.get(timeout=60)
        time.sleep(0.3)                       # let every thread reach its connect + wait
        measure_wall = time.time() + warmup
        clock_value[0], clock_value[1] = measure_wall, duration
        go_event.set()
        time.sleep(max(0.0, measure_wall - time.time()))
        meter = common.CpuMeter(dict(server_pids, **{"client%d" % i: p.pid for i, p in enumerate(procs)})).start()
        spies = start_profiles(profile_dir, profile_targets, duration)
        results = [result_q.get(timeout=duration + 120) for _ in procs]
        cpu = meter.stop()
        finish_profiles(spies)
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    latencies = [x for r in results for x in r["latencies"]]
    errors = collections.Counter()
    for r in results:
        errors.update(r["errors"])
    done = sum(r["done"] for r in results)
    server_s = sum(v for k, v in cpu["per_process"].items() if not k.startswith("client")) * cpu["wall"]
    client_s = sum(v for k, v in cpu["per_process"].items() if k.startswith("client")) * cpu["wall"]
    return {"done": done, "rate": done / duration, "p50": percentile(latencies, 50),
            "server_ms_per_op": 1000 * server_s / done if done else None,
            "ms_per_op": 1000 * (server_s + client_s) / done if done else None,
            "p99": percentile(latencies, 99), "errors": dict(errors), "client_cpu": sum(r["cpu"] for r in results) / duration,
            "cpu": cpu, "client_processes": len(procs)}


# ====================================================================== raw PySyncObj

def raft_node_conf(self_address, peers, data_dir, password):
    """The SyncObjConf RaftNode builds for these addresses, captured by letting
    RaftNode construct it against a stand-in SyncObj (nothing else is started)."""
    from shepherd_ha.store import raft_node
    captured = {}

    class Capture:
        def __init__(self, address, partners, conf, consumers=None, **extras):
            captured["conf"] = conf

    # Stand in for SyncObj and any subclass raft_node.py defines (e.g. a patched one).
    real = {name: obj for name, obj in vars(raft_node).items()
            if isinstance(obj, type) and issubclass(obj, raft_node.SyncObj)}
    for name in real:
        setattr(raft_node, name, Capture)
    try:
        raft_node.RaftNode(raft_node.RaftSettings(self_address=self_address, peer_addresses=list(peers),
                                                  data_dir=data_dir, password=password,
                                                  salt="00" * 16),
                           on_changes=lambda changes: None, on_reset=lambda revision: None)
    finally:
        for name, obj in real.items():
            setattr(raft_node, name, obj)
    if "conf" not in captured:
        raise RuntimeError("could not capture RaftNode's SyncObjConf: raft_node.py changed shape")
    conf = captured["conf"]
    conf.onStateChanged = None              # RaftNode's hook; nothing to notify here
    conf.onReady = None                     # RaftNode's GC freeze: the raw store keeps no objects
    return conf


def raw_replica_process(index, addresses, data_dir, password, size, pipe):
    from pysyncobj import FAIL_REASON, SyncObj, replicated

    class RawStore(SyncObj):
        def __init__(self, address, partners, conf):
            super().__init__(address, partners, conf)
            self.data = {}

        @replicated
        def put(self, key, value):
            self.data[key] = value

    import logging
    truncations = [0]

    def count_truncations(record):
        # Plain PySyncObj logs CRITICAL whenever a follower re-receives entries it
        # already applied (pipelined appends): count them instead of flooding stderr.
        if record.getMessage().startswith("truncating already-applied log entries"):
            truncations[0] += 1
            return False
        return True
    logging.getLogger("pysyncobj.syncobj").addFilter(count_truncations)

    me = addresses[index]
    others = [a for a in addresses if a != me]
    conf = raft_node_conf(me, others, data_dir, password)
    store = RawStore(me, others, conf)
    value = ("v" * size)
    deadline = time.monotonic() + 60
    while not (store._getLeader() is not None and store.isReady()) and time.monotonic() < deadline:
        time.sleep(0.02)
    pipe.send(("ready", store._isLeader()))
    counter = itertools.count()
    while True:
        if not pipe.poll(600):
            break
        msg = pipe.recv()
        if msg[0] == "stop":
            break
        _, k, measure_wall, warmup, duration = msg
        truncations[0] = 0
        measure_from = time.monotonic() + (measure_wall - time.time())
        stop_at = measure_from + duration
        lock = threading.Lock()
        state = {"in_flight": 0, "done": 0}
        latencies, errors = [], collections.Counter()

        def submit():
            key = "k%d-%d" % (index, next(counter))
            t0 = time.perf_counter()
            with lock:
                state["in_flight"] += 1
            store.put(key, value, callback=lambda result, error, t0=t0: finished(t0, error))

        def finished(t0, error):
            t1 = time.perf_counter()
            now = time.monotonic()
            with lock:
                state["in_flight"] -= 1
                if measure_from <= now <= stop_at:
                    if error == FAIL_REASON.SUCCESS:
                        latencies.append(t1 - t0)
                        state["done"] += 1
                    else:
                        errors[str(error)] += 1
            if now < stop_at:
                submit()

        start_at = measure_from - warmup
        time.sleep(max(0.0, start_at - time.monotonic()))
        for _ in range(k):
            submit()
        time.sleep(max(0.0, measure_from - time.monotonic()))
        cpu0 = time.process_time()
        time.sleep(max(0.0, stop_at - time.monotonic()))
        cpu = time.process_time() - cpu0
        drain = time.monotonic() + 5
        while state["in_flight"] and time.monotonic() < drain:
            time.sleep(0.01)
        pipe.send({"index": index, "done": state["done"], "latencies": list(latencies), "errors": dict(errors),
                   "cpu": cpu, "leader": store._isLeader(), "term": store.raftCurrentTerm, "pid": os.getpid(),
                   "truncations": truncations[0]})
    store.destroy()


class RawCluster:
    def __init__(self, size):
        self.size = size

    def __enter__(self):
        try:
            return self._start()
        except BaseException:
            self.__exit__()          # stop what started, remove the temp dir
            raise

    def _start(self):
        ctx = multiprocessing.get_context("spawn")
        self.pipes, self.procs = [], []
        self.dir = tempfile.mkdtemp(prefix="shepherd-bench-raw-")
        base = common.find_base_port(3)
        addresses = ["127.0.0.1:%d" % (base + 100 + i) for i in range(1, 4)]
        password = uuid.uuid4().hex
        for i in range(3):
            parent, child = ctx.Pipe()
            data_dir = os.path.join(self.dir, "r%d" % (i + 1))
            p = ctx.Process(target=raw_replica_process, args=(i, addresses, data_dir, password, self.size, child),
                            daemon=True)
            p.start()
            self.pipes.append(parent)
            self.procs.append(p)
        self.leader = None
        for i, pipe in enumerate(self.pipes):
            if not pipe.poll(90):
                raise RuntimeError("raw PySyncObj replica %d did not get ready" % i)
            _, is_leader = pipe.recv()
            if is_leader:
                self.leader = i
        common.progress("raw PySyncObj replicas ready (pids %s), leader r%s"
                        % (", ".join(str(p.pid) for p in self.procs), "?" if self.leader is None else self.leader + 1))
        return self

    def pids(self):
        return {"r%d" % (i + 1): p.pid for i, p in enumerate(self.procs)}

    def run(self, per_process, warmup, duration):
        measure_wall = time.time() + warmup + 0.2
        for pipe, k in zip(self.pipes, per_process):
            pipe.send(("run", k, measure_wall, warmup, duration))
        return [pipe.recv() if pipe.poll(duration + warmup + 60) else None for pipe in self.pipes]

    def __exit__(self, *exc):
        for pipe in self.pipes:
            try:
                pipe.send(("stop",))
            except OSError:
                pass
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join(5)
        shutil.rmtree(self.dir, ignore_errors=True)
        return False


def split(total, parts):
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def run_raw_phase(raw, in_flight, duration, warmup, profile_dir=None):
    if in_flight < 3:
        # Too few to give every process one: equal slices, each process in turn.
        slices = []
        for i in range(3):
            ks = [in_flight if j == i else 0 for j in range(3)]
            slices.append((ks, duration / 3.0, min(warmup, 1.0)))
    else:
        slices = [(split(in_flight, 3), duration, warmup)]
    done, latencies, errors, cpu, truncations = 0, [], collections.Counter(), {}, 0
    meters = []
    for ks, length, wu in slices:
        meter = common.CpuMeter(raw.pids())
        spies = []
        if profile_dir and raw.leader is not None and len(slices) == 1:
            spies = start_profiles(profile_dir, [("raw%d-leader" % in_flight, raw.procs[raw.leader].pid)],
                                   length, delay=wu + 0.2)
        meter.start()
        results = raw.run(ks, wu, length)
        meters.append(meter.stop())
        finish_profiles(spies)
        for r in results:
            if r is None:
                errors["no-report"] += 1
                continue
            done += r["done"]
            truncations += r["truncations"]
            latencies.extend(r["latencies"])
            errors.update(r["errors"])
    per = collections.defaultdict(float)
    for m in meters:
        for label, v in m["per_process"].items():
            per[label] += v * m["wall"]
    wall = sum(m["wall"] for m in meters)
    cpu = {"wall": wall, "per_process": {k: v / wall for k, v in per.items()},
           "machine_cores_busy": sum(m["machine_cores_busy"] * m["wall"] for m in meters) / wall,
           "others_cores_busy": sum(m["others_cores_busy"] * m["wall"] for m in meters) / wall,
           "cores": os.cpu_count()}
    return {"done": done, "rate": done / duration, "p50": percentile(latencies, 50), "p99": percentile(latencies, 99),
            "errors": dict(errors), "cpu": cpu, "truncations": truncations,
            "ms_per_op": 1000 * sum(per.values()) / done if done else None}


# ====================================================================== profiling

def start_profiles(profile_dir, targets, duration, delay=0.0):
    """py-spy record --gil on each (label, pid) for the measured window (perturbs it!)."""
    if not profile_dir or not targets:
        return []
    os.makedirs(profile_dir, exist_ok=True)
    spies = []
    for label, pid in targets:
        out = os.path.join(profile_dir, "%s.txt" % label)
        cmd = ["py-spy", "record", "--gil", "-p", str(pid), "-f", "raw", "-o", out,
               "-d", str(max(1, int(duration) - 1)), "--nonblocking", "-r", str(PROFILE_RATE)]
        if delay:
            cmd = ["sh", "-c", "sleep %.2f; exec \"$@\"" % delay, "sh"] + cmd
        spies.append((label, out, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    return spies


def finish_profiles(spies):
    for label, out, proc in spies:
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if not os.path.exists(out):
            say("  profile %s: py-spy wrote nothing" % label)
            continue
        total, leaf, inclusive = common.summarize_pyspy_raw(out, top=12)
        say("  profile %s (%s, %d samples with the GIL held):" % (label, out, total))
        say("    by category (innermost matching frame):")
        for pct, category in common.categorize_pyspy_raw(out)[1]:
            say("      %5.1f%%  %s" % (pct, category))
        say("    top self time:")
        for pct, frame in leaf:
            say("      %5.1f%%  %s" % (pct, frame))
        say("    top inclusive time:")
        for pct, frame in inclusive:
            say("      %5.1f%%  %s" % (pct, frame))


# ====================================================================== main

def pids_listening(urls):
    """Best effort for --servers on this machine: {url: pid} by listening port."""
    ports = {common.split_url(u)[1]: u for u in urls}
    found = {}
    try:
        for c in common.psutil.net_connections("tcp"):
            if c.status == "LISTEN" and c.laddr and c.laddr.port in ports and c.pid:
                found[ports[c.laddr.port]] = _replica_root(c.pid)
    except common.psutil.Error:
        pass
    return found


def _replica_root(pid):
    """The port belongs to an API worker, forked by its `shepherd-ha server` (same command
    line): measure from that process, whose tree holds the store process too."""
    try:
        proc = common.psutil.Process(pid)
        parent = proc.parent()
        while parent is not None and parent.cmdline() == proc.cmdline():
            proc, parent = parent, parent.parent()
        return proc.pid
    except common.psutil.Error:
        return pid


def cpu_text(cpu, labels=None):
    per = cpu["per_process"]
    parts = ["%s %.0f%%" % (k, 100 * v) for k, v in sorted(per.items()) if labels is None or k in labels]
    return ", ".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--servers", help="comma-separated API URLs of a running cluster (default: start a fresh "
                        "3-replica LocalCluster in a temp dir)")
    parser.add_argument("--clients", default="1,32", help="concurrency levels, comma-separated (default 1,32)")
    parser.add_argument("--processes", type=int, default=4, help="client processes per level (default 4; at most "
                        "one per client)")
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per level (default 10)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds before each level (default 2)")
    parser.add_argument("--size", type=int, default=1024, help="request body / raw value bytes (default 1024)")
    parser.add_argument("--timeout", type=float, default=10.0, help="client socket timeout in s (default 10)")
    parser.add_argument("--bound", metavar="NODE", help="create pods already bound to NODE (spec.nodeName): the "
                        "scheduler has nothing to do, which isolates the write path (default: unbound pods)")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw PySyncObj comparison")
    parser.add_argument("--no-api", action="store_true", help="skip the API runs")
    parser.add_argument("--profile", metavar="DIR", help="also run py-spy --gil on the leader and a follower during "
                        "the highest API level and on the raw leader, writing raw profiles to DIR (this "
                        "perturbs the figures: use a separate run for them)")
    parser.add_argument("--profile-rate", type=int, default=PROFILE_RATE,
                        help="py-spy samples per second for --profile (default %d)" % PROFILE_RATE)
    parser.add_argument("--http-floor", action="store_true",
                        help="also run each level with GET %s instead of creates, through the same clients: the "
                        "cheapest request waitress + Flask serve, an upper bound for creates" % FLOOR_PATH)
    parser.add_argument("--repeat", type=int, default=1, help="runs per level; the summary shows the run with the "
                        "median rate and the range (default 1)")
    parser.add_argument("--quiet-wait", type=float, default=60.0, help="before each run wait up to this many s for "
                        "other processes on the machine to use < 0.25 cores (default 60; 0 = don't wait)")
    parser.add_argument("--keep", action="store_true", help="keep the temp cluster directory")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.clients.split(",") if x.strip()]
    _set_profile_rate(args.profile_rate)
    common.exit_on_sigterm()

    say("bench_writes: %s-byte pod creates via the API vs raw PySyncObj writes; levels %s; %.0f s measured "
        "(+%.0f s warm-up) per run, %d run(s) per level; pods %s"
        % (args.size, ", ".join(map(str, levels)), args.duration, args.warmup, args.repeat,
           "bound to node %r (no scheduling)" % args.bound if args.bound else "unbound (the scheduler sees each)"))
    common.print_machine()
    common.print_background_load()
    api = collections.defaultdict(list)
    raw = collections.defaultdict(list)
    floor = collections.defaultdict(list)

    if not args.no_api:
        with (_external(args.servers) if args.servers else common.BenchCluster(keep=args.keep)) as cluster:
            urls = cluster.urls()
            pids = cluster.pids()
            leader = cluster.leader()
            say("API servers: %s (leader %s)" % (", ".join(urls), leader))
            for run in range(args.repeat):
                for level in levels:
                    procs = max(1, min(args.processes, level))
                    common.wait_for_quiet(args.quiet_wait, exclude=pids.values())
                    common.progress("API run %d/%d, %d client(s) in %d process(es): %.0f s warm-up + %.0f s ..."
                                    % (run + 1, args.repeat, level, procs, args.warmup, args.duration))
                    targets = None
                    if args.profile and level == max(levels) and run == 0 and leader in pids:
                        follower = next(i for i in sorted(pids) if i != leader)
                        targets = [("api%d-leader-%s" % (level, leader), pids[leader]),
                                   ("api%d-follower-%s" % (level, follower), pids[follower])]
                    r = run_api_phase(urls, level, procs, args.duration, args.warmup, args.size, args.timeout, pids,
                                      args.profile, targets, args.bound)
                    api[level].append(r)
                    say("    %d creates/s, p50 %s ms, p99 %s ms, errors %s; CPU per create %s ms (servers %s ms); "
                        "CPU (%% of one core): servers %s; "
                        "clients %.0f%% (%d procs); machine %.2f of %d cores busy, of which %.2f not ours"
                        % (r["rate"], ms(r["p50"]), ms(r["p99"]), r["errors"] or "none",
                           _f(r["ms_per_op"]), _f(r["server_ms_per_op"]),
                           cpu_text(r["cpu"], set(pids)) or "n/a", 100 * r["client_cpu"], r["client_processes"],
                           r["cpu"]["machine_cores_busy"], r["cpu"]["cores"], r["cpu"]["others_cores_busy"]))
                    if args.http_floor:
                        common.wait_for_quiet(args.quiet_wait, exclude=pids.values())
                        common.progress("HTTP floor run %d/%d, %d client(s): GET %s ..."
                                        % (run + 1, args.repeat, level, FLOOR_PATH))
                        f = run_api_phase(urls, level, procs, args.duration, args.warmup, args.size, args.timeout,
                                          pids, floor=True)
                        floor[level].append(f)
                        say("    HTTP floor: %d GET %s/s, p50 %s ms, p99 %s ms, errors %s; CPU per request %s ms "
                            "(servers %s ms); machine %.2f of %d cores busy"
                            % (f["rate"], FLOOR_PATH, ms(f["p50"]), ms(f["p99"]), f["errors"] or "none",
                               _f(f["ms_per_op"]), _f(f["server_ms_per_op"]), f["cpu"]["machine_cores_busy"],
                               f["cpu"]["cores"]))
            states = common.replica_states(urls)
            for url, st in states.items():
                if st:
                    say("    %s: %s term %s, revision %s, objects %s, group commit %s"
                        % (st["id"], st["role"], st["term"], st["revision"], st["objects"], st.get("groupCommit")))

    if not args.no_raw:
        with RawCluster(args.size) as rawc:
            for run in range(args.repeat):
                for level in levels:
                    common.wait_for_quiet(args.quiet_wait, exclude=rawc.pids().values())
                    common.progress("raw PySyncObj run %d/%d, %d write(s) in flight: %.0f s ..."
                                    % (run + 1, args.repeat, level, args.duration))
                    r = run_raw_phase(rawc, level, args.duration, args.warmup,
                                      args.profile if level == max(levels) and run == 0 else None)
                    raw[level].append(r)
                    say("    %d writes/s, p50 %s ms, p99 %s ms, errors %s; CPU per write %s ms; CPU (%% of one core): "
                        "%s; machine %.2f of %d cores busy, of which %.2f not ours; PySyncObj 'truncating "
                        "already-applied' messages: %s"
                        % (r["rate"], ms(r["p50"]), ms(r["p99"]), r["errors"] or "none", _f(r["ms_per_op"]),
                           cpu_text(r["cpu"]),
                           r["cpu"]["machine_cores_busy"], r["cpu"]["cores"], r["cpu"]["others_cores_busy"],
                           r["truncations"]))

    def median_run(runs):
        return sorted(runs, key=lambda r: r["rate"])[(len(runs) - 1) // 2] if runs else None

    def spread(runs):
        return "%.0f-%.0f" % (min(r["rate"] for r in runs), max(r["rate"] for r in runs)) if len(runs) > 1 else None

    say()
    say("summary (%d-byte objects, %.0f s per run, %d run(s) per level, median run shown, 3 replicas on one machine)"
        % (args.size, args.duration, args.repeat))
    rows = []
    med_api = {level: median_run(api[level]) for level in levels}
    med_raw = {level: median_run(raw[level]) for level in levels}
    for level in levels:
        a, w = med_api[level], med_raw[level]
        ratio = a["rate"] / w["rate"] if a and w and w["rate"] else None
        rows.append([level,
                     "%.0f" % a["rate"] if a else None, spread(api[level]) if a else None,
                     ms(a["p50"]) if a else None, ms(a["p99"]) if a else None,
                     sum(a["errors"].values()) if a else None,
                     "%.0f" % w["rate"] if w else None, spread(raw[level]) if w else None,
                     ms(w["p50"]) if w else None, ms(w["p99"]) if w else None,
                     "%.0f%%" % (100 * ratio) if ratio is not None else None,
                     "%.2f (%.2f)" % (a["cpu"]["machine_cores_busy"], a["cpu"]["others_cores_busy"]) if a else None,
                     "%.2f (%.2f)" % (w["cpu"]["machine_cores_busy"], w["cpu"]["others_cores_busy"]) if w else None])
    common.table(["in flight", "API creates/s", "range", "API p50 ms", "API p99 ms", "API errors", "raw writes/s",
                  "range", "raw p50 ms", "raw p99 ms", "API/raw", "API cores busy", "raw cores busy"], rows)
    say("  (cores busy: whole machine during the measured window, of %d; in brackets the part not used by the "
        "benchmark's own processes)" % os.cpu_count())
    say()
    say("CPU cost (CPU time of our processes / acknowledged writes; median over runs) - less sensitive to other load")
    rows = []
    cores = os.cpu_count()
    for level in levels:
        a_ms = _median([r["ms_per_op"] for r in api[level] if r["ms_per_op"]])
        s_ms = _median([r["server_ms_per_op"] for r in api[level] if r["server_ms_per_op"]])
        w_ms = _median([r["ms_per_op"] for r in raw[level] if r["ms_per_op"]])
        rows.append([level, _f(s_ms), _f(a_ms), _f(w_ms),
                     "%.0f" % (cores * 1000 / a_ms) if a_ms else None,
                     "%.0f" % (cores * 1000 / w_ms) if w_ms else None,
                     "%.0f%%" % (100 * w_ms / a_ms) if a_ms and w_ms else None])
    common.table(["in flight", "API servers ms/create", "API servers+clients ms/create", "raw ms/write",
                  "API ceiling/s", "raw ceiling/s", "API/raw"], rows)
    say("  (ceiling = %d cores / CPU per write: a projection for a machine with nothing else running, not a "
        "measurement)" % cores)
    if any(floor.values()):
        say()
        say("HTTP floor (GET %s through the same clients; median run): what waitress + Flask serve when a "
            "request does nothing" % FLOOR_PATH)
        rows = []
        for level in levels:
            f, a = median_run(floor[level]), med_api[level]
            rows.append([level, "%.0f" % f["rate"] if f else None, _f(f["server_ms_per_op"]) if f else None,
                         _f(f["ms_per_op"]) if f else None,
                         "%.0f%%" % (100 * a["rate"] / f["rate"]) if f and a and f["rate"] else None])
        common.table(["in flight", "GET/s", "servers ms/request", "servers+clients ms/request",
                      "creates/s as % of GET/s"], rows)
    say()
    say("targets:")
    top = max(levels)
    if med_api[top]:
        common.target_line("API creates/s with %d clients" % top, "%.0f" % med_api[top]["rate"],
                           ">= %d" % TARGET_RATE, med_api[top]["rate"] >= TARGET_RATE)
    for level in levels:
        if med_api[level] and med_api[level]["p99"] is not None:
            common.target_line("API p99 with %d client(s)" % level, "%s ms" % ms(med_api[level]["p99"]), "<= 50 ms",
                               med_api[level]["p99"] <= TARGET_P99)
    for level in levels:
        if med_api[level] and med_raw[level] and med_raw[level]["rate"]:
            ratio = med_api[level]["rate"] / med_raw[level]["rate"]
            common.target_line("API/raw throughput at %d in flight" % level, "%.0f%%" % (100 * ratio), ">= 50%",
                               ratio >= TARGET_RATIO)
    return 0


def _set_profile_rate(rate):
    global PROFILE_RATE
    PROFILE_RATE = rate


def _f(value, digits=2):
    return "-" if value is None else "%.*f" % (digits, value)


def _median(values):
    values = sorted(values)
    return values[(len(values) - 1) // 2] if values else None


class _external:
    """--servers: a running cluster we neither start nor stop."""

    def __init__(self, servers):
        self._urls = [u.strip().rstrip("/") for u in servers.split(",") if u.strip()]
        self._urls = [u if "://" in u else "http://" + u for u in self._urls]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def urls(self):
        return self._urls

    def pids(self):
        by_url = pids_listening(self._urls)
        states = common.replica_states(self._urls)
        return {states[u]["id"] if states.get(u) else u: pid for u, pid in by_url.items()}

    def leader(self):
        states = [s for s in common.replica_states(self._urls).values() if s]
        leaders = [s for s in states if s["role"] == "leader"]
        return max(leaders, key=lambda s: s["term"])["id"] if leaders else None


if __name__ == "__main__":
    sys.exit(main())
