"""kubectl 1.32 itself on the write path (issue 15), against a `shepherd-ha local up`
cluster through the DIR/kubeconfig it wrote (HTTPS, the admin's token: kubectl_kit.py):
apply twice with a change (image, env var, port), patch of all three types, server-side
apply with a conflict, --dry-run=server (create, apply, delete, scale: nothing stored),
set image, rollout restart, cordon and uncordon, an unknown field refused. Each test
reads back what the server holds.

The server side of each command is tested without kubectl, with requests shaped as
kubectl sends them, in tests/integration/test_api_writes.py and tests/unit/test_api_writes.py.
"""
import json

import pytest

from .helpers import expect, wait_for

pytestmark = pytest.mark.integration

NS = "kubectl-writes"


@pytest.fixture(scope="module")
def kubectl(kube):
    kube.ensure_namespace(NS)
    return kube.kubectl_for(NS)


def read(kubectl, plural, name, group="apps/v1"):
    prefix = "/api/v1" if group == "v1" else "/apis/" + group
    namespaced = plural != "nodes"
    path = "%s/namespaces/%s/%s/%s" % (prefix, NS, plural, name) if namespaced else "%s/%s/%s" % (prefix, plural, name)
    return expect(kubectl.kube.api("GET", path), 200)


def manifest(name, image="nginx:1.25", port=80, env=(("A", "1"), ("B", "2")), replicas=0, extra_spec=None):
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": port}],
                                                  "env": [{"name": k, "value": v} for k, v in env]}]}}}
    spec.update(extra_spec or {})
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec})


def container(obj):
    return obj["spec"]["template"]["spec"]["containers"][0]


