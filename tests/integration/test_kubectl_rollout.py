"""Real kubectl (1.32) rollouts against a `shepherd-ha local up` cluster through the
DIR/kubeconfig it wrote (HTTPS, the admin's token: kubectl_kit.py): a Deployment gets a
ReplicaSet and pods; a rolling update makes a second ReplicaSet and scales the first
to 0; `kubectl rollout status|history|undo|restart`, `kubectl get rs`, cascade
deletes (background and orphan). The test plays the agents: it marks pods ready.
"""
import json
import re
import threading
import time

import pytest

from shepherd_ha.model.times import now_rfc3339

from .test_deployments import wait_for

NS = "kubectl-rollout"
REVISION = "deployment.kubernetes.io/revision"


@pytest.fixture(scope="module")
def client(kube):
    kube.ensure_namespace(NS)
    return kube.client


@pytest.fixture(scope="module")
def kubectl(kube, client):
    return kube.kubectl_for(NS)


class Agents:
    """Marks every pod of the namespace ready, as agents would, until stopped."""

    def __init__(self, client):
        self.client, self.stop = client, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        deadline = time.monotonic() + 240
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                for pod in self.client.list("pods", NS)["items"]:
                    conditions = (pod.get("status") or {}).get("conditions") or []
                    if pod["metadata"].get("deletionTimestamp") or any(c.get("type") == "Ready" for c in conditions):
                        continue
                    self.client.patch("pods", pod["metadata"]["name"], {"status": {
                        "phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                            "lastTransitionTime": now_rfc3339()}]}},
                        namespace=NS, subresource="status")
            except Exception:      # a pod deleted meanwhile, a replica restarting: next round
                pass
            time.sleep(0.2)

    def close(self):
        self.stop.set()
        self.thread.join(10)


def replica_sets(client, name):
    d = client.get("deployments", name, NS)
    owned = [r for r in client.list("replicasets", NS)["items"]
             if any(ref.get("uid") == d["metadata"]["uid"] and ref.get("controller")
                    for ref in r["metadata"].get("ownerReferences") or [])]
    return sorted(owned, key=lambda r: int(r["metadata"]["annotations"][REVISION]))


def pods_of(client, rs):
    return [p for p in client.list("pods", NS)["items"] if not p["metadata"].get("deletionTimestamp")
            and any(ref.get("uid") == rs["metadata"]["uid"] and ref.get("kind") == "ReplicaSet"
                    for ref in p["metadata"].get("ownerReferences") or [])]


def manifest(image):
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NS},
                       "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                                "template": {"metadata": {"labels": {"app": "web"}},
                                             "spec": {"containers": [{"name": "app", "image": image}]}}}})


def images(rs):
    return [c["image"] for c in rs["spec"]["template"]["spec"]["containers"]]


