#!/usr/bin/env python3
"""Scheduling throughput: pods bound per second, from the creation of the workload to
the last binding committed, on a fresh 3-replica LocalCluster.

Set-up: 500 nodes registered through the API (Ready, 32 cpu, 64 GiB, 110 pods each;
created by 16 client threads), the cluster started with a node grace period of a
day so the node lifecycle controller leaves lease-less nodes Ready. Then, with the
clock running:

- mode `deployment` (the default when the deployment controller exists): one POST of
  a Deployment with 5,000 replicas (each pod requests 10m cpu and 16Mi memory); the
  deployment controller creates the pods, the scheduler binds them.
- mode `pods`: 5,000 pods POSTed directly by `--clients` concurrent client threads
  (round-robin over the replicas).

A watch on the leader (the replica whose store the scheduler writes) sees every pod
change; a pod counts as bound when it is first seen with spec.nodeName. Throughput is
pods / (time the last binding was seen - time the workload was created). The
scheduler's own passes (pods per write_many) are read from the leader's log, and the
spread of pods over nodes from a final list.
"""
import argparse
import collections
import concurrent.futures
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import say  # noqa: E402

TARGET = 1000.0
NS = "default"
PODS = "/api/v1/namespaces/%s/pods" % NS


def node_body(name, cpu, memory, pods):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64"}},
            "spec": {"unschedulable": False},
            "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                       "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "addresses": [{"type": "InternalIP", "address": "10.%d.%d.%d" % (
                           hash(name) % 200, hash(name + "x") % 250, hash(name + "y") % 250)}],
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Bench", "message": "",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def pod_spec():
    return {"containers": [{"name": "app", "image": "registry.example/bench/app:1.0",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}


def post_all(urls, path, bodies, threads, timeout=30.0):
    """POST every body (bytes) with `threads` keep-alive clients; returns Counter of statuses."""
    lock = threading.Lock()
    todo = list(reversed(bodies))
    outcomes = collections.Counter()

    def worker(n):
        conns = [common.KeepAlive(u, timeout) for u in urls]
        i = n
        while True:
            with lock:
                if not todo:
                    break
                body = todo.pop()
            headers = {"Content-Type": "application/json", "Idempotency-Key": uuid.uuid4().hex}
            for attempt in range(20):
                conn = conns[(i + attempt) % len(conns)]
                try:
                    status, _ = conn.post(path, body, headers)
                except (OSError, http.client.HTTPException):
                    status = "error"
                if status in (201, 409):
                    break
                time.sleep(0.05)
            i += 1
            with lock:
                outcomes[status] += 1
        for c in conns:
            c.close()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    return outcomes


class PodWatch:
    """Watches pods on one replica from a revision; records when each pod was first seen
    and first seen bound."""

    def __init__(self, url, revision, timeout):
        self.host, self.port = common.split_url(url)
        self.path = "%s?watch=1&resourceVersion=%d&timeoutSeconds=%d" % (PODS, revision, int(timeout))
        self.read_timeout = int(timeout) + 10    # an idle watch sends nothing: outlive the server's end
        self.created = {}
        self.bound = {}
        self.events = 0
        self.error = None
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.conn = None

    def start(self):
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.read_timeout)
        self.conn.request("GET", self.path)
        self.resp = self.conn.getresponse()
        if self.resp.status != 200:
            raise RuntimeError("watch answered %d: %s" % (self.resp.status, self.resp.read()[:300]))
        self.thread.start()
        return self

    def _run(self):
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    break
                line = line.strip()
                if not line:
                    continue
                now = time.monotonic()
                event = json.loads(line)
                obj = event.get("object") or {}
                name = (obj.get("metadata") or {}).get("name")
                with self.cond:
                    self.events += 1
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.created.setdefault(name, now)
                        if (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
                            self.bound[name] = now
                            self.cond.notify_all()
        except Exception as exc:   # noqa: BLE001 - reported by the caller
            self.error = exc
        finally:
            with self.cond:
                self.cond.notify_all()

    def wait_bound(self, count, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.bound) < count:
                left = deadline - time.monotonic()
                if left <= 0 or not self.thread.is_alive():
                    break
                self.cond.wait(min(left, 1.0))
            return len(self.bound)

    def close(self):
        try:
            self.conn.sock.shutdown(2)
        except Exception:  # noqa: BLE001
            pass
        self.conn.close()


def scheduler_passes(since):
    """Pods bound per scheduler pass, from every replica's log lines after `since`
    ({log path: line count}; the leader may change during the run)."""
    sizes = []
    lines = []
    for log_path, since_line in since.items():
        try:
            with open(log_path, errors="replace") as fh:
                lines += fh.readlines()[since_line:]
        except OSError:
            pass
    for line in lines:
        if "scheduler: bound " not in line:
            continue
        m = re.search(r"scheduler: bound (\d+) pods", line)
        sizes.append(int(m.group(1)) if m else line.split("scheduler: bound ", 1)[1].split(";")[0].count(" to "))
    return sizes


CONTROLLER_CATEGORIES = (
    ("shepherd_ha/controllers/scheduling/", "scheduler: filters, scores, view"),
    ("shepherd_ha/controllers/scheduler.py", "scheduler: pass and writes"),
    ("shepherd_ha/controllers/deployment", "deployment controller"),
    ("shepherd_ha/controllers/events.py", "event recorder"),
    ("shepherd_ha/controllers/", "other controllers and informer"),
    ("shepherd_ha/api/watch.py", "watch streams"),
)


def start_profile(profile_dir, pid):
    """py-spy record --gil on the leader until stopped (it perturbs the run)."""
    os.makedirs(profile_dir, exist_ok=True)
    out = os.path.join(profile_dir, "leader.txt")
    proc = subprocess.Popen(["py-spy", "record", "--gil", "-p", str(pid), "-f", "raw", "-o", out, "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return out, proc


def finish_profile(out, proc):
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    if not os.path.exists(out):
        say("  profile: py-spy wrote nothing")
        return
    total, leaf, _ = common.summarize_pyspy_raw(out, top=12)
    say("  leader profile (%s, %d samples with the GIL held), by category:" % (out, total))
    for pct, category in common.categorize_pyspy_raw(out, CONTROLLER_CATEGORIES + common.PYSPY_CATEGORIES)[1]:
        say("    %5.1f%%  %s" % (pct, category))
    say("  top self time:")
    for pct, frame in leaf:
        say("    %5.1f%%  %s" % (pct, frame))


def bc_leader_ids(leader_urls, urls_by_id):
    return [ident for ident, url in urls_by_id.items() if url in leader_urls]


def log_lines(path):
    try:
        with open(path, errors="replace") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--mode", choices=("auto", "deployment", "pods"), default="auto",
                        help="auto: a Deployment when the deployment controller exists, else pods")
    parser.add_argument("--clients", type=int, default=32, help="client threads creating pods (mode pods)")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")
    parser.add_argument("--quiet-wait", type=float, default=30.0,
                        help="wait up to this long for other processes to calm down before measuring")
    parser.add_argument("--keep", action="store_true", help="keep the temp cluster directory")
    parser.add_argument("--profile", metavar="DIR", help="run py-spy --gil on the leader during the run (perturbs it)")
    args = parser.parse_args(argv)
    common.exit_on_sigterm()
    mode = args.mode
    if mode == "auto":
        present = os.path.exists(os.path.join(common.ROOT, "shepherd_ha", "controllers", "deployments.py"))
        mode = "deployment" if present else "pods"

    say("Scheduling throughput: %d pods over %d nodes, workload created as %s" % (
        args.pods, args.nodes, "one Deployment" if mode == "deployment" else
        "%d pods POSTed by %d clients" % (args.pods, args.clients)))
    common.print_machine()
    common.print_background_load()
    options = {"node_grace_period": 86400.0, "pod_eviction_timeout": 86400.0}
    with common.BenchCluster(3, keep=args.keep, server_options=options) as bc:
        urls = bc.urls()
        leader = bc.leader()
        leader_url = bc.cluster.replica(leader)["api"]

        t = time.monotonic()
        bodies = [json.dumps(node_body("node-%04d" % i, "32", "64Gi", "110")).encode() for i in range(args.nodes)]
        out = post_all(urls, "/api/v1/nodes", bodies, 16)
        common.progress("registered %d nodes in %.1f s (%s)" % (args.nodes, time.monotonic() - t, dict(out)))
        common.wait_for_quiet(args.quiet_wait, exclude=bc.pids().values())

        urls_by_id = {ident: bc.cluster.replica(ident)["api"] for ident in bc.ids()}
        listed = common.get_json(leader_url, PODS + "?resourceVersion=0", timeout=10.0)
        revision = int(listed["metadata"]["resourceVersion"])
        watch = PodWatch(leader_url, revision, args.timeout + 60).start()
        logs = [os.path.join(bc.dir, ident, "server.log") for ident in bc.ids()]
        first_lines = {path: log_lines(path) for path in logs}
        profile = start_profile(args.profile, bc.pids()[leader]) if args.profile else None
        meter = common.CpuMeter(bc.pids()).start()

        t0 = time.monotonic()
        if mode == "deployment":
            deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bench"},
                          "spec": {"replicas": args.pods, "selector": {"matchLabels": {"app": "bench"}},
                                   "template": {"metadata": {"labels": {"app": "bench"}}, "spec": pod_spec()}}}
            out = post_all([leader_url], "/apis/apps/v1/namespaces/%s/deployments" % NS,
                           [json.dumps(deployment).encode()], 1)
            created_at = time.monotonic()
        else:
            bodies = [json.dumps({"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": "bench-%05d" % i, "labels": {"app": "bench"}},
                                  "spec": pod_spec()}).encode() for i in range(args.pods)]
            out = post_all(urls, PODS, bodies, args.clients)
            created_at = time.monotonic()
        common.progress("workload posted in %.2f s (%s)" % (created_at - t0, dict(out)))
        bound = watch.wait_bound(args.pods, args.timeout)
        cpu = meter.stop()
        if profile:
            finish_profile(*profile)
        watch.close()
        if bound < args.pods:
            say("  only %d of %d pods bound within %.0f s (watch error: %s)" % (bound, args.pods, args.timeout,
                                                                                  watch.error))
        created_times = sorted(watch.created.values())
        bound_times = sorted(watch.bound.values())
        last_bound = bound_times[-1] if bound_times else None
        all_created = created_times[min(len(created_times), args.pods) - 1] if created_times else None
        time.sleep(0.5)
        passes = scheduler_passes(first_lines)
        leaders_after = {ident for ident, st in common.replica_states(urls).items()
                         if st and st.get("role") == "leader"}
        final = common.get_json(leader_url, PODS + "?resourceVersion=0", timeout=30.0) or {"items": []}
        per_node = collections.Counter(p["spec"].get("nodeName") for p in final["items"]
                                       if p["spec"].get("nodeName"))

    say("")
    say("results:")
    rows = [["pods bound", "%d / %d" % (bound, args.pods)],
            ["workload POSTed in", "%.2f s" % (created_at - t0)]]
    if all_created is not None:
        rows.append(["all pods created (seen by the watch) after", "%.2f s" % (all_created - t0)])
    if bound_times:
        rows.append(["first binding seen after", "%.2f s" % (bound_times[0] - t0)])
        rows.append(["last binding seen after", "%.2f s" % (last_bound - t0)])
    rate = bound / (last_bound - t0) if last_bound else 0.0
    rows.append(["pods bound per second (creation -> last binding)", "%.0f" % rate])
    if all_created is not None and last_bound and bound_times:
        rows.append(["bindings per second once pods exist (first -> last binding)",
                     "%.0f" % (bound / max(1e-9, last_bound - bound_times[0]))])
    if passes:
        rows.append(["scheduler passes (one write_many each)", "%d, pods per pass: min %d, median %d, max %d" % (
            len(passes), min(passes), sorted(passes)[len(passes) // 2], max(passes))])
    rows.append(["leader before / after the run", "%s / %s" % (
        leader, ", ".join(sorted(bc_leader_ids(leaders_after, urls_by_id))) or "none")])
    if per_node:
        counts = [per_node.get("node-%04d" % i, 0) for i in range(args.nodes)]
        rows.append(["pods per node", "min %d, max %d (ideal %.1f)" % (min(counts), max(counts),
                                                                         args.pods / args.nodes)])
    rows.append(["CPU during the run (cores)", ", ".join("%s %.2f" % kv for kv in sorted(cpu["per_process"].items()))
                 + "; others %.2f of %d" % (cpu["others_cores_busy"], cpu["cores"])])
    common.table(["figure", "value"], rows)
    say("")
    common.target_line("scheduling throughput", "%.0f pods/s" % rate, ">= %.0f pods/s" % TARGET, rate >= TARGET)
    return 0 if bound == args.pods else 1


if __name__ == "__main__":
    sys.exit(main())
