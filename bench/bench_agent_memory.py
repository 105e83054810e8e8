#!/usr/bin/env python3
"""Node agent memory: RSS of one docker agent with 0 pods and with 20 running pods.

A fresh 3-replica local cluster and one agent (`python -m agent.main`, docker
runtime, node name bench-<random>-mem). Once its Node is Ready and it has been idle
for --idle seconds (10), the agent's RSS and USS (psutil memory_full_info) are read:
the 0-pod figure. Then --pods (20) busybox `sleep 3600` pods are created for it
(image present, imagePullPolicy Never); once all are Running with their containers
running, the agent is left idle for --idle seconds, sampled every second, and read
again: the 20-pod figure (last reading; the highest sample is printed too).
For scale: the RSS of a python3 that only imports the agent's modules.

Cleanup: the pods are deleted, the agent stopped (SIGTERM by its PID), every
container labelled with its node name removed, the cluster stopped.
"""
import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import progress, say  # noqa: E402

from shepherd_ha.client import ApiError, Client, ClientError  # noqa: E402

TARGET_MB = 60.0
IMAGE = os.environ.get("SHEPHERD_TEST_IMAGE", "shepherd/busybox:1")
NODE_LABEL = "shepherd.io/node"
AGENT_IMPORTS = "import agent.main, agent.node, agent.pods, agent.runtime.docker_runtime, docker, psutil"


def interpreter_rss(code):
    script = code + "\nimport sys\nsys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()"
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            cwd=common.ROOT)
    try:
        if proc.stdout.readline().strip() != b"ready":
            return None
        return common.rss_mb(proc.pid)[0]
    finally:
        proc.stdin.close()
        proc.wait(10)


def reading(pid):
    try:
        proc = psutil.Process(pid)
        info = proc.memory_full_info()
        return {"rss": info.rss / 1e6, "uss": info.uss / 1e6, "threads": proc.num_threads(),
                "fds": proc.num_fds()}
    except psutil.Error:
        return None


def idle_samples(pid, seconds):
    samples = []
    for _ in range(int(seconds)):
        time.sleep(1.0)
        r = reading(pid)
        if r:
            samples.append(r)
    return samples


def running_count(client, tag):
    pods = (client.list("pods", common.NAMESPACE, label_selector="bench-run=%s" % tag) or {}).get("items") or []
    n = 0
    for pod in pods:
        st = pod.get("status") or {}
        cs = st.get("containerStatuses") or []
        if st.get("phase") == "Running" and cs and all("running" in (c.get("state") or {}) for c in cs):
            n += 1
    return n


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--idle", type=float, default=10.0, help="idle seconds before each reading")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    common.exit_on_sigterm()

    tag = "bench-" + uuid.uuid4().hex[:6]
    node = tag + "-mem"
    say("agent memory: one docker agent (%s), 0 then %d pods" % (node, args.pods))
    common.print_machine()
    common.print_background_load()
    base = interpreter_rss("pass")
    imports = interpreter_rss(AGENT_IMPORTS)

    zero = with_pods = None
    samples = []
    cpu = None
    with common.BenchCluster(3, keep=args.keep) as bc:
        lc = bc.cluster
        client = Client(bc.urls(), timeout=5.0, retry_deadline=30.0)
        try:
            lc.add_agent(node, runtime="docker", extra_args=["--labels", "bench-run=%s" % tag])
            pid = lc.start_agent(node)
            progress("agent started (pid %d)" % pid)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    conds = (client.get("nodes", node).get("status") or {}).get("conditions") or []
                    if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                        break
                except ClientError:
                    pass
                time.sleep(0.3)
            else:
                say("  node not Ready within 60 s; see %s" % lc.agent_log(node))
                return 1
            progress("node Ready; idle %.0f s" % args.idle)
            meter = common.CpuMeter({"agent": pid}).start()
            idle_samples(pid, args.idle)
            zero = reading(pid)
            for i in range(args.pods):
                client.create("pods", {"apiVersion": "v1", "kind": "Pod",
                                       "metadata": {"name": "m%s-%02d" % (tag[-6:], i), "labels": {"bench-run": tag}},
                                       "spec": {"nodeSelector": {"bench-run": tag}, "terminationGracePeriodSeconds": 1,
                                                "containers": [{"name": "app", "image": IMAGE,
                                                                "imagePullPolicy": "Never",
                                                                "command": ["sleep", "3600"]}]}},
                              namespace=common.NAMESPACE)
            deadline = time.monotonic() + 90
            n = 0
            while time.monotonic() < deadline:
                with contextlib.suppress(ClientError):
                    n = running_count(client, tag)
                if n >= args.pods:
                    break
                time.sleep(0.5)
            progress("%d/%d pods Running; idle %.0f s" % (n, args.pods, args.idle))
            samples = idle_samples(pid, args.idle)
            with_pods = reading(pid)
            with_pods["running"] = n
            cpu = meter.stop()
            for i in range(args.pods):
                with contextlib.suppress(ClientError):
                    client.request("DELETE", "%s/m%s-%02d" % (common.PODS_PATH, tag[-6:], i),
                                   params={"gracePeriodSeconds": "0"})
        finally:
            lc.stop_agents(timeout=10.0)
            with contextlib.suppress(ApiError, ClientError):
                client.delete("nodes", node)
            client.close()
            with contextlib.suppress(Exception):
                progress("agent stopped; %d container(s) of %s removed" % (lc.purge_containers(), node))

    say("")
    say("results (MB = 10^6 bytes):")
    rows = []
    if zero:
        rows.append(["0 pods, idle %.0f s" % args.idle, "%.1f" % zero["rss"], "%.1f" % zero["uss"], zero["threads"],
                     zero["fds"]])
    if with_pods:
        rows.append(["%d pods Running, idle %.0f s" % (with_pods["running"], args.idle), "%.1f" % with_pods["rss"],
                     "%.1f" % with_pods["uss"], with_pods["threads"], with_pods["fds"]])
    common.table(["agent", "RSS MB", "USS MB", "threads", "fds"], rows)
    if samples:
        say("  RSS over the last idle period: %.1f-%.1f MB" % (min(s["rss"] for s in samples),
                                                             max(s["rss"] for s in samples)))
    if zero and with_pods:
        say("  growth: %.1f MB for %d pods (%.0f KB per pod)" % (
            with_pods["rss"] - zero["rss"], args.pods, 1000 * (with_pods["rss"] - zero["rss"]) / max(1, args.pods)))
    say("  for scale: bare python3 %.1f MB; python3 importing the agent's modules (%s) %.1f MB"
        % (base or 0, AGENT_IMPORTS.replace("import ", ""), imports or 0))
    if cpu:
        say("  CPU over the measurement (%.0f s): agent %.3f cores; machine %.2f of %d cores busy, of which %.2f "
            "not the agent's (replicas, dockerd and other engineers' processes)" % (
                cpu["wall"], cpu["per_process"].get("agent", 0.0), cpu["machine_cores_busy"], cpu["cores"],
                cpu["others_cores_busy"]))
    say("")
    ok = bool(with_pods) and with_pods["running"] >= args.pods and with_pods["rss"] <= TARGET_MB
    common.target_line("agent RSS with %d pods" % args.pods, "%.1f MB" % with_pods["rss"] if with_pods else "-",
                       "<= %.0f MB" % TARGET_MB, ok)
    return 0


if __name__ == "__main__":
    sys.exit(main())
