"""End to end: `kubectl top pods` (the real kubectl 1.32) on a cluster made by `shepherd-ha
local up` (HTTPS, tokens: tests/integration/kubectl_kit.py) through the DIR/kubeconfig it
wrote, with one agent on the real Docker engine.

A busybox pod that burns CPU (`while :; do :; done`) shows more CPU than an idle one,
and both show memory in use: the agent samples each container's cgroup
(agent/runtime/cgroup_usage.py, agent/pod_usage.py) and the replica asks it on
request (shepherd_ha/api/pod_metrics.py)."""
import json
import uuid

from tests.integration.test_kubectl_read import rows

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


def test_a_busy_pod_shows_more_cpu_than_an_idle_one_and_both_use_memory(kube):
    tag = uuid.uuid4().hex[:6]
    busy, idle = "busy-" + tag, "idle-" + tag
    pods = {busy: "while :; do :; done",
            # the idle one holds 8 MB in its /dev/shm (tmpfs, charged to its memory cgroup): more than a shell's own
            idle: "head -c 8000000 /dev/zero > /dev/shm/held; sleep 3600"}
    for name, script in pods.items():
        kube.client.create("pods", {"metadata": {"name": name, "labels": {"top": tag}}, "spec": {
            "nodeName": kube.node, "terminationGracePeriodSeconds": 1, "containers": busybox(script)}}, "default")
    for name in pods:
        kube.kubectl("wait", "--for=condition=Ready", "pod/" + name, "--timeout=%ds" % WAIT, namespace="default",
                     timeout=WAIT + 10)

    def both():
        proc = kube.kubectl("top", "pods", "-l", "top=" + tag, namespace="default", check=False)
        if proc.returncode != 0 or not proc.stdout.strip():
            return None          # "metrics not available yet" until the agent has two samples
        header, listed = rows(proc.stdout)
        by_name = {r["NAME"]: r for r in listed}
        return (header, by_name) if {busy, idle} <= set(by_name) else None
    header, by_name = wait_until(both, WAIT, "kubectl top pods to show both pods", interval=1.0)
    assert header == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    busy_cpu, idle_cpu = millicores(by_name[busy]["CPU(cores)"]), millicores(by_name[idle]["CPU(cores)"])
    # a spinning shell takes what the shared 2-core machine gives it (some 40m at a load of 50,
    # whole cores when quiet); a sleeping one next to nothing
    assert busy_cpu >= 10 and busy_cpu > 3 * max(idle_cpu, 1), by_name
    assert mebibytes(by_name[idle]["MEMORY(bytes)"]) >= 7, "the idle pod holds 8 MB: %s" % by_name
    raw = kube.kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/" + busy)
    metrics = json.loads(raw.stdout)
    assert metrics["kind"] == "PodMetrics" and metrics["metadata"]["name"] == busy
    usage = metrics["containers"][0]["usage"]
    assert usage["memory"].endswith("Ki") and int(usage["memory"][:-2]) > 0, "memory is non-zero: %s" % usage
    assert usage["cpu"].endswith("n") or usage["cpu"].endswith("m"), usage
