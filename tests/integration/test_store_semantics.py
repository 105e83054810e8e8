"""Store semantics through the API: idempotency, generation, resourceVersion, subresources,
preconditions and namespace deletion."""
import threading
import uuid

import pytest

from .helpers import (POD, PODS, assert_no_internal_errors, assert_status, call, deployment, describe,
                      ensure_namespace, expect, pod, service, unique, wait_for)

pytestmark = pytest.mark.integration

MERGE = {"Content-Type": "application/merge-patch+json"}
DEPLOYMENTS = "/apis/apps/v1/namespaces/{ns}/deployments"


@pytest.fixture(scope="module")
def urls(cluster):
    return [cluster.url(i) for i in cluster.ids]


@pytest.fixture
def ns(urls):
    name = unique("sem")
    ensure_namespace(urls[0], name)
    return name


def rv(obj):
    return int(obj["metadata"]["resourceVersion"])


def gen(obj):
    return obj["metadata"]["generation"]


# ---- idempotency ----

def test_same_idempotency_key_creates_once(urls, ns):
    key = uuid.uuid4().hex
    body = pod("idem", {"a": "1"})
    first = call("POST", urls[0] + PODS.format(ns=ns), json=body, headers={"Idempotency-Key": key})
    second = call("POST", urls[1] + PODS.format(ns=ns), json=body, headers={"Idempotency-Key": key})
    assert first.status_code == 201, describe(first)
    assert second.status_code == 201, "a retry with the same key must return the first outcome: %s" % describe(second)
    assert second.json()["metadata"]["uid"] == first.json()["metadata"]["uid"]
    assert second.json()["metadata"]["resourceVersion"] == first.json()["metadata"]["resourceVersion"]
    items = expect(call("GET", urls[2] + PODS.format(ns=ns)), 200)["items"]
    assert [o["metadata"]["name"] for o in items] == ["idem"]

    other = call("POST", urls[0] + PODS.format(ns=ns), json=body, headers={"Idempotency-Key": uuid.uuid4().hex})
    assert_status(other, 409, "AlreadyExists")


def test_same_idempotency_key_deletes_once(urls, ns):
    created = expect(call("POST", urls[0] + PODS.format(ns=ns), json=pod("gone")), 201)
    key = uuid.uuid4().hex
    first = call("DELETE", urls[1] + POD.format(ns=ns, name="gone"), headers={"Idempotency-Key": key})
    again = call("DELETE", urls[2] + POD.format(ns=ns, name="gone"), headers={"Idempotency-Key": key})
    assert first.status_code == 200, describe(first)
    assert again.status_code == 200, "retried delete with the same key: %s" % describe(again)
    assert again.json()["metadata"]["uid"] == created["metadata"]["uid"]
    assert_status(call("DELETE", urls[0] + POD.format(ns=ns, name="gone")), 404, "NotFound")


# Updates (PATCH, PUT) of one object go through the replica that made its previous write:
# an update's first read is the replica's local state, and an update on another replica
# right after a write can miss it (a bug of its own, tested in test_linearizability.py).

# ---- generation and resourceVersion ----

def test_generation_follows_spec_and_resource_version_every_write(urls, ns):
    path = POD.format(ns=ns, name="g")
    created = expect(call("POST", urls[0] + PODS.format(ns=ns), json=pod("g", {"a": "1"})), 201)
    assert gen(created) == 1
    assert created["metadata"]["creationTimestamp"].endswith("Z") and created["metadata"]["uid"]

    labelled = expect(call("PATCH", urls[0] + path, headers=MERGE, json={"metadata": {"labels": {"a": "2"}}}), 200)
    assert gen(labelled) == 1, "label-only change bumped generation"
    assert rv(labelled) > rv(created)

    status = expect(call("PATCH", urls[0] + path + "/status", headers=MERGE,
                         json={"status": {"phase": "Running"}}), 200)
    assert gen(status) == 1, "status-only change bumped generation"
    assert rv(status) > rv(labelled)

    current = expect(call("GET", urls[1] + path), 200)
    current["spec"]["containers"][0]["image"] = "nginx:1.26"
    respec = expect(call("PUT", urls[0] + path, json=current), 200)
    assert gen(respec) == 2, "spec change did not bump generation"
    assert rv(respec) > rv(status)

    annotated = expect(call("PATCH", urls[0] + path, headers=MERGE,
                            json={"metadata": {"annotations": {"note": "x"}}}), 200)
    assert gen(annotated) == 2 and rv(annotated) > rv(respec)

    # No-op writes change nothing, not even the resourceVersion.
    current = expect(call("GET", urls[2] + path), 200)
    same = expect(call("PUT", urls[0] + path, json=current), 200)
    assert same == current, "no-op PUT changed the object"
    same = expect(call("PATCH", urls[0] + path, headers=MERGE, json={"metadata": {"labels": {"a": "2"}}}), 200)
    assert same == current, "no-op PATCH changed the object"
    same = expect(call("PATCH", urls[0] + path, headers=MERGE, json={}), 200)
    assert same == current
    assert expect(call("GET", urls[1] + path), 200) == current


