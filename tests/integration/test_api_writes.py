"""kubectl's write path against real replica processes, over real HTTP, with requests
shaped as kubectl 1.32 sends them: strategic merge, JSON and merge patches, server-side
apply with conflicts, dryRun=All (nothing reaches the Raft log: the store's revision
does not move and nothing can be read back), fieldValidation=Strict (nothing stored)."""
import json
import time

import pytest

from .helpers import (assert_no_internal_errors, assert_status, call, collection_revision, describe,
                      ensure_namespace, expect)

pytestmark = pytest.mark.integration

NS = "writes"
DEPLOYMENTS = "/apis/apps/v1/namespaces/%s/deployments" % NS
CONFIGMAPS = "/api/v1/namespaces/%s/configmaps" % NS
KUBECTL = {"User-Agent": "kubectl/v1.32.0 (linux/amd64) kubernetes/70d3cc9"}
SMP = dict(KUBECTL, **{"Content-Type": "application/strategic-merge-patch+json"})
APPLY = dict(KUBECTL, **{"Content-Type": "application/apply-patch+yaml"})
JSON_PATCH = dict(KUBECTL, **{"Content-Type": "application/json-patch+json"})


def web(name, image="nginx:1.25", replicas=0):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": image,
                                                           "ports": [{"containerPort": 80}]}]}}}}


@pytest.fixture(scope="module")
def urls(cluster):
    urls = [cluster.url(i) for i in cluster.ids]
    ensure_namespace(urls[0], NS)
    yield urls
    assert_no_internal_errors(cluster)


def quiet_revision(url, timeout=15.0):
    """The store's revision once it has not moved for a second (controllers settle)."""
    deadline = time.monotonic() + timeout
    last = collection_revision(url, "/api/v1/namespaces")[0]
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = collection_revision(url, "/api/v1/namespaces")[0]
        if now == last:
            return now
        last = now
    raise AssertionError("the store kept moving for %.0f s" % timeout)


