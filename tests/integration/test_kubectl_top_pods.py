"""`kubectl top pods` (kubectl 1.32) on a real 3-replica cluster with TLS and tokens and
two real agents (hollow runtime), through the kubeconfig the cluster writes.

The replica asks each agent for its pods' usage (a signed metrics grant over verified
TLS): the PodMetrics list per namespace, across namespaces, of one pod, by label and
per container; a Table for `kubectl get pods.metrics.k8s.io`; RBAC 403 for a user
without `pods` in `metrics.k8s.io`; and an agent that hangs (SIGSTOP) or is dead: its
pods are left out, kubectl prints the Warning naming its node, and nothing hangs.
Hollow containers run nothing, so their figures are 0 (agent/runtime/hollow_runtime.py).
"""
import os
import shutil
import signal
import subprocess
import time

import pytest

from shepherd_ha.client import Client

from .helpers import Cluster, wait_for
from .test_kubectl_read import rows

pytestmark = pytest.mark.integration

NS = "top-pods"
AGENT_ARGS = ["--lease-interval", "1", "--status-interval", "2"]
NODES = ("top-a", "top-b")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    c = Cluster(tmp_path_factory.mktemp("toppods"), auth=True, tls=True,
                server_options={"node_lease_interval": 1.0, "node_grace_period": 60.0})
    request.addfinalizer(lambda: (c.lc.stop_agents(5), c.stop_all()))
    c.start()
    for name in NODES:
        c.lc.add_agent(name, runtime="hollow", extra_args=AGENT_ARGS)
        c.lc.start_agent(name)
    return c


@pytest.fixture(scope="module")
def client(cluster):
    client = Client(cluster.lc.api_urls(), timeout=5.0, retry_deadline=20.0, **cluster.lc.client_options())
    yield client
    client.close()


@pytest.fixture(scope="module")
def kubectl(cluster, tmp_path_factory):
    binary = shutil.which("kubectl")
    assert binary, "kubectl 1.32 is needed on PATH for these tests"
    cache = str(tmp_path_factory.mktemp("kubectl-cache"))

    def run(*args, check=True, timeout=60):
        proc = subprocess.run([binary, "--kubeconfig", cluster.lc.kubeconfig_path, "--cache-dir", cache] + list(args),
                              capture_output=True, text=True, timeout=timeout)
        if check:
            assert proc.returncode == 0, "kubectl %s failed (%d):\n%s\n%s" % (
                " ".join(args), proc.returncode, proc.stdout, proc.stderr)
        return proc
    return run


@pytest.fixture(scope="module")
def pods(cluster, client):
    wait_for("both agents Ready", lambda: sum(r["node"] == "Ready" for r in cluster.lc.agent_status()
                                              if r["name"] in NODES) == 2, 60)
    client.create("namespaces", {"metadata": {"name": NS}})
    made = {"web-a": ("top-a", "web"), "db-a": ("top-a", "db"), "web-b": ("top-b", "web")}
    for name, (node, app) in made.items():
        client.create("pods", {"metadata": {"name": name, "labels": {"app": app}},
                               "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox:1"},
                                                                         {"name": "side", "image": "busybox:1"}]}},
                      namespace=NS)
    wait_for("the pods Running", lambda: all((client.get("pods", n, namespace=NS).get("status") or {}).get(
        "phase") == "Running" for n in made), 60)
    return made