def test_rollouts_through_replica_sets_with_kubectl(kubectl, client):
    agents = Agents(client)
    try:
        assert "deployment.apps/web created" in kubectl("apply", "-f", "-", input=manifest("nginx:1.25")).stdout
        out = kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=100).stdout
        assert 'deployment "web" successfully rolled out' in out
        [first] = replica_sets(client, "web")
        assert first["metadata"]["annotations"][REVISION] == "1"
        assert len(pods_of(client, first)) == 3
        header, rows_ = table(kubectl("get", "rs", "-o", "wide").stdout)
        assert header[:5] == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
        row = [r for r in rows_ if r["NAME"] == first["metadata"]["name"]][0]
        assert (row["DESIRED"], row["CURRENT"], row["READY"], row["IMAGES"]) == ("3", "3", "3", "nginx:1.25")

        # a rolling update: a second ReplicaSet, the first scaled to 0
        kubectl("set", "image", "deployment/web", "app=nginx:1.26")
        out = kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=100).stdout
        assert 'deployment "web" successfully rolled out' in out
        first, second = wait_for("the first ReplicaSet at 0", lambda: (lambda rs: rs if len(rs) == 2 and
                                 rs[0]["spec"]["replicas"] == 0 and not pods_of(client, rs[0]) else None)(
                                     replica_sets(client, "web")), timeout=60)
        assert images(first) == ["nginx:1.25"] and images(second) == ["nginx:1.26"]
        assert second["spec"]["replicas"] == 3 and len(pods_of(client, second)) == 3
        history = kubectl("rollout", "history", "deployment/web").stdout
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"], history
        detail = kubectl("rollout", "history", "deployment/web", "--revision=1").stdout
        assert "nginx:1.25" in detail, detail

        # undo: back to revision 1's template, which becomes revision 3 on the same ReplicaSet
        assert "rolled back" in kubectl("rollout", "undo", "deployment/web").stdout
        kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=100)
        rsets = wait_for("revision 3", lambda: (lambda rs: rs if [r["metadata"]["annotations"][REVISION]
                                                                   for r in rs] == ["2", "3"] else None)(
            replica_sets(client, "web")), timeout=60)
        assert rsets[1]["metadata"]["uid"] == first["metadata"]["uid"], "the old ReplicaSet is reused"
        d = client.get("deployments", "web", NS)
        assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
        assert d["metadata"]["annotations"][REVISION] == "3"

        # restart: a template annotation, so a new ReplicaSet and new pods
        before = {p["metadata"]["uid"] for p in client.list("pods", NS)["items"]}
        assert "restarted" in kubectl("rollout", "restart", "deployment/web").stdout
        kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=100)
        rsets = wait_for("a third ReplicaSet", lambda: (lambda rs: rs if len(rs) == 3 else None)(
            replica_sets(client, "web")), timeout=60)
        newest = rsets[-1]
        assert "kubectl.kubernetes.io/restartedAt" in newest["spec"]["template"]["metadata"]["annotations"]
        wait_for("the restarted pods", lambda: len(pods_of(client, newest)) == 3 and not (
            {p["metadata"]["uid"] for p in pods_of(client, newest)} & before), timeout=60)
    finally:
        agents.close()


def test_cascade_delete_and_orphan(kubectl, client):
    for name, cascade in (("gone", "background"), ("kept", "orphan")):
        body = json.loads(manifest("nginx:1.25"))
        body["metadata"]["name"] = name
        body["spec"]["selector"]["matchLabels"]["app"] = name
        body["spec"]["template"]["metadata"]["labels"]["app"] = name
        kubectl("apply", "-f", "-", input=json.dumps(body))
        [rs] = wait_for("a ReplicaSet with its pods", lambda: (lambda rs: rs if len(rs) == 1 and len(
            pods_of(client, rs[0])) == 3 else None)(replica_sets(client, name)), timeout=60)
        kubectl("delete", "deployment", name, "--cascade=" + cascade)
        if cascade == "orphan":
            time.sleep(2)
            kept = client.get("replicasets", rs["metadata"]["name"], NS)
            assert not [r for r in kept["metadata"].get("ownerReferences") or [] if r.get("kind") == "Deployment"]
            assert len(pods_of(client, kept)) == 3, "orphaned, not deleted"
        else:
            wait_for("the ReplicaSet and its pods collected", lambda: not [
                r for r in client.list("replicasets", NS)["items"] if r["metadata"]["name"] == rs["metadata"]["name"]]
                and not pods_of(client, rs), timeout=60)