def test_strategic_merge_patch_from_another_replica(urls):
    expect(call("POST", urls[0] + DEPLOYMENTS + "?fieldManager=kubectl-client-side-apply&fieldValidation=Strict",
                json=web("smp"), headers=KUBECTL), 201)
    body = {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "web"}],
                                           "containers": [{"name": "web", "image": "nginx:1.26"}]}}}}
    obj = expect(call("PATCH", urls[1] + DEPLOYMENTS + "/smp?fieldManager=kubectl-client-side-apply"
                      "&fieldValidation=Strict", data=json.dumps(body), headers=SMP), 200)
    container = obj["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nginx:1.26" and container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    read = expect(call("GET", urls[2] + DEPLOYMENTS + "/smp"), 200)
    assert "$setElementOrder" not in json.dumps(read)
    assert {e["manager"] for e in read["metadata"]["managedFields"]} == {"kubectl-client-side-apply"}


def test_json_patch_and_its_failed_test(urls):
    expect(call("POST", urls[0] + DEPLOYMENTS, json=web("jp")), 201)
    ops = [{"op": "test", "path": "/spec/replicas", "value": 0}, {"op": "replace", "path": "/spec/replicas", "value": 0},
           {"op": "add", "path": "/metadata/labels", "value": {"tier": "front"}}]
    obj = expect(call("PATCH", urls[1] + DEPLOYMENTS + "/jp", data=json.dumps(ops), headers=JSON_PATCH), 200)
    assert obj["metadata"]["labels"] == {"tier": "front"}
    failed = call("PATCH", urls[1] + DEPLOYMENTS + "/jp", headers=JSON_PATCH,
                  data=json.dumps([{"op": "test", "path": "/spec/replicas", "value": 9},
                                   {"op": "add", "path": "/metadata/labels/x", "value": "y"}]))
    assert_status(failed, 422)
    assert "x" not in expect(call("GET", urls[2] + DEPLOYMENTS + "/jp"), 200)["metadata"]["labels"]


def test_server_side_apply_conflict_and_force(urls):
    url = urls[0] + DEPLOYMENTS + "/ssa"
    config = json.dumps(web("ssa", replicas=1))
    assert_status(call("PATCH", url, data=config, headers=APPLY), 422, "Invalid")
    created = call("PATCH", url + "?fieldManager=kubectl&fieldValidation=Strict&force=false", data=config,
                   headers=APPLY)
    assert created.status_code == 201, describe(created)
    expect(call("PATCH", urls[1] + DEPLOYMENTS + "/ssa/scale?fieldManager=kubectl-scale",
                headers={"Content-Type": "application/merge-patch+json"}, json={"spec": {"replicas": 0}}), 200)
    conflict = assert_status(call("PATCH", urls[2] + DEPLOYMENTS + "/ssa?fieldManager=kubectl&force=false",
                                  data=config, headers=APPLY), 409, "Conflict")
    assert conflict["details"]["causes"] == [{"reason": "FieldManagerConflict", "field": ".spec.replicas",
                                              "message": 'conflict with "kubectl-scale" with subresource "scale" using apps/v1'}]
    forced = expect(call("PATCH", urls[2] + DEPLOYMENTS + "/ssa?fieldManager=kubectl&force=true",
                         data=config, headers=APPLY), 200)
    assert forced["spec"]["replicas"] == 1
    assert [e["manager"] for e in forced["metadata"]["managedFields"]] == ["kubectl"]


def test_dry_run_reaches_no_store(urls):
    expect(call("POST", urls[0] + CONFIGMAPS, json={"metadata": {"name": "kept"}, "data": {"a": "1"}}), 201)
    before = quiet_revision(urls[0])
    created = expect(call("POST", urls[1] + CONFIGMAPS + "?dryRun=All&fieldManager=kubectl-client-side-apply"
                          "&fieldValidation=Strict", json={"metadata": {"name": "ghost"}, "data": {"a": "1"}},
                          headers=KUBECTL), 201)
    assert created["metadata"]["uid"] and created["metadata"]["creationTimestamp"]
    expect(call("PATCH", urls[2] + CONFIGMAPS + "/kept?dryRun=All", headers=SMP, data='{"data":{"a":"2"}}'), 200)
    expect(call("PATCH", urls[2] + CONFIGMAPS + "/kept?dryRun=All&fieldManager=kubectl", headers=APPLY,
                data="metadata: {name: kept}\ndata: {b: '3'}\n"), 200)
    expect(call("PUT", urls[0] + CONFIGMAPS + "/kept?dryRun=All",
                json={"metadata": {"name": "kept"}, "data": {"c": "4"}}), 200)
    expect(call("DELETE", urls[1] + CONFIGMAPS + "/kept", headers=KUBECTL,
                json={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
                      "dryRun": ["All"]}), 200)
    assert_status(call("POST", urls[1] + CONFIGMAPS + "?dryRun=Nope", json={"metadata": {"name": "x"}}), 422)
    for url in urls:
        assert collection_revision(url, "/api/v1/namespaces")[0] == before
        assert_status(call("GET", url + CONFIGMAPS + "/ghost"), 404)
        assert expect(call("GET", url + CONFIGMAPS + "/kept"), 200)["data"] == {"a": "1"}


def test_strict_unknown_field_is_refused_and_nothing_stored(urls):
    body = {"metadata": {"name": "typo"}, "data": {"a": "1"}, "dta": {"b": "2"}}
    refused = assert_status(call("POST", urls[0] + CONFIGMAPS + "?fieldValidation=Strict", json=body), 400,
                            "BadRequest")
    assert refused["details"]["causes"][0]["field"] == "dta"
    assert_status(call("GET", urls[1] + CONFIGMAPS + "/typo"), 404)
    warned = call("POST", urls[0] + CONFIGMAPS + "?fieldValidation=Warn", json=body)
    assert warned.status_code == 201, describe(warned)
    assert warned.headers.get("Warning") == '299 - "unknown field \\"dta\\""'
    assert "dta" not in expect(call("GET", urls[2] + CONFIGMAPS + "/typo"), 200)
