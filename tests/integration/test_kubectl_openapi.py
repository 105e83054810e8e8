"""Real kubectl 1.32 against a `shepherd-ha local up` cluster through the DIR/kubeconfig it
wrote (HTTPS, the admin's token: kubectl_kit.py): explain (OpenAPI v3), create -f with
validation on, create namespace / configmap / secret generic (protobuf request bodies),
and get of more than 500 objects (kubectl pages with limit=500 and follows
metadata.continue). Each test reads back what the server holds."""
import json

import pytest

from .helpers import expect

pytestmark = pytest.mark.integration
NS = "kubectl-openapi"


@pytest.fixture(scope="module")
def kubectl(kube):
    kube.ensure_namespace(NS)
    return kube.kubectl_for(NS)


def test_explain_a_field_and_recursive(kubectl, kube):
    out = kubectl("explain", "pods.spec.containers").stdout
    assert "KIND:" in out and "Pod" in out and "FIELD: containers <[]Object>" in out, out
    assert "image\t<string>" in out and "ports\t<[]Object>" in out, out
    assert "The containers of the pod" in out, out
    deep = kubectl("explain", "deployment", "--recursive").stdout
    assert "GROUP:      apps" in deep and "VERSION:    v1" in deep, deep
    for field in ("replicas\t<integer>", "maxSurge\t<IntOrString>", "containerPort\t<integer>",
                  "matchLabels\t<map[string]string>"):
        assert field in deep, (field, deep)


def test_create_with_validation_on(kubectl, kube):
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "validated"}, "data": {"k": "v"}}
    run = kubectl("create", "-f", "-", input=json.dumps(manifest), check=False)
    assert run.returncode == 0, run.stderr
    assert expect(kube.api("GET", "/api/v1/namespaces/%s/configmaps/validated" % NS), 200)["data"] == {"k": "v"}
    bad = dict(manifest, metadata={"name": "typo"}, dataa={"k": "v"})
    run = kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert run.returncode != 0 and 'unknown field "dataa"' in run.stderr, run.stderr
    assert kube.api("GET", "/api/v1/namespaces/%s/configmaps/typo" % NS).status_code == 404


def test_create_namespace_and_configmap(kubectl, kube):
    kubectl("create", "namespace", "made-by-kubectl")
    assert expect(kube.api("GET", "/api/v1/namespaces/made-by-kubectl"), 200)["metadata"]["name"] == \
        "made-by-kubectl"
    kubectl("create", "configmap", "literal", "--from-literal=a=b", "--from-literal=c=d e")
    cm = expect(kube.api("GET", "/api/v1/namespaces/%s/configmaps/literal" % NS), 200)
    assert cm["data"] == {"a": "b", "c": "d e"}
    kubectl("create", "secret", "generic", "sec", "--from-literal=p=q")
    secret = expect(kube.api("GET", "/api/v1/namespaces/%s/secrets/sec" % NS), 200)
    assert secret["data"] == {"p": "cQ=="}


def test_get_of_more_than_500_objects_follows_continue(kubectl, kube):
    expect(kube.api("POST", "/api/v1/namespaces", json={"metadata": {"name": "many"}}), 201)
    for i in range(520):
        expect(kube.api("POST", "/api/v1/namespaces/many/configmaps",
                        json={"metadata": {"name": "cm-%04d" % i}}), 201)
    proc = kubectl("get", "configmaps", "-n", "many", "-v=6")
    listed = [line.split()[0] for line in proc.stdout.splitlines()[1:]]
    assert listed == ["cm-%04d" % i for i in range(520)]
    requests = [line for line in proc.stderr.splitlines() if "GET " in line and "/configmaps" in line]
    assert len(requests) == 2 and "limit=500" in requests[0] and "continue=" in requests[1], requests
    names = kubectl("get", "configmaps", "-n", "many", "--chunk-size=100", "-o", "name").stdout.split()
    assert len(names) == 520 and len(set(names)) == 520