def test_deployment_generation(urls, ns):
    path = DEPLOYMENTS.format(ns=ns) + "/web"
    created = expect(call("POST", urls[0] + DEPLOYMENTS.format(ns=ns), json=deployment("web", replicas=1)), 201)
    assert gen(created) == 1
    scaled = expect(call("PATCH", urls[0] + path, headers=MERGE, json={"spec": {"replicas": 3}}), 200)
    assert gen(scaled) == 2
    labelled = expect(call("PATCH", urls[0] + path, headers=MERGE, json={"metadata": {"labels": {"x": "y"}}}), 200)
    assert gen(labelled) == 2
    # The deployment controller writes this deployment too (revision annotation, status):
    # a status PUT made with a version it has since replaced is rightly a 409; read again.
    current = labelled
    for _ in range(20):
        resp = call("PUT", urls[0] + path + "/status", json=dict(current, status={"replicas": 3, "readyReplicas": 1}))
        if resp.status_code != 409:
            break
        current = expect(call("GET", urls[0] + path), 200)
    status = expect(resp, 200)
    assert gen(status) == 2 and status["status"] == {"replicas": 3, "readyReplicas": 1}
    assert rv(created) < rv(scaled) < rv(labelled) < rv(status)


def test_server_owned_metadata_cannot_be_set(urls, ns):
    body = pod("owned")
    body["metadata"].update(uid="not-a-real-uid", generation=7, resourceVersion="999999",
                            creationTimestamp="1999-01-01T00:00:00Z")
    created = expect(call("POST", urls[0] + PODS.format(ns=ns), json=body), 201)
    assert created["metadata"]["uid"] != "not-a-real-uid"
    assert created["metadata"]["generation"] == 1
    assert created["metadata"]["creationTimestamp"] != "1999-01-01T00:00:00Z"
    assert rv(created) < 999999
    update = dict(created, metadata=dict(created["metadata"], uid="other", generation=42,
                                         creationTimestamp="2000-01-01T00:00:00Z", labels={"l": "1"}))
    updated = expect(call("PUT", urls[0] + POD.format(ns=ns, name="owned"), json=update), 200)
    for field in ("uid", "generation", "creationTimestamp"):
        assert updated["metadata"][field] == created["metadata"][field], field
    assert updated["metadata"]["labels"] == {"l": "1"}


# ---- status subresource ----

def test_status_writes_change_only_status_and_main_writes_keep_status(urls, ns):
    path = POD.format(ns=ns, name="st")
    created = expect(call("POST", urls[0] + PODS.format(ns=ns), json=pod("st", {"a": "1"})), 201)
    assert created["status"] == {"phase": "Pending"}

    attempt = dict(created, metadata=dict(created["metadata"], labels={"a": "changed"}),
                   spec=dict(created["spec"], activeDeadlineSeconds=99), status={"phase": "Running"})
    after_status = expect(call("PUT", urls[0] + path + "/status", json=attempt), 200)
    assert after_status["status"] == {"phase": "Running"}
    assert after_status["metadata"]["labels"] == {"a": "1"}, "status write changed labels"
    assert after_status["spec"] == created["spec"], "status write changed spec"

    attempt = dict(after_status, metadata=dict(after_status["metadata"], labels={"a": "2"}),
                   status={"phase": "Failed"})
    after_main = expect(call("PUT", urls[0] + path, json=attempt), 200)
    assert after_main["metadata"]["labels"] == {"a": "2"}
    assert after_main["status"] == {"phase": "Running"}, "PUT on the main resource changed status"

    patched = expect(call("PATCH", urls[0] + path, headers=MERGE, json={"status": {"phase": "Succeeded"},
                                                                        "metadata": {"labels": {"b": "3"}}}), 200)
    assert patched["status"] == {"phase": "Running"}, "PATCH on the main resource changed status"
    assert patched["metadata"]["labels"] == {"a": "2", "b": "3"}
    assert expect(call("GET", urls[1] + path), 200) == patched


