"""Bodies whose work is out of proportion to their size, compressed bodies, and writes of
what the store owns, through the real API app over a real FSM (tests/unit/real_api.py):
each is refused with a 4xx that says why, quickly, and the stored object is unchanged
(a review's findings)."""
import json
import time

import pytest

from real_api import flask_client

CMS = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
APPLY = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"


@pytest.fixture
def api():
    client, replica = flask_client()
    assert client.post(CMS, json={"metadata": {"name": "c"}, "data": {"k": "v"}}).status_code == 201
    return client


def stored(api, path=CMS + "/c"):
    return api.get(path).get_json()


def test_copies_that_double_the_document_are_refused_before_they_grow_it(api):
    ops = [{"op": "add", "path": "/data/x", "value": "y" * 100}]
    ops += [{"op": "copy", "from": "/metadata/annotations", "path": "/metadata/annotations/c%d" % i}
            for i in range(30)]
    ops.insert(1, {"op": "add", "path": "/metadata/annotations", "value": {"a": "y" * 10}})
    before, started = stored(api), time.process_time()
    resp = api.patch(CMS + "/c", data=json.dumps(ops), content_type=JSON_PATCH)
    assert resp.status_code == 413, resp.get_json()
    message = resp.get_json()["message"]
    assert "copy from /metadata/annotations" in message and "too large" in message
    assert time.process_time() - started < 5          # not the minutes (and GBs) of 2^30 copies
    assert stored(api) == before
    # a few copies are fine
    ok = [{"op": "add", "path": "/data/a", "value": "1"}, {"op": "copy", "from": "/data/a", "path": "/data/b"}]
    resp = api.patch(CMS + "/c", data=json.dumps(ok), content_type=JSON_PATCH)
    assert resp.status_code == 200 and resp.get_json()["data"] == {"k": "v", "a": "1", "b": "1"}


def test_copies_that_nest_a_part_in_itself_are_refused(api):
    ops = [{"op": "add", "path": "/metadata/annotations", "value": {}}]
    ops += [{"op": "copy", "from": "/metadata/annotations", "path": "/metadata/annotations/in"}] * 150
    before = stored(api)
    resp = api.patch(CMS + "/c", data=json.dumps(ops), content_type=JSON_PATCH)
    assert resp.status_code in (400, 422), resp.get_json()
    assert "nest" in resp.get_json()["message"]
    assert stored(api) == before


def test_yaml_aliases_in_an_apply_are_refused(api):
    laughs = 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nx0: &x0 ["lol","lol","lol","lol","lol"]\n'
    for level in range(1, 8):
        laughs += "x%d: &x%d [%s]\n" % (level, level, ",".join(["*x%d" % (level - 1)] * 10))
    before, started = stored(api), time.process_time()
    resp = api.patch(CMS + "/c?fieldManager=m", data=laughs, content_type=APPLY)
    assert resp.status_code == 400, resp.get_json()
    assert "alias *x0 is not accepted" in resp.get_json()["message"]
    assert time.process_time() - started < 2
    assert stored(api) == before


@pytest.mark.parametrize("value, words", [
    ("{a: .nan}", "NaN or Infinity"),
    ("{a: .inf}", "NaN or Infinity"),
    ('{a: "\\ud800"}', "surrogate"),
    ("{1: 2}", "key that is not a string"),
    ("{true: x}", "key that is not a string"),
    ("{null: x}", "key that is not a string"),
    ("{2020-01-01: x}", "key that is not a string"),
    ("{a: 2020-01-01}", "holds date"),
])
def test_what_json_cannot_carry_in_an_apply_is_a_400_not_a_500(api, value, words):
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: %s\n" % value
    resp = api.patch(CMS + "/c?fieldManager=m", data=body, content_type=APPLY)
    assert resp.status_code in (400, 422), resp.get_json()
    assert words in resp.get_json()["message"]


def test_deletion_grace_period_is_the_stores_not_the_clients():
    api, _ = flask_client()
    pod = {"metadata": {"name": "p", "deletionGracePeriodSeconds": -1},
           "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30, "containers": [{"name": "c", "image": "i"}]}}
    created = api.post(PODS, json=pod)
    assert created.status_code == 201 and "deletionGracePeriodSeconds" not in created.get_json()["metadata"]
    assert api.delete(PODS + "/p").get_json()["metadata"]["deletionGracePeriodSeconds"] == 30
    for value in ("abc", 10 ** 30):
        resp = api.patch(PODS + "/p", content_type=JSON_PATCH, data=json.dumps(
            [{"op": "replace", "path": "/metadata/deletionGracePeriodSeconds", "value": value}]))
        assert resp.status_code == 200 and resp.get_json()["metadata"]["deletionGracePeriodSeconds"] == 30
    shorter = api.delete(PODS + "/p?gracePeriodSeconds=3")      # a second delete still shortens it
    assert shorter.status_code == 200, shorter.get_json()
    assert shorter.get_json()["metadata"]["deletionGracePeriodSeconds"] == 3


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
def test_a_compressed_body_is_a_415_that_says_so(api, encoding):
    import gzip
    body = gzip.compress(json.dumps({"metadata": {"name": "z"}, "data": {"a": "b"}}).encode())
    for resp in (api.post(CMS, data=body, content_type="application/json", headers={"Content-Encoding": encoding}),
                 api.patch(CMS + "/c?fieldManager=m", data=body, content_type=APPLY,
                           headers={"Content-Encoding": encoding})):
        assert resp.status_code == 415, resp.get_json()
        assert "Content-Encoding '%s' are not supported: send the body uncompressed" % encoding \
            in resp.get_json()["message"]
    assert api.get(CMS + "/z").status_code == 404
    plain = api.post(CMS, json={"metadata": {"name": "z"}}, headers={"Content-Encoding": "identity"})
    assert plain.status_code == 201


def test_a_patch_or_scale_cannot_rename_or_move_the_object(api):
    before = stored(api)
    for ops in ([{"op": "replace", "path": "/metadata/name", "value": "other"}],
                [{"op": "add", "path": "/metadata/namespace", "value": "kube-system"}]):
        resp = api.patch(CMS + "/c", data=json.dumps(ops), content_type=JSON_PATCH)
        assert resp.status_code == 400 and "does not match" in resp.get_json()["message"], resp.get_json()
    resp = api.patch(CMS + "/c", json={"metadata": {"name": "other"}}, content_type="application/merge-patch+json")
    assert resp.status_code == 400
    assert stored(api) == before
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    assert api.post(deployments, json={"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    ).status_code == 201
    resp = api.put(deployments + "/d/scale", json={"metadata": {"name": "other"}, "spec": {"replicas": 3}})
    assert resp.status_code == 400 and "does not match" in resp.get_json()["message"]
    ok = api.put(deployments + "/d/scale", json={"metadata": {"name": "d"}, "spec": {"replicas": 3}})
    assert ok.status_code == 200 and ok.get_json()["spec"]["replicas"] == 3
