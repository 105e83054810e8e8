"""End to end: `kubectl top pods` (the real kubectl 1.32) on a real 3-replica cluster, a
real agent process and the real Docker engine (tests/e2e/conftest.py's fixtures).

A busybox pod that burns CPU (`while :; do :; done`) shows more CPU than an idle one,
and both show memory in use: the agent samples each container's cgroup
(agent/runtime/cgroup_usage.py, agent/pod_usage.py) and the replica asks it on
request (shepherd_ha/api/pod_metrics.py)."""
import json
import shutil
import subprocess
import uuid

from tests.integration.test_kubectl_read import rows, write_kubeconfig

from .helpers import IMAGE, wait_until

WAIT = 60.0     # two usage samples (one every 10 s) on a loaded machine


def busybox(script):
    return [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", script]}]


def millicores(text):
    assert text.endswith("m"), text
    return int(text[:-1])


def mebibytes(text):
    assert text.endswith("Mi"), text
    return int(text[:-2])


def test_a_busy_pod_shows_more_cpu_than_an_idle_one_and_both_use_memory(agents, e2e_cluster, tmp_path):
    binary = shutil.which("kubectl")
    assert binary, "kubectl 1.32 is needed on PATH for this test"
    node = agents.start("top")
    busy, idle = "busy-" + uuid.uuid4().hex[:6], "idle-" + uuid.uuid4().hex[:6]
    agents.create_pod(busy, busybox("while :; do :; done"), node=node, labels={"top": agents.tag})
    # the idle one holds 8 MB in its /dev/shm (tmpfs, charged to its memory cgroup): more than a shell's own
    agents.create_pod(idle, busybox("head -c 8000000 /dev/zero > /dev/shm/held; sleep 3600"), node=node,
                      labels={"top": agents.tag})
    agents.wait_running(busy, 60)
    agents.wait_running(idle, 60)
    config = write_kubeconfig(str(tmp_path / "kubeconfig"), e2e_cluster.url(e2e_cluster.ids[0]))
    argv = [binary, "--kubeconfig", config, "--cache-dir", str(tmp_path / "cache"), "top", "pods", "-n", "default",
            "-l", "top=" + agents.tag]

    def both():
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0 or not proc.stdout.strip():
            return None          # "metrics not available yet" until the agent has two samples
        header, listed = rows(proc.stdout)
        by_name = {r["NAME"]: r for r in listed}
        return (header, by_name) if {busy, idle} <= set(by_name) else None
    header, by_name = wait_until(both, WAIT, "kubectl top pods to show both pods", agents.log_tails, interval=1.0)
    assert header == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    busy_cpu, idle_cpu = millicores(by_name[busy]["CPU(cores)"]), millicores(by_name[idle]["CPU(cores)"])
    # a spinning shell takes what the shared 2-core machine gives it (some 40m at a load of 50,
    # whole cores when quiet); a sleeping one next to nothing
    assert busy_cpu >= 10 and busy_cpu > 3 * max(idle_cpu, 1), by_name
    assert mebibytes(by_name[idle]["MEMORY(bytes)"]) >= 7, "the idle pod holds 8 MB: %s" % by_name
    raw = subprocess.run([binary, "--kubeconfig", config, "get", "--raw",
                          "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/" + busy],
                         capture_output=True, text=True, timeout=60)
    assert raw.returncode == 0, raw.stderr
    metrics = json.loads(raw.stdout)
    assert metrics["kind"] == "PodMetrics" and metrics["metadata"]["name"] == busy
    usage = metrics["containers"][0]["usage"]
    assert usage["memory"].endswith("Ki") and int(usage["memory"][:-2]) > 0, "memory is non-zero: %s" % usage
    assert usage["cpu"].endswith("n") or usage["cpu"].endswith("m"), usage
