"""Real kubectl 1.32's typed commands, whose request bodies are protobuf, against a real
3-replica cluster over TLS with bearer tokens and two real node agents (hollow
runtime): auth can-i (SelfSubjectAccessReview) and auth can-i --list
(SelfSubjectRulesReview) for the admin and for a user whose only right is a Role,
create deployment|service clusterip|service nodeport|role|rolebinding|clusterrole|
clusterrolebinding, and drain (cordon, Evictions, the Deployment's pods recreated
on the other node). Assertions are on what the server holds afterwards.

Self-contained: its own cluster and kubeconfigs (the admin's that `local up` writes,
and one with the restricted user's token)."""
import os
import re
import shutil
import subprocess

import pytest

from shepherd_ha.client import Client
from shepherd_ha.tls import kubeconfig as kubeconfig_file

from .helpers import Cluster, wait_for

pytestmark = pytest.mark.integration

NS = "pb"
NODES = ("pbnode-a", "pbnode-b")
RESTRICTED = "r" * 32          # user pb-restricted: no group, only the Role this test binds
KUBECTL_TIMEOUT = 120


@pytest.fixture(scope="module")
def pb_cluster(tmp_path_factory, request):
    c = Cluster(tmp_path_factory.mktemp("kubectl-protobuf"), replicas=3, auth=True, tls=True)
    request.addfinalizer(lambda: (c.lc.stop_agents(5), c.stop_all()))
    with open(c.lc.token_file, "a") as fh:
        fh.write("%s,pb-restricted,pb-restricted\n" % RESTRICTED)
    c.start()
    for node in NODES:
        c.lc.add_agent(node, runtime="hollow")
        c.lc.start_agent(node)
    return c


@pytest.fixture(scope="module")
def client(pb_cluster):
    with Client(pb_cluster.lc.api_urls(), timeout=5.0, retry_deadline=20.0, **pb_cluster.lc.client_options()) as c:
        c.create("namespaces", {"metadata": {"name": NS}})
        wait_for("both agents' nodes Ready", lambda: all(_ready(c, n) for n in NODES), 90, interval=0.5)
        yield c


def _ready(client, node):
    try:
        conditions = client.get("nodes", node)["status"].get("conditions") or []
    except Exception:       # not registered yet
        return False
    return any(x["type"] == "Ready" and x["status"] == "True" for x in conditions)


def _kubectl_runner(config, cache):
    binary = shutil.which("kubectl")
    assert binary, "kubectl 1.32 is needed on PATH for these tests"

    def run(*args, check=True):
        proc = subprocess.run([binary, "--kubeconfig", config, "--cache-dir", cache] + list(args),
                              capture_output=True, text=True, timeout=KUBECTL_TIMEOUT,
                              env=dict(os.environ, KUBECONFIG=config))
        if check:
            assert proc.returncode == 0, "kubectl %s failed (%d):\n%s\n%s" % (
                " ".join(args), proc.returncode, proc.stdout, proc.stderr)
        return proc
    return run


@pytest.fixture(scope="module")
def kubectl(pb_cluster, client, tmp_path_factory):
    """The admin, through the kubeconfig the cluster wrote (TLS, admin token)."""
    return _kubectl_runner(pb_cluster.lc.kubeconfig_path, str(tmp_path_factory.mktemp("kubectl-cache")))


@pytest.fixture(scope="module")
def restricted(pb_cluster, client, tmp_path_factory):
    """kubectl as pb-restricted: the same cluster and CA, its own token."""
    with open(pb_cluster.lc.ca_file, "rb") as fh:
        ca_pem = fh.read()
    path = str(tmp_path_factory.mktemp("restricted") / "kubeconfig")
    kubeconfig_file.write(path, kubeconfig_file.build(pb_cluster.lc.api_urls(), ca_pem, token=RESTRICTED,
                                                      user="pb-restricted", namespace=NS))
    return _kubectl_runner(path, str(tmp_path_factory.mktemp("restricted-cache")))