def top_rows(kubectl, *args):
    """(header, rows by name, process); no rows while kubectl says "metrics not available yet"."""
    proc = kubectl("top", "pods", *args, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return None, {}, proc
    header, listed = rows(proc.stdout)
    return header, {r.get("NAME") or r.get("POD"): r for r in listed}, proc


def test_kubectl_top_pods_lists_per_namespace_all_one_and_by_label(kubectl, pods):
    # two samples per container are needed (one every 10 s): wait for every pod to have them
    header, by_name = wait_for("kubectl top pods shows the three pods", lambda: (lambda h, b, p: (h, b) if len(
        b) == 3 else None)(*top_rows(kubectl, "-n", NS)), 60, interval=1.0)
    assert header == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert {n: (r["CPU(cores)"], r["MEMORY(bytes)"]) for n, r in by_name.items()} == \
        {n: ("0m", "0Mi") for n in pods}, "hollow containers run nothing"
    header, everywhere, _ = top_rows(kubectl, "-A")
    assert header[0] == "NAMESPACE" and {n for n, r in everywhere.items() if r["NAMESPACE"] == NS} == set(pods)
    _, one, _ = top_rows(kubectl, "-n", NS, "web-b")
    assert set(one) == {"web-b"}
    _, labelled, _ = top_rows(kubectl, "-n", NS, "-l", "app=web")
    assert set(labelled) == {"web-a", "web-b"}
    header, containers, _ = top_rows(kubectl, "-n", NS, "web-a", "--containers")
    assert header == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    proc = kubectl("top", "pods", "-n", NS, "web-a", "--containers")
    assert sorted(line.split()[1] for line in proc.stdout.splitlines()[1:]) == ["main", "side"]


def test_the_raw_list_shape_and_the_table(kubectl, pods):
    import json
    raw = json.loads(kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/%s/pods" % NS).stdout)
    assert raw["kind"] == "PodMetricsList" and raw["apiVersion"] == "metrics.k8s.io/v1beta1"
    item = {i["metadata"]["name"]: i for i in raw["items"]}["web-a"]
    assert item["kind"] == "PodMetrics" and item["metadata"]["namespace"] == NS
    assert item["window"].endswith("s") and item["timestamp"].endswith("Z")
    assert [c["name"] for c in item["containers"]] == ["main", "side"]
    assert item["containers"][0]["usage"] == {"cpu": "0", "memory": "0Ki"}
    header, table = rows(kubectl("get", "pods.metrics.k8s.io", "-n", NS).stdout)
    assert header == ["NAME", "CPU", "MEMORY", "WINDOW"] and {r["NAME"] for r in table} == set(pods)


def test_a_user_without_the_permission_gets_403(kubectl, cluster, client, pods):
    # top-nobody may discover the API and read pods, but has no `pods` in metrics.k8s.io
    token = "topnobody0123456789abcdef0123456"
    rbac = "rbac.authorization.k8s.io/v1"
    client.create("clusterroles", {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "top-pod-reader"},
                                   "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
                                             {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/version"],
                                              "verbs": ["get"]}]})
    client.create("clusterrolebindings", {
        "apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": "top-pod-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "top-pod-reader"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "top-nobody"}]})
    with open(cluster.lc.token_file, "a") as fh:
        fh.write("%s,top-nobody,top-nobody,\n" % token)
    proc = wait_for("the replicas know the new token and binding", lambda: (lambda p: p if "metrics.k8s.io" in
                                                                             p.stderr else None)(
        kubectl("--token", token, "top", "pods", "-n", NS, check=False)), 30, interval=0.5)
    assert proc.returncode != 0
    assert 'cannot list resource "pods" in API group "metrics.k8s.io"' in proc.stderr, proc.stderr
    assert set(rows(kubectl("--token", token, "get", "pods", "-n", NS).stdout)[1][0]) >= {"NAME"}, \
        "the same user reads the pods themselves"


def test_a_hung_or_dead_agent_leaves_its_pods_out_and_says_so_without_a_hang(kubectl, cluster, pods):
    wait_for("all three pods with usage", lambda: len(top_rows(kubectl, "-n", NS)[1]) == 3, 60, interval=1.0)
    pid = cluster.lc.agent_pid("top-b")
    assert pid
    os.kill(pid, signal.SIGSTOP)        # our own agent process: it accepts (the kernel does) and never answers
    try:
        started = time.monotonic()
        _, by_name, proc = top_rows(kubectl, "-n", NS)
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert set(by_name) == {"web-a", "db-a"}, proc.stdout
    assert "Warning:" in proc.stderr and "node top-b" in proc.stderr, proc.stderr
    assert "timed out" in proc.stderr or "did not answer" in proc.stderr, proc.stderr
    assert took < 20, "bounded by the replica's scrape deadline (5 s), not by the hung agent"
    cluster.lc.kill_agent("top-b")
    wait_for("top-b's agent gone", lambda: cluster.lc.agent_pid("top-b") is None, 10)
    _, by_name, proc = top_rows(kubectl, "-n", NS)
    assert set(by_name) == {"web-a", "db-a"} and "node top-b" in proc.stderr and "refused" in proc.stderr, \
        (proc.stdout, proc.stderr)
    one = kubectl("top", "pods", "-n", NS, "web-b", check=False)
    assert one.returncode != 0 and "top-b" in one.stderr, one.stderr