# ---- merge patch ----

def test_merge_patch_null_removes_a_label(urls, ns):
    path = POD.format(ns=ns, name="mp")
    expect(call("POST", urls[0] + PODS.format(ns=ns), json=pod("mp", {"a": "1", "b": "2"})), 201)
    patched = expect(call("PATCH", urls[0] + path, headers=MERGE, json={"metadata": {"labels": {"a": None}}}), 200)
    assert patched["metadata"]["labels"] == {"b": "2"}
    # application/json is accepted as a merge patch too
    patched = expect(call("PATCH", urls[0] + path, json={"metadata": {"labels": {"b": None, "c": "3"}}}), 200)
    assert patched["metadata"]["labels"] == {"c": "3"}
    for url in urls:
        assert expect(call("GET", url + path), 200)["metadata"]["labels"] == {"c": "3"}


# ---- scale subresource ----

def test_scale_subresource(urls, ns):
    base = DEPLOYMENTS.format(ns=ns) + "/sc"
    created = expect(call("POST", urls[0] + DEPLOYMENTS.format(ns=ns), json=deployment("sc", replicas=1)), 201)
    scale = expect(call("GET", urls[1] + base + "/scale"), 200)
    assert scale["kind"] == "Scale"
    assert scale["metadata"]["name"] == "sc" and scale["metadata"]["namespace"] == ns
    assert scale["metadata"]["uid"] == created["metadata"]["uid"]
    assert scale["spec"]["replicas"] == 1

    put = expect(call("PUT", urls[0] + base + "/scale", json={"spec": {"replicas": 4}}), 200)
    assert put["kind"] == "Scale" and put["spec"]["replicas"] == 4
    dep = expect(call("GET", urls[2] + base), 200)
    assert dep["spec"]["replicas"] == 4 and gen(dep) == 2
    assert dep["spec"]["template"] == created["spec"]["template"]

    patched = expect(call("PATCH", urls[0] + base + "/scale", headers=MERGE, json={"spec": {"replicas": 2}}), 200)
    assert patched["spec"]["replicas"] == 2
    dep = expect(call("GET", urls[2] + base), 200)
    assert dep["spec"]["replicas"] == 2 and gen(dep) == 3
    assert expect(call("GET", urls[1] + base + "/scale"), 200)["spec"]["replicas"] == 2

    stale = call("PUT", urls[0] + base + "/scale",
                 json={"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
                       "spec": {"replicas": 9}})
    assert_status(stale, 409, "Conflict")
    assert expect(call("GET", urls[1] + base), 200)["spec"]["replicas"] == 2


# ---- preconditions ----

def test_delete_preconditions(urls, ns):
    path = POD.format(ns=ns, name="pre")
    first = expect(call("POST", urls[0] + PODS.format(ns=ns), json=pod("pre")), 201)
    assert_status(call("DELETE", urls[1] + path, json={"preconditions": {"uid": str(uuid.uuid4())}}),
                  409, "Conflict")
    labelled = expect(call("PATCH", urls[0] + path, headers=MERGE, json={"metadata": {"labels": {"x": "1"}}}), 200)
    assert_status(call("DELETE", urls[2] + path,
                       json={"preconditions": {"resourceVersion": first["metadata"]["resourceVersion"]}}),
                  409, "Conflict")
    assert expect(call("GET", urls[0] + path), 200) == labelled

    gone = expect(call("DELETE", urls[0] + path, json={"preconditions": {
        "uid": first["metadata"]["uid"], "resourceVersion": labelled["metadata"]["resourceVersion"]}}), 200)
    assert rv(gone) > rv(labelled)
    again = expect(call("POST", urls[1] + PODS.format(ns=ns), json=pod("pre")), 201)
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    # the old uid no longer matches the re-created object
    assert_status(call("DELETE", urls[2] + path, json={"preconditions": {"uid": first["metadata"]["uid"]}}),
                  409, "Conflict")
    expect(call("GET", urls[0] + path), 200)