def test_create_role_and_rolebinding_then_auth_can_i_for_admin_and_a_restricted_user(kubectl, restricted, client):
    kubectl("create", "role", "pod-reader", "-n", NS, "--verb=get,list,watch", "--resource=pods")
    kubectl("create", "rolebinding", "pod-reader", "-n", NS, "--role=pod-reader", "--user=pb-restricted")
    role = client.get("roles", "pod-reader", NS)
    assert role["rules"] == [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]
    binding = client.get("rolebindings", "pod-reader", NS)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"}
    assert binding["subjects"] == [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "pb-restricted"}]

    assert kubectl("auth", "can-i", "create", "pods", "-n", NS).stdout.strip() == "yes"
    assert kubectl("auth", "can-i", "delete", "nodes").stdout.strip() == "yes"
    # RBAC reads the bindings from the replica's copy of the store: give it a moment.
    wait_for("the binding in force", lambda: restricted("auth", "can-i", "list", "pods", check=False)
             .stdout.strip() == "yes", 15)
    for args in (("create", "pods"), ("list", "pods", "-n", "default"), ("get", "nodes"),
                 ("create", "pods/eviction")):
        proc = restricted("auth", "can-i", *args, check=False)
        assert proc.returncode == 1 and proc.stdout.strip() == "no", (args, proc.stdout, proc.stderr)
    # and what it says is what the API does
    assert restricted("get", "pods", "-n", NS).returncode == 0
    refused = restricted("create", "configmap", "nope", "-n", NS, "--from-literal=a=b", check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr


def _rows(text):
    """kubectl's table as lists of cells (columns are 2+ spaces apart)."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if line.strip()]


def test_auth_can_i_list(kubectl, restricted, client):
    rows = _rows(restricted("auth", "can-i", "--list", "-n", NS).stdout)
    assert rows[0] == ["Resources", "Non-Resource URLs", "Resource Names", "Verbs"], rows
    assert ["pods", "[]", "[]", "[get list watch]"] in rows, rows
    assert ["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"] in rows, rows
    assert ["[/api/*]", "[]", "[get]"] in rows, rows        # discovery, as every authenticated user
    assert not [r for r in rows if r[0] in ("configmaps", "*.*", "nodes")], rows
    assert ["*.*", "[]", "[]", "[*]"] in _rows(kubectl("auth", "can-i", "--list").stdout)


def _pods_of(client, app):
    return [p for p in client.list("pods", NS, label_selector="app=" + app)["items"]]


def test_create_deployment_and_services(kubectl, client):
    kubectl("create", "deployment", "web", "-n", NS, "--image=nginx:1.25", "--replicas=2", "--port=80")
    dep = client.get("deployments", "web", NS)
    assert dep["spec"]["replicas"] == 2 and dep["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"

    def running():
        pods = [p for p in _pods_of(client, "web") if not p["metadata"].get("deletionTimestamp")]
        return len(pods) == 2 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)
    wait_for("the deployment's 2 pods Running", running, 90, interval=0.5)

    kubectl("create", "service", "clusterip", "web", "-n", NS, "--tcp=80:8080")
    svc = client.get("services", "web", NS)
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["selector"] == {"app": "web"}
    assert svc["spec"]["ports"][0]["port"] == 80 and svc["spec"]["ports"][0]["targetPort"] == 8080
    assert svc["spec"].get("clusterIP") not in (None, "", "None")
    kubectl("create", "service", "nodeport", "web-np", "-n", NS, "--tcp=81:8080")
    np = client.get("services", "web-np", NS)
    assert np["spec"]["type"] == "NodePort" and 30000 <= np["spec"]["ports"][0]["nodePort"] <= 32767


def test_create_clusterrole_and_clusterrolebinding(kubectl, client):
    kubectl("create", "clusterrole", "pb-nodes", "--verb=get", "--resource=nodes", "--non-resource-url=/healthz")
    rules = client.get("clusterroles", "pb-nodes")["rules"]
    assert rules == [{"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]},
                     {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}], rules
    kubectl("create", "clusterrolebinding", "pb-nodes", "--clusterrole=pb-nodes", "--group=pb-ops")
    crb = client.get("clusterrolebindings", "pb-nodes")
    assert crb["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "pb-ops"}]
    assert kubectl("auth", "can-i", "get", "nodes", "--as=someone", "--as-group=pb-ops").stdout.strip() == "yes"


def test_drain_cordons_evicts_and_the_deployment_moves_to_the_other_node(kubectl, client):
    pods = [p for p in _pods_of(client, "web") if p["spec"].get("nodeName")]
    assert len(pods) == 2, pods        # made by test_create_deployment_and_services
    node = pods[0]["spec"]["nodeName"]
    other = [n for n in NODES if n != node][0]
    gone = {p["metadata"]["uid"] for p in pods if p["spec"]["nodeName"] == node}
    proc = kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=100s", "-v=6")
    out = proc.stdout + proc.stderr
    assert "node/%s drained" % node in out, out
    evictions = re.findall(r"POST \S+/api/v1/namespaces/%s/pods/(\S+)/eviction 201" % NS, out)
    assert sorted(evictions) == sorted(p["metadata"]["name"] for p in pods if p["spec"]["nodeName"] == node), out
    assert client.get("nodes", node)["spec"]["unschedulable"] is True
    left = [p for p in client.list("pods", NS)["items"] if p["metadata"]["uid"] in gone]
    assert left == [], left                   # drain waited for them to be gone

    def moved():
        now = [p for p in _pods_of(client, "web") if not p["metadata"].get("deletionTimestamp")]
        return len(now) == 2 and all(p["spec"].get("nodeName") == other and p["status"].get("phase") == "Running"
                                     for p in now)
    wait_for("the deployment's 2 pods Running on %s" % other, moved, 90, interval=0.5)
    kubectl("uncordon", node)
    assert not client.get("nodes", node)["spec"].get("unschedulable")

    # Without evictions drain deletes each pod, with a protobuf DeleteOptions body (the grace period).
    on_other = {p["metadata"]["uid"] for p in _pods_of(client, "web")}
    proc = kubectl("drain", other, "--ignore-daemonsets", "--disable-eviction", "--grace-period=3",
                   "--timeout=100s", "-v=6")
    out = proc.stdout + proc.stderr
    assert len(re.findall(r"DELETE \S+/api/v1/namespaces/%s/pods/\S+ 200" % NS, out)) == 2, out
    assert not [p for p in client.list("pods", NS)["items"] if p["metadata"]["uid"] in on_other]

    def back():
        now = [p for p in _pods_of(client, "web") if not p["metadata"].get("deletionTimestamp")]
        return len(now) == 2 and all(p["spec"].get("nodeName") == node for p in now)
    wait_for("the deployment's 2 pods back on %s" % node, back, 90, interval=0.5)
    kubectl("uncordon", other)


def test_evicting_a_pod_that_is_gone_is_404_and_a_mismatched_name_400(pb_cluster, client):
    import requests
    url = pb_cluster.url(pb_cluster.ids[0]) + "/api/v1/namespaces/%s/pods/%s/eviction"
    headers = {"Authorization": "Bearer " + pb_cluster.lc.token()}
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "nope", "namespace": NS}}
    resp = requests.post(url % (NS, "nope"), json=body, headers=headers, verify=pb_cluster.lc.ca_file, timeout=10)
    assert resp.status_code == 404, resp.text
    victim = _pods_of(client, "web")[0]["metadata"]["name"]
    resp = requests.post(url % (NS, victim), json=body, headers=headers, verify=pb_cluster.lc.ca_file, timeout=10)
    assert resp.status_code == 400 and "names pod 'nope'" in resp.json()["message"], resp.text
    assert not client.get("pods", victim, NS)["metadata"].get("deletionTimestamp")
