"""The protobuf bodies the real kubectl 1.32 sends (captured once by
scripts/capture_kubectl_protobuf.py into tests/unit/data/kubectl_protobuf/): each
decodes to the object kubectl itself prints as JSON for the same command
(--dry-run=client -o json, captured beside it), and the API serves each."""
import json
import os

import pytest

from shepherd_ha.api.protobuf_bodies import MEDIA_TYPE, decode
from real_api import flask_client as api_client

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "kubectl_protobuf")
CREATED = ["deployment", "service_clusterip", "service_nodeport", "role", "rolebinding", "clusterrole",
           "clusterrolebinding"]
# kubectl auth can-i create pods / auth can-i --list (no JSON form to compare with: written out here).
# Their status fields have no omitempty, so Go's JSON would carry allowed/incomplete false too;
# the nil rule lists would be JSON null (absent here).
REVIEWS = {
    "selfsubjectaccessreview": {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                                "metadata": {}, "status": {"allowed": False},
                                "spec": {"resourceAttributes": {"namespace": "default", "verb": "create",
                                                                "resource": "pods"}}},
    "selfsubjectrulesreview": {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                               "metadata": {}, "spec": {"namespace": "default"},
                               "status": {"incomplete": False}},
}


def raw(name):
    with open(os.path.join(DATA, name + ".bin"), "rb") as fh:
        return fh.read()


def without_nulls(value):
    """Go's JSON writes a zero Time as null; the decoder leaves it out (the same object)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


@pytest.mark.parametrize("name", CREATED)
def test_kubectls_protobuf_body_is_the_object_it_prints_as_json(name):
    with open(os.path.join(DATA, name + ".json")) as fh:
        expected = without_nulls(json.load(fh))
    assert decode(raw(name)) == expected


@pytest.mark.parametrize("name", sorted(REVIEWS))
def test_kubectls_access_reviews(name):
    assert decode(raw(name)) == REVIEWS[name]


def post(client, path, body):
    return client.post(path, data=body, headers={"Content-Type": MEDIA_TYPE,
                                                 "Accept": MEDIA_TYPE + ",application/json"})


def test_the_api_serves_every_captured_body():
    client, _ = api_client()
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    for name, path in (("deployment", "/apis/apps/v1/namespaces/default/deployments"),
                       ("service_clusterip", "/api/v1/namespaces/default/services"),
                       ("service_nodeport", "/api/v1/namespaces/default/services"),
                       ("role", rbac + "/namespaces/default/roles"),
                       ("rolebinding", rbac + "/namespaces/default/rolebindings"),
                       ("clusterrole", rbac + "/clusterroles"),
                       ("clusterrolebinding", rbac + "/clusterrolebindings")):
        resp = post(client, path, raw(name))
        assert resp.status_code == 201, (name, resp.get_json())
    dep = client.get("/apis/apps/v1/namespaces/default/deployments/web").get_json()
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    assert dep["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    svc = client.get("/api/v1/namespaces/default/services/web-np").get_json()
    assert svc["spec"]["type"] == "NodePort" and svc["spec"]["ports"][0]["nodePort"] == 30080
    assert svc["spec"]["ports"][0]["targetPort"] == 8080
    role = client.get(rbac + "/namespaces/default/roles/reader").get_json()
    assert {(tuple(r["apiGroups"]), tuple(r["resources"])) for r in role["rules"]} == {
        (("",), ("pods",)), (("apps",), ("deployments",))}
    binding = client.get(rbac + "/namespaces/default/rolebindings/reader").get_json()
    assert [s["name"] for s in binding["subjects"]] == ["alice", "sa"]
    for name, kind in (("selfsubjectaccessreview", "SelfSubjectAccessReview"),
                       ("selfsubjectrulesreview", "SelfSubjectRulesReview")):
        resp = post(client, "/apis/authorization.k8s.io/v1/%ss" % kind.lower(), raw(name))
        assert resp.status_code == 201 and resp.get_json()["kind"] == kind, resp.get_json()
    assert post(client, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                raw("selfsubjectaccessreview")).get_json()["status"]["allowed"] is True


def test_kubectl_drain_disable_eviction_deletes_with_protobuf_delete_options():
    body = raw("deleteoptions")        # kubectl drain --disable-eviction --grace-period=7
    assert decode(body) == {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 7}
    client, _ = api_client()
    assert client.post("/api/v1/nodes", json={"metadata": {"name": "n1"}}).status_code == 201
    assert client.post("/api/v1/namespaces/default/pods", json={
        "metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "a", "image": "x"}]}}
    ).status_code == 201
    resp = client.delete("/api/v1/namespaces/default/pods/p", data=body, headers={"Content-Type": MEDIA_TYPE})
    assert resp.status_code == 200, resp.get_json()
    pod = client.get("/api/v1/namespaces/default/pods/p").get_json()    # its agent finishes the delete
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 7
