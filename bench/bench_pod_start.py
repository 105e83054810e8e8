#!/usr/bin/env python3
"""Pod start latency: from create (POST acknowledged) to Running, seen through a watch.

A fresh 3-replica local cluster and 3 node agents (`python -m agent.main`, started
through LocalCluster.add_agent/start_agent) with unique node names
bench-<random>-1..3. N pods (default 30; busybox `sleep 3600`, image present,
imagePullPolicy Never, requests 10m cpu / 16Mi) are created without a node: the
scheduler places them on the 3 nodes (a nodeSelector on this run's node label keeps
them on our nodes). A watch on the pods of this run, opened before the first create,
timestamps each pod's first event with `spec.nodeName` (bound) and its first event
with phase Running and every container in state running (Running).

  --mode spaced   one pod every --interval (0.3 s) from one client thread
  --mode burst    all pods at once, from --threads (3) client threads
  --runtime hollow  the same with hollow agents (no containers): the control-plane
                  share of the latency

Reference floor (docker runtime): `docker run -d` of the same number of containers
directly on this engine, with the same pacing (spaced: one every --interval; burst:
--threads parallel CLI calls), timed per container and in total.

Cleanup: the pods are deleted (gracePeriodSeconds=0), the agents stopped (SIGTERM
by their recorded PIDs), every container labelled with our node names (and the
floor's) removed, the cluster stopped. Prints figures and whether the target is met;
asserts nothing.
"""
import argparse
import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import ms, percentile, progress, say  # noqa: E402

from shepherd_ha.client import ApiError, Client, ClientError  # noqa: E402

TARGET_P99 = 1.5          # seconds
K8S_SLO = 5.0
IMAGE = os.environ.get("SHEPHERD_TEST_IMAGE", "shepherd/busybox:1")
NODE_LABEL = "shepherd.io/node"
RUN_LABEL = "bench-run"


def pod_json(name, tag):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {RUN_LABEL: tag}},
            "spec": {"nodeSelector": {RUN_LABEL: tag},
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "app", "image": IMAGE, "imagePullPolicy": "Never",
                                     "command": ["sleep", "3600"],
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}


def is_running(pod):
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    statuses = status.get("containerStatuses") or []
    wanted = len((pod.get("spec") or {}).get("containers") or [])
    return len(statuses) >= wanted and all("running" in (cs.get("state") or {}) for cs in statuses)


class Watcher:
    """Watches this run's pods; records (monotonic) when each was first bound and first Running."""

    def __init__(self, urls, tag):
        self.client = Client(urls, timeout=5.0, retry_deadline=30.0)
        self.tag = tag
        self.stop = threading.Event()
        self.synced = threading.Event()
        self.lock = threading.Lock()
        self.bound, self.running, self.node_of, self.ip_of = {}, {}, {}, {}
        self.error = None
        self.thread = threading.Thread(target=self._run, name="watch", daemon=True)

    def start(self):
        self.thread.start()
        if not self.synced.wait(30):
            raise RuntimeError("watch did not start within 30 s: %s" % self.error)

    def _run(self):
        try:
            for event in self.client.watch("pods", namespace=common.NAMESPACE,
                                           label_selector="%s=%s" % (RUN_LABEL, self.tag), stop=self.stop):
                now = time.monotonic()
                if event["type"] == "BOOKMARK":
                    self.synced.set()
                    continue
                if event["type"] not in ("ADDED", "MODIFIED"):
                    continue
                pod = event["object"]
                name = pod["metadata"]["name"]
                with self.lock:
                    node = (pod.get("spec") or {}).get("nodeName")
                    if node and name not in self.bound:
                        self.bound[name] = now
                        self.node_of[name] = node
                    if name not in self.running and is_running(pod):
                        self.running[name] = now
                        self.ip_of[name] = (pod.get("status") or {}).get("podIP")
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
            self.synced.set()

    def count_running(self):
        with self.lock:
            return len(self.running)

    def close(self):
        self.stop.set()
        self.thread.join(10)
        self.client.close()


