"""pods/eviction (api/eviction.py): a graceful delete with the Eviction's deleteOptions,
authorized as `create pods/eviction`, with 4xx for what does not fit."""
from protobuf_encoder import encode
from real_api import bearer, flask_client

from shepherd_ha.api.protobuf_bodies import MEDIA_TYPE

PODS = "/api/v1/namespaces/default/pods"


def setup(client, name="p", node="n1"):
    if node:
        client.post("/api/v1/nodes", json={"metadata": {"name": node}}, headers=bearer("admin"))
    resp = client.post(PODS, headers=bearer("admin"), json={
        "metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"name": "a", "image": "x"}]}})
    assert resp.status_code == 201, resp.get_json()
    return resp.get_json()


def eviction(name="p", **extra):
    return dict({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}},
                **extra)


def client_with_users():
    client, _ = flask_client(users={"admin": ["system:masters"], "nobody": []})
    return client


def test_an_eviction_deletes_the_pod_gracefully_with_its_options_and_answers_201_success():
    client = client_with_users()
    pod = setup(client)
    resp = client.post(PODS + "/p/eviction", headers=bearer("admin"),
                       json=eviction(deleteOptions={"gracePeriodSeconds": 4,
                                                    "preconditions": {"uid": pod["metadata"]["uid"]}}))
    assert resp.status_code == 201 and resp.get_json()["status"] == "Success", resp.get_json()
    meta = client.get(PODS + "/p", headers=bearer("admin")).get_json()["metadata"]
    assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 4   # the agent finishes it


def test_a_protobuf_eviction_and_an_unbound_pod_is_gone_at_once():
    client = client_with_users()
    setup(client, node=None)
    body = encode("policy.Eviction", eviction(deleteOptions={"gracePeriodSeconds": 0}))
    resp = client.post(PODS + "/p/eviction", data=body, headers=bearer("admin", **{"Content-Type": MEDIA_TYPE}))
    assert resp.status_code == 201, resp.get_json()
    assert client.get(PODS + "/p", headers=bearer("admin")).status_code == 404


def test_dry_run_and_a_stale_precondition_leave_the_pod_alone():
    client = client_with_users()
    setup(client)
    resp = client.post(PODS + "/p/eviction", headers=bearer("admin"), json=eviction(deleteOptions={"dryRun": ["All"]}))
    assert resp.status_code == 201, resp.get_json()
    resp = client.post(PODS + "/p/eviction", headers=bearer("admin"),
                       json=eviction(deleteOptions={"preconditions": {"uid": "someone-else"}}))
    assert resp.status_code == 409, resp.get_json()
    assert "deletionTimestamp" not in client.get(PODS + "/p", headers=bearer("admin")).get_json()["metadata"]


def test_bad_evictions_are_4xx_naming_the_problem():
    client = client_with_users()
    setup(client)
    for body, code, words in ((eviction("other"), 400, "names pod 'other'"),
                              (dict(eviction(), kind="Pod"), 400, "takes a policy/v1 Eviction"),
                              (eviction(deleteOptions=[1]), 400, "deleteOptions must be an object"),
                              (eviction(deleteOptions={"propagationPolicy": "Sideways"}), 400, "Sideways")):
        resp = client.post(PODS + "/p/eviction", headers=bearer("admin"), json=body)
        assert resp.status_code == code and words in resp.get_json()["message"], (body, resp.get_json())
    resp = client.post(PODS + "/gone/eviction", headers=bearer("admin"), json=eviction("gone"))
    assert resp.status_code == 404
    assert client.get(PODS + "/p/eviction", headers=bearer("admin")).status_code == 405
    assert "deletionTimestamp" not in client.get(PODS + "/p", headers=bearer("admin")).get_json()["metadata"]


def test_an_eviction_needs_create_on_pods_eviction():
    client = client_with_users()
    setup(client)
    resp = client.post(PODS + "/p/eviction", headers=bearer("nobody"), json=eviction())
    assert resp.status_code == 403 and 'cannot create resource "pods/eviction"' in resp.get_json()["message"]
    assert "deletionTimestamp" not in client.get(PODS + "/p", headers=bearer("admin")).get_json()["metadata"]