def test_kubectl_top_nodes_prints_the_usage_agents_post(kubectl, client):
    """A node's status as an agent posts it (agent/node.py: capacity, allocatable, usage)."""
    name = "top-" + NS
    client.create("nodes", {"metadata": {"name": name}})
    usage = {"cpuPercent": 37.5, "memoryUsedBytes": 3 * 1024 ** 3, "memoryAvailableBytes": 5 * 1024 ** 3,
             "memoryPercent": 37.5, "timestamp": now_rfc3339()}
    client.patch("nodes", name, {"status": {
        "capacity": {"cpu": "4", "memory": "8388608Ki", "pods": "110"},
        "allocatable": {"cpu": "4", "memory": "8388608Ki", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "AgentReady",
                        "lastHeartbeatTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()}],
        "usage": usage}}, subresource="status")
    header, rows_ = table(kubectl("top", "nodes").stdout)
    assert header == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    row = [r for r in rows_ if r["NAME"] == name][0]
    assert (row["CPU(cores)"], row["CPU(%)"], row["MEMORY(bytes)"], row["MEMORY(%)"]) == \
        ("1500m", "37%", "3072Mi", "37%")
    raw = json.loads(kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/" + name).stdout)
    assert raw["kind"] == "NodeMetrics" and raw["usage"] == {"cpu": "1500000000n", "memory": "3145728Ki"}


def test_python_client_typed_deployment_and_replica_sets(kube, client):
    """The official client (kubernetes 37), typed: create, strategic (default) and merge patch,
    replace, list and read ReplicaSets, watch them (no None event), delete."""
    import kubernetes
    with kube.python_client() as api_client:
        apps = kubernetes.client.AppsV1Api(api_client)
        body = kubernetes.client.V1Deployment(
            metadata=kubernetes.client.V1ObjectMeta(name="typed"),
            spec=kubernetes.client.V1DeploymentSpec(
                replicas=1, selector=kubernetes.client.V1LabelSelector(match_labels={"app": "typed"}),
                template=kubernetes.client.V1PodTemplateSpec(
                    metadata=kubernetes.client.V1ObjectMeta(labels={"app": "typed"}),
                    spec=kubernetes.client.V1PodSpec(containers=[
                        kubernetes.client.V1Container(name="app", image="nginx:1.25")]))))
        created = apps.create_namespaced_deployment(NS, body)
        assert isinstance(created, kubernetes.client.V1Deployment) and created.metadata.uid
        # the first template's ReplicaSet first: a template changed before the controller made
        # it never gets one (as in Kubernetes), and the count below would be 1
        wait_for("the first ReplicaSet", lambda: [r for r in apps.list_namespaced_replica_set(NS).items
                                                  if r.metadata.name.startswith("typed-")], timeout=60)
        patched = apps.patch_namespaced_deployment("typed", NS, {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.26"}]}}}})
        assert patched.spec.template.spec.containers[0].image == "nginx:1.26", "strategic merge by name"
        api_client.set_default_header("Content-Type", "application/merge-patch+json")
        merged = apps.patch_namespaced_deployment("typed", NS, {"metadata": {"labels": {"tier": "x"}}})
        assert merged.metadata.labels == {"tier": "x"}
        api_client.default_headers.pop("Content-Type")
        for attempt in range(5):
            # read, change, replace: the controller may write its status in between (409), as in Kubernetes
            current = apps.read_namespaced_deployment("typed", NS)
            current.spec.replicas = 2
            try:
                replaced = apps.replace_namespaced_deployment("typed", NS, current)
                break
            except kubernetes.client.exceptions.ApiException as exc:
                if exc.status != 409 or attempt == 4:
                    raise
        assert replaced.spec.replicas == 2 and apps.read_namespaced_deployment("typed", NS).spec.replicas == 2
        listed = wait_for("two ReplicaSets", lambda: (lambda items: items if len(items) == 2 else None)(
            [r for r in apps.list_namespaced_replica_set(NS).items if r.metadata.name.startswith("typed-")]),
            timeout=60)
        assert all(isinstance(r, kubernetes.client.V1ReplicaSet) for r in listed)
        assert {r.metadata.owner_references[0].kind for r in listed} == {"Deployment"}
        one = apps.read_namespaced_replica_set(listed[0].metadata.name, NS)
        assert one.spec.template.metadata.labels["pod-template-hash"] == one.metadata.labels["pod-template-hash"]
        events = list(kubernetes.watch.Watch().stream(apps.list_namespaced_replica_set, NS, timeout_seconds=2))
        assert events and all(e is not None and isinstance(e["object"], kubernetes.client.V1ReplicaSet)
                              for e in events)
        apps.delete_namespaced_deployment("typed", NS)
        wait_for("the typed ReplicaSets collected", lambda: not [
            r for r in apps.list_namespaced_replica_set(NS).items if r.metadata.name.startswith("typed-")], timeout=60)


def table(text):
    lines = [line for line in text.splitlines() if line.strip()]
    header = re.split(r"\s{2,}", lines[0].strip())
    return header, [dict(zip(header, re.split(r"\s{2,}", line.strip()))) for line in lines[1:]]