def test_put_with_stale_resource_version_conflicts(urls, ns):
    path = POD.format(ns=ns, name="cas")
    first = expect(call("POST", urls[0] + PODS.format(ns=ns), json=pod("cas")), 201)
    second = expect(call("PUT", urls[0] + path, json=dict(first, metadata=dict(first["metadata"],
                                                                               labels={"v": "2"}))), 200)
    stale = call("PUT", urls[0] + path, json=dict(first, metadata=dict(first["metadata"], labels={"v": "3"})))
    assert_status(stale, 409, "Conflict")
    for url in urls:
        assert expect(call("GET", url + path), 200) == second


def test_concurrent_patches_without_preconditions_all_apply(urls, ns):
    """Merge patches that carry no resourceVersion must not fail with a lost-update Conflict:
    the server re-reads and retries (the client sent no precondition to be stale)."""
    path = POD.format(ns=ns, name="hot")
    expect(call("POST", urls[0] + PODS.format(ns=ns), json=pod("hot")), 201)
    for url in urls:      # every replica has applied the create before the patches start
        expect(call("GET", url + path), 200)
    writers, rounds = 8, 8
    failures, lock = [], threading.Lock()

    def patch(k):
        for j in range(rounds):
            resp = call("PATCH", urls[k % 3] + path, headers=MERGE,
                        json={"metadata": {"labels": {"w%d" % k: str(j)}}})
            if resp.status_code != 200:
                with lock:
                    failures.append(describe(resp))
    threads = [threading.Thread(target=patch, args=(k,), daemon=True) for k in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30.0)
    assert not any(t.is_alive() for t in threads)
    assert not failures, "%d of %d concurrent merge patches failed, e.g. %s" % (
        len(failures), writers * rounds, failures[0])
    labels = expect(call("GET", urls[1] + path), 200)["metadata"]["labels"]
    assert labels == {"w%d" % k: str(rounds - 1) for k in range(writers)}


# ---- namespace deletion ----