def managers(obj):
    return {(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields", [])}


def test_apply_twice_with_a_change(kubectl):
    kubectl("apply", "-f", "-", input=manifest("twice"))
    kubectl("apply", "-f", "-", input=manifest("twice", image="nginx:1.26", port=8080,
                                                               env=(("A", "9"),)))
    obj = read(kubectl, "deployments", "twice")
    web = container(obj)
    assert web["image"] == "nginx:1.26"
    assert web["env"] == [{"name": "A", "value": "9"}]                       # B removed
    assert web["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]      # 80 removed
    assert managers(obj) == {("kubectl-client-side-apply", "Update")}
    assert "$setElementOrder" not in json.dumps(obj)


def test_patch_of_all_three_types(kubectl):
    kubectl("apply", "-f", "-", input=manifest("patched"))
    kubectl("patch", "deployment", "patched", "-p",
            json.dumps({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}))
    kubectl("patch", "deployment", "patched", "--type=merge", "-p",
            json.dumps({"metadata": {"labels": {"tier": "front"}}}))
    kubectl("patch", "deployment", "patched", "--type=json", "-p",
            json.dumps([{"op": "replace", "path": "/spec/revisionHistoryLimit", "value": 3}]))
    failed = kubectl("patch", "deployment", "patched", "--type=json", "-p",
                     json.dumps([{"op": "test", "path": "/spec/revisionHistoryLimit", "value": 99}]), check=False)
    assert failed.returncode != 0 and "failed" in failed.stderr
    obj = read(kubectl, "deployments", "patched")
    assert container(obj)["image"] == "nginx:1.27" and container(obj)["env"] == [
        {"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert obj["metadata"]["labels"] == {"tier": "front"} and obj["spec"]["revisionHistoryLimit"] == 3
    assert ("kubectl-patch", "Update") in managers(obj)


def test_server_side_apply_with_a_conflict(kubectl):
    kubectl("apply", "--server-side", "-f", "-", input=manifest("ssa", replicas=1))
    kubectl("scale", "deployment", "ssa", "--replicas=0")
    conflict = kubectl("apply", "--server-side", "-f", "-", input=manifest("ssa", replicas=1),
                       check=False)
    assert conflict.returncode != 0
    assert "conflict" in conflict.stderr and ".spec.replicas" in conflict.stderr, conflict.stderr
    assert read(kubectl, "deployments", "ssa")["spec"]["replicas"] == 0
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
            input=manifest("ssa", replicas=1, image="nginx:1.26"))
    obj = read(kubectl, "deployments", "ssa")
    assert obj["spec"]["replicas"] == 1 and container(obj)["image"] == "nginx:1.26"
    assert ("kubectl", "Apply") in managers(obj)


def test_dry_run_server_stores_nothing(kubectl):
    kubectl("apply", "-f", "-", input=manifest("dry-kept"))
    before = read(kubectl, "deployments", "dry-kept")
    out = kubectl("apply", "--dry-run=server", "-f", "-", input=manifest("dry-ghost")).stdout
    assert "server dry run" in out
    kubectl("apply", "--dry-run=server", "-f", "-", input=manifest("dry-kept", image="nginx:9"))
    kubectl("delete", "deployment", "dry-kept", "--dry-run=server")
    kubectl("scale", "deployment", "dry-kept", "--replicas=4", "--dry-run=server")
    out = kubectl("create", "--dry-run=server", "-f", "-", input=manifest("dry-created")).stdout
    assert out.strip() == "deployment.apps/dry-created created (server dry run)", out
    out = kubectl("create", "configmap", "dry-map", "--from-literal=a=b", "--dry-run=server", "-o", "json").stdout
    assert json.loads(out)["data"] == {"a": "b"}          # the server answered with what it would store
    refused = kubectl("create", "--dry-run=server", "-f", "-", input=manifest("dry-kept"), check=False)
    assert refused.returncode != 0 and "AlreadyExists" in refused.stderr, refused.stderr   # validated for real
    names = {o["metadata"]["name"] for o in kubectl.kube.client.list("deployments", NS)["items"]}
    assert "dry-ghost" not in names and "dry-created" not in names and "dry-kept" in names
    assert kubectl.kube.api("GET", "/api/v1/namespaces/%s/configmaps/dry-map" % NS).status_code == 404
    kept = read(kubectl, "deployments", "dry-kept")
    # The deployment controller may write its status meanwhile: compare what a dry run could have changed.
    assert (kept["metadata"]["uid"], kept["metadata"]["generation"], kept["spec"], kept["metadata"]["managedFields"]) \
        == (before["metadata"]["uid"], before["metadata"]["generation"], before["spec"],
            before["metadata"]["managedFields"])


def test_set_image_and_rollout_restart(kubectl):
    kubectl("apply", "-f", "-", input=manifest("roll"))
    kubectl("set", "image", "deployment/roll", "web=nginx:1.28")
    kubectl("rollout", "restart", "deployment/roll")
    obj = read(kubectl, "deployments", "roll")
    assert container(obj)["image"] == "nginx:1.28"
    assert "kubectl.kubernetes.io/restartedAt" in obj["spec"]["template"]["metadata"]["annotations"]
    assert {("kubectl-set", "Update"), ("kubectl-rollout", "Update")} <= managers(obj)


def test_cordon_and_uncordon(kubectl):
    kubectl.kube.client.create("nodes", {"metadata": {"name": "kubectl-node"}})
    kubectl("cordon", "kubectl-node")
    assert read(kubectl, "nodes", "kubectl-node", "v1")["spec"]["unschedulable"] is True
    kubectl("uncordon", "kubectl-node")
    assert read(kubectl, "nodes", "kubectl-node", "v1")["spec"]["unschedulable"] is False


def test_an_unknown_field_is_refused_and_nothing_stored(kubectl):
    bad = manifest("typo", extra_spec={"replicaz": 2})
    refused = kubectl("apply", "-f", "-", input=bad, check=False)
    assert refused.returncode != 0 and 'unknown field "spec.replicaz"' in refused.stderr, refused.stderr
    assert kubectl.kube.api("GET", "/apis/apps/v1/namespaces/%s/deployments/typo" % NS).status_code == 404


def test_namespace_deletion_waits_for_its_contents(kubectl):
    """kubectl delete namespace: Terminating while a finalizer holds content, nothing new
    gets in (kubectl prints the server's reason), and the default wait returns once the
    namespace is gone; the built-in namespaces cannot be deleted."""
    kube = kubectl.kube
    ns = "kubectl-ns-lifecycle"
    kube.ensure_namespace(ns)
    run = kube.kubectl_for(ns)
    run("create", "deployment", "web", "--image", "nginx:1.25", "--replicas", "2")
    held = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "held", "finalizers": ["example.com/hold"]}, "data": {"a": "b"}}
    run("apply", "-f", "-", input=json.dumps(held))

    out = kube.kubectl("delete", "namespace", ns, "--wait=false").stdout
    assert out.strip() == 'namespace "%s" deleted' % ns
    assert kube.kubectl("get", "namespace", ns, "-o", "jsonpath={.status.phase}").stdout == "Terminating"
    refused = run("create", "configmap", "late", "--from-literal=a=b", check=False)
    assert refused.returncode != 0
    assert "unable to create new content in namespace %s because it is being terminated" % ns in refused.stderr

    def finalizers_reported():
        ns_obj = json.loads(kube.kubectl("get", "namespace", ns, "-o", "json").stdout)
        conditions = {c["type"]: c for c in ns_obj["status"].get("conditions") or []}
        return conditions.get("NamespaceFinalizersRemaining", {}).get("status") == "True" and conditions
    conditions = wait_for("the namespace's conditions name the finalizer", finalizers_reported, 30)
    assert "example.com/hold in 1 resource instances" in conditions["NamespaceFinalizersRemaining"]["message"]
    assert run("get", "deployments", "-o", "name").stdout == "", "the rest went at once"

    again = kube.kubectl("delete", "namespace", ns, check=False)     # Kubernetes' answer while it empties
    assert again.returncode != 0 and "The system is ensuring all content is removed from this namespace" \
        in again.stderr

    waiting = kube.popen("wait", "--for=delete", "namespace/" + ns, "--timeout=60s")
    run("patch", "configmap", "held", "--type=merge", "-p", '{"metadata": {"finalizers": null}}')
    out, err = waiting.communicate(timeout=90)
    assert waiting.returncode == 0, err
    expect(kube.api("GET", "/api/v1/namespaces/" + ns), 404)

    # Without --wait=false kubectl returns once the namespace is gone.
    kube.ensure_namespace(ns + "-2")
    kube.kubectl_for(ns + "-2")("create", "configmap", "c", "--from-literal=a=b")
    assert kube.kubectl("delete", "namespace", ns + "-2").returncode == 0
    expect(kube.api("GET", "/api/v1/namespaces/%s-2" % ns), 404)

    refused = kube.kubectl("delete", "namespace", "default", check=False)
    assert refused.returncode != 0 and 'namespaces "default" is forbidden: this namespace may not be deleted' \
        in refused.stderr