def create_pods(urls, names, tag, mode, threads, interval):
    """POST each pod; returns {name: (sent, acknowledged)} in monotonic seconds and errors."""
    import json
    times, errors = {}, []
    lock = threading.Lock()
    queue = list(names)
    headers = {"Content-Type": "application/json"}

    def worker(index, mine):
        conns = [common.KeepAlive(u, 10.0) for u in urls]
        t_start = time.monotonic()
        for n, name in enumerate(mine):
            if mode == "spaced":
                due = t_start + n * interval
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            body = json.dumps(pod_json(name, tag)).encode()
            h = dict(headers, **{"Idempotency-Key": name})
            for attempt in range(5):
                conn = conns[(index + n + attempt) % len(conns)]
                sent = time.monotonic()
                try:
                    status, data = conn.post(common.PODS_PATH, body, h)
                except (OSError, common.http.client.HTTPException) as exc:
                    last = "%s: %s" % (type(exc).__name__, exc)
                    continue
                ack = time.monotonic()
                if status in (200, 201):
                    with lock:
                        times[name] = (sent, ack)
                    break
                last = "HTTP %d %s" % (status, data[:200])
                if status != 503:
                    break
            else:
                with lock:
                    errors.append((name, last))
                continue
            if name not in times:
                with lock:
                    errors.append((name, last))
        for c in conns:
            c.close()

    if mode == "spaced":
        parts = [queue]
    else:
        parts = [queue[i::threads] for i in range(threads)]
    workers = [threading.Thread(target=worker, args=(i, part), daemon=True) for i, part in enumerate(parts)]
    barrier_t = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    return times, errors, barrier_t


def wait_nodes_ready(client, names, timeout):
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in sorted(pending):
            try:
                node = client.get("nodes", name)
            except ClientError:
                continue
            for cond in (node.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "Ready" and cond.get("status") == "True":
                    pending.discard(name)
        if pending:
            time.sleep(0.2)
    return not pending


def docker_floor(count, mode, threads, interval, label_value):
    """Per-container seconds of `docker run -d` and the total wall time, with the bench's pacing."""
    lat, errors = [], []
    lock = threading.Lock()
    names = ["%s-%02d" % (label_value, i) for i in range(count)]

    def run(name):
        t0 = time.monotonic()
        proc = subprocess.run(["docker", "run", "-d", "--name", name, "--label", "%s=%s" % (NODE_LABEL, label_value),
                               IMAGE, "sleep", "3600"], capture_output=True, text=True, timeout=60)
        dt = time.monotonic() - t0
        with lock:
            if proc.returncode == 0:
                lat.append(dt)
            else:
                errors.append(proc.stderr.strip()[:200])

    def worker(mine):
        t_start = time.monotonic()
        for n, name in enumerate(mine):
            if mode == "spaced":
                delay = t_start + n * interval - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            run(name)

    parts = [names] if mode == "spaced" else [names[i::threads] for i in range(threads)]
    t0 = time.monotonic()
    ws = [threading.Thread(target=worker, args=(p,), daemon=True) for p in parts]
    for w in ws:
        w.start()
    for w in ws:
        w.join(180)
    return lat, time.monotonic() - t0, errors


def remove_labelled(values):
    """Remove every container labelled shepherd.io/node=<value> for our values. Returns the count."""
    import docker
    removed = 0
    client = docker.from_env(timeout=60)
    try:
        for value in values:
            for c in client.api.containers(all=True, filters={"label": "%s=%s" % (NODE_LABEL, value)}):
                with contextlib.suppress(docker.errors.APIError):
                    client.api.remove_container(c["Id"], force=True, v=True)
                    removed += 1
    finally:
        client.close()
    return removed


DOCKER_NAMES = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc", "docker-proxy",
                "docker-init")


def cpu_snapshot():
    """{pid: (create_time, name, cpu seconds, parent pid)} of every process we can read."""
    snap = {}
    for p in psutil.process_iter(["pid", "name", "create_time", "cpu_times", "ppid"]):
        t = p.info["cpu_times"]
        if t is None:
            continue
        snap[p.info["pid"]] = (p.info["create_time"], p.info["name"] or "", t.user + t.system, p.info["ppid"])
    return snap


class MachineMeter:
    """CPU between start() and stop() split into: our processes (by PID), the Docker engine
    (dockerd, containerd, shims, runc, and the containers' own processes under the shims;
    shared with anyone else using the engine), other processes alive at the end (not ours),
    and the rest (processes that came and went inside the window, the kernel)."""

    def __init__(self, ours):
        self.ours = dict(ours)   # label -> pid

    def start(self):
        self.t0, self.sys0, self.snap0 = time.monotonic(), psutil.cpu_times(), cpu_snapshot()
        return self

    def stop(self):
        wall, sys1, snap1 = time.monotonic() - self.t0, psutil.cpu_times(), cpu_snapshot()
        busy = lambda t: sum(t) - t.idle - getattr(t, "iowait", 0.0)  # noqa: E731
        machine = (busy(sys1) - busy(self.sys0)) / wall
        our_pids = {pid: label for label, pid in self.ours.items()}
        engine = {pid for pid, v in snap1.items() if v[1] in DOCKER_NAMES or v[1].startswith("containerd-shim")}
        shims = {pid for pid in engine if snap1[pid][1].startswith("containerd-shim")}
        per, eng, others, top = {}, 0.0, 0.0, []
        for pid, (ctime, name, cpu1, ppid) in snap1.items():
            before = self.snap0.get(pid)
            used = cpu1 - before[2] if before and before[0] == ctime else cpu1
            if pid in our_pids:
                per[our_pids[pid]] = used / wall
            elif pid in engine or ppid in shims:
                eng += used
            else:
                others += used
                if used / wall >= 0.05:
                    top.append((used / wall, pid, name))
        ours = sum(per.values())
        return {"wall": wall, "cores": os.cpu_count(), "machine_cores_busy": machine, "per_process": per,
                "ours": ours, "engine": eng / wall, "others": others / wall,
                "rest": max(0.0, machine - ours - eng / wall - others / wall), "top_others": sorted(top)[::-1][:4]}