def test_deleting_a_namespace_deletes_its_objects_and_names_can_be_reused(urls):
    ns = unique("nsdel")
    keep = unique("nskeep")
    ensure_namespace(urls[0], ns)
    ensure_namespace(urls[0], keep)
    made = {}
    for path, body in ((PODS.format(ns=ns), pod("a")), (PODS.format(ns=ns), pod("b")),
                       ("/api/v1/namespaces/%s/services" % ns, service("svc")),
                       (DEPLOYMENTS.format(ns=ns), deployment("dep"))):
        made[(path, body["metadata"]["name"])] = expect(call("POST", urls[1] + path, json=body), 201)
    survivor = expect(call("POST", urls[1] + PODS.format(ns=keep), json=pod("a")), 201)

    # Kubernetes' lifecycle: marked Terminating at once, emptied by the leader's namespace
    # controller, gone once empty; meanwhile nothing new gets in.
    marked = expect(call("DELETE", urls[2] + "/api/v1/namespaces/" + ns), 200)
    assert marked["status"]["phase"] == "Terminating" and marked["metadata"]["deletionTimestamp"]
    late = call("POST", urls[0] + PODS.format(ns=ns), json=pod("late"))
    if late.status_code != 404:          # (or already gone)
        assert_status(late, 403, "Forbidden")
        assert late.json()["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    for url in urls:
        wait_for("namespace %s gone on %s" % (ns, url),
                 lambda url=url: call("GET", url + "/api/v1/namespaces/" + ns).status_code == 404, 20)
    for (path, name) in made:
        assert_status(call("GET", urls[0] + path + "/" + name), 404, "NotFound")
        assert expect(call("GET", urls[1] + path), 200)["items"] == []
    everywhere = expect(call("GET", urls[2] + "/api/v1/pods",
                             params={"fieldSelector": "metadata.namespace=" + ns}), 200)["items"]
    assert everywhere == []
    assert expect(call("GET", urls[0] + POD.format(ns=keep, name="a")), 200) == survivor
    assert_status(call("POST", urls[0] + PODS.format(ns=ns), json=pod("a")), 404, "NotFound")

    ensure_namespace(urls[1], ns)
    for (path, name), old in made.items():
        body = {"pods": pod, "services": service, "deployments": deployment}[path.rsplit("/", 1)[1]](name)
        new = expect(call("POST", urls[2] + path, json=body), 201)
        assert new["metadata"]["uid"] != old["metadata"]["uid"]
        assert gen(new) == 1


def test_no_request_was_answered_500(cluster):
    assert_no_internal_errors(cluster)


# ---- config maps ----

def test_config_map_compare_and_set_across_replicas(urls, ns):
    path = "/api/v1/namespaces/%s/configmaps" % ns
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "reg"}, "data": {"value": "a"}}
    created = expect(call("POST", urls[0] + path, json=body), 201)
    assert created["kind"] == "ConfigMap" and created["data"] == {"value": "a"}
    # A write with the read resourceVersion wins once; the same stale write then conflicts.
    update = dict(created, data={"value": "b"})
    second = expect(call("PUT", urls[1] + path + "/reg", json=update), 200)
    assert second["data"] == {"value": "b"} and rv(second) > rv(created)
    assert_status(call("PUT", urls[2] + path + "/reg", json=dict(created, data={"value": "c"})), 409, "Conflict")
    assert expect(call("GET", urls[2] + path + "/reg"), 200)["data"] == {"value": "b"}
    bad = call("POST", urls[0] + path, json=dict(body, metadata={"name": "bad"}, data={"no spaces": "x"}))
    assert_status(bad, 422, "Invalid")
    assert "no spaces" in bad.json()["message"]
    assert [o["metadata"]["name"] for o in expect(call("GET", urls[1] + path), 200)["items"]] == ["reg"]


def test_retried_update_replays_its_answer_after_the_object_is_gone(urls, ns):
    """A PUT or PATCH that was applied, retried with its Idempotency-Key after someone
    deleted the object, must get its first answer again, not a 404 ("not applied").
    Found by the chaos suite (docs/chaos.md)."""
    path = "/api/v1/namespaces/%s/configmaps" % ns
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"value": "a"}}
    created = expect(call("POST", urls[0] + path, json=body, headers={"Idempotency-Key": uuid.uuid4().hex}), 201)
    put_key, patch_key = uuid.uuid4().hex, uuid.uuid4().hex
    put = dict(created, data={"value": "b"})
    first = expect(call("PUT", urls[1] + path + "/x", json=put, headers={"Idempotency-Key": put_key}), 200)
    patched = expect(call("PATCH", urls[2] + path + "/x", json={"data": {"value": "c"}},
                          headers=dict(MERGE, **{"Idempotency-Key": patch_key})), 200)
    expect(call("DELETE", urls[0] + path + "/x", headers={"Idempotency-Key": uuid.uuid4().hex}), 200)
    again = call("PUT", urls[2] + path + "/x", json=put, headers={"Idempotency-Key": put_key})
    assert again.status_code == 200, describe(again)
    assert again.json()["metadata"]["uid"] == first["metadata"]["uid"]
    again = call("PATCH", urls[1] + path + "/x", json={"data": {"value": "c"}},
                 headers=dict(MERGE, **{"Idempotency-Key": patch_key}))
    assert again.status_code == 200, describe(again)
    assert again.json()["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    # Nothing was written by the replays, and a new request still gets the honest 404.
    assert_status(call("GET", urls[0] + path + "/x"), 404, "NotFound")
    fresh = call("PUT", urls[0] + path + "/x", json=put, headers={"Idempotency-Key": uuid.uuid4().hex})
    assert_status(fresh, 404, "NotFound")