def summarize(label, values):
    return [label, len(values), ms(percentile(values, 50), 0), ms(percentile(values, 90), 0),
            ms(percentile(values, 99), 0), ms(max(values) if values else None, 0)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("spaced", "burst"), default="spaced")
    parser.add_argument("--runtime", choices=("docker", "hollow"), default="docker")
    parser.add_argument("--pods", type=int, default=30)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--threads", type=int, default=3, help="client threads in burst mode")
    parser.add_argument("--interval", type=float, default=0.3, help="seconds between creates in spaced mode")
    parser.add_argument("--timeout", type=float, default=90.0, help="longest wait for every pod to run")
    parser.add_argument("--quiet-wait", type=float, default=30.0,
                        help="wait up to this long for other processes to use < 0.25 cores before measuring")
    parser.add_argument("--no-floor", action="store_true", help="skip the `docker run -d` reference floor")
    parser.add_argument("--keep", action="store_true", help="keep the cluster directory")
    args = parser.parse_args()
    common.exit_on_sigterm()

    tag = "bench-" + uuid.uuid4().hex[:6]
    nodes = ["%s-%d" % (tag, i) for i in range(1, args.agents + 1)]
    floor_label = tag + "-floor"
    say("pod start latency: %d pods, mode %s, runtime %s, %d agents (%s)" % (
        args.pods, args.mode, args.runtime, args.agents, ", ".join(nodes)))
    common.print_machine()
    with contextlib.suppress(Exception):
        say("  docker      engine %s" % subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"],
                                                        capture_output=True, text=True, timeout=20).stdout.strip())
    common.print_background_load()

    result = None
    with common.BenchCluster(3, keep=args.keep) as bc:
        lc = bc.cluster
        client = Client(bc.urls(), timeout=5.0, retry_deadline=30.0)
        watcher = None
        try:
            for name in nodes:
                lc.add_agent(name, runtime=args.runtime, extra_args=["--labels", "%s=%s" % (RUN_LABEL, tag)])
                lc.start_agent(name)
            if not wait_nodes_ready(client, nodes, 60):
                say("  nodes not Ready within 60 s; see %s" % ", ".join(lc.agent_log(n) for n in nodes))
                return 1
            # read the PIDs once the agents run (just after the fork the PID file's
            # process still has our command line and agent_pid() does not own it)
            agent_pids = {name: lc.agent_pid(name) for name in nodes}
            progress("nodes Ready (agent pids %s)" % ", ".join("%s=%s" % kv for kv in agent_pids.items()))
            time.sleep(2.0)   # let the agents' first lease/status writes settle
            exclude = list(bc.pids().values()) + list(agent_pids.values()) + [os.getpid()]
            others_before = common.wait_for_quiet(args.quiet_wait, exclude=exclude)
            if others_before is not None:
                progress("other processes use %.2f cores just before the run" % others_before)

            watcher = Watcher(bc.urls(), tag)
            watcher.start()
            names = ["p%s-%03d" % (tag[-6:], i) for i in range(args.pods)]
            meter_pids = {"replica " + k: v for k, v in bc.pids().items()}
            meter_pids.update({"agent " + k: v for k, v in agent_pids.items()})
            meter_pids["bench client"] = os.getpid()
            meter = MachineMeter(meter_pids).start()
            times, errors, t_begin = create_pods(bc.urls(), names, tag, args.mode, args.threads, args.interval)
            t_created = time.monotonic()
            deadline = time.monotonic() + args.timeout
            while watcher.count_running() < len(times) and time.monotonic() < deadline and watcher.error is None:
                time.sleep(0.05)
            t_done = time.monotonic()
            cpu = meter.stop()

            with watcher.lock:
                running, bound = dict(watcher.running), dict(watcher.bound)
                node_of = dict(watcher.node_of)
            lat_ack = [running[n] - times[n][1] for n in times if n in running]
            lat_sent = [running[n] - times[n][0] for n in times if n in running]
            to_bound = [bound[n] - times[n][1] for n in times if n in bound]
            bound_to_run = [running[n] - bound[n] for n in times if n in running and n in bound]
            post = [times[n][1] - times[n][0] for n in times]
            result = {"lat_ack": lat_ack, "lat_sent": lat_sent, "to_bound": to_bound, "bound_to_run": bound_to_run,
                      "post": post, "created": len(times), "running": len(running), "errors": errors,
                      "cpu": cpu, "create_wall": t_created - t_begin, "all_wall": t_done - t_begin,
                      "per_node": {n: sum(1 for v in node_of.values() if v == n) for n in nodes},
                      "watch_error": watcher.error}

            # ---- cleanup of the pods (the containers are removed below in any case) ----
            for name in names:
                with contextlib.suppress(ClientError):
                    client.request("DELETE", "%s/%s" % (common.PODS_PATH, name),
                                   params={"gracePeriodSeconds": "0"})
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    left = client.list("pods", common.NAMESPACE, label_selector="%s=%s" % (RUN_LABEL, tag))
                except ClientError:
                    left = None
                if left is not None and not left.get("items"):
                    break
                time.sleep(0.3)
        finally:
            if watcher is not None:
                watcher.close()
            lc.stop_agents(timeout=10.0)
            for name in nodes:
                with contextlib.suppress(ApiError, ClientError):
                    client.delete("nodes", name)
            client.close()
            if args.runtime == "docker":
                with contextlib.suppress(Exception):
                    n = remove_labelled(nodes)
                    progress("agents stopped; %d leftover container(s) of our nodes removed" % n)

    floor = None
    if args.runtime == "docker" and not args.no_floor:
        progress("reference floor: docker run -d x %d (%s)" % (args.pods, args.mode))
        try:
            floor = docker_floor(args.pods, args.mode, args.threads, args.interval, floor_label)
        finally:
            remove_labelled([floor_label])

    # ---- report ----
    if result is None:
        return 1
    say("")
    say("results (%s, %s runtime, %d pods over %d agents):" % (args.mode, args.runtime, args.pods, args.agents))
    say("  created %d, Running %d%s" % (result["created"], result["running"],
                                        ", errors: %s" % result["errors"][:3] if result["errors"] else ""))
    if result["watch_error"]:
        say("  watch error: %r" % result["watch_error"])
    say("  pods per node: %s" % ", ".join("%s=%d" % kv for kv in result["per_node"].items()))
    say("  all POSTs done %.2f s after the first; last pod Running %.2f s after the first POST"
        % (result["create_wall"], result["all_wall"]))
    rows = [summarize("create (ack) -> Running", result["lat_ack"]),
            summarize("create (sent) -> Running", result["lat_sent"]),
            summarize("POST round trip", result["post"]),
            summarize("create (ack) -> bound (scheduler)", result["to_bound"]),
            summarize("bound -> Running (agent + runtime)", result["bound_to_run"])]
    if floor:
        rows.append(summarize("floor: docker run -d (CLI, per container)", floor[0]))
    common.table(["interval", "n", "p50 ms", "p90 ms", "p99 ms", "max ms"], rows)
    if floor:
        say("  floor: %d x docker run -d took %.2f s in all%s" % (
            len(floor[0]), floor[1], " (errors: %s)" % floor[2][:2] if floor[2] else ""))
    cpu = result["cpu"]
    say("  CPU during the run (%.2f s, in cores): machine %.2f of %d busy = ours %.2f + Docker engine %.2f "
        "(dockerd, containerd, shims, runc; shared) + other processes %.2f (not ours) + short-lived/kernel %.2f"
        % (cpu["wall"], cpu["machine_cores_busy"], cpu["cores"], cpu["ours"], cpu["engine"], cpu["others"],
           cpu["rest"]))
    say("    ours: " + ", ".join("%s %.2f" % (k, v) for k, v in sorted(cpu["per_process"].items())))
    if cpu["top_others"]:
        say("    busiest others: " + ", ".join("pid %d %s %.2f" % (pid, name, c) for c, pid, name in cpu["top_others"]))
    p99 = percentile(result["lat_ack"], 99)
    complete = result["running"] == result["created"] == args.pods
    say("")
    common.target_line("p99 create -> Running (%s, %s)" % (args.mode, args.runtime),
                       "%.3f s" % p99 if p99 is not None else "-", "<= %.1f s" % TARGET_P99,
                       complete and p99 is not None and p99 <= TARGET_P99)
    common.target_line("  (Kubernetes SLO)", "%.3f s" % p99 if p99 is not None else "-", "<= %.1f s" % K8S_SLO,
                       complete and p99 is not None and p99 <= K8S_SLO)
    if not complete:
        say("  not every pod reached Running: the target counts as not met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
