"""Paged lists (api/paging.py) on the real app over a real single-replica store: every
page comes from the first page's revision (changes made between pages are undone
from the watch log), tokens are checked, an expired token is a 410 with a fresh
token, resourceVersionMatch=Exact rebuilds an older state; Tables page too."""

import pytest

from shepherd_ha.api import paging
from shepherd_ha.api.app import create_app

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
NS = "paging"


@pytest.fixture(scope="module")
def api(single_replica):
    client = create_app(single_replica).test_client()
    assert client.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).status_code == 201
    for i in range(25):
        resp = client.post("/api/v1/namespaces/%s/configmaps" % NS,
                           json={"metadata": {"name": "cm-%02d" % i}, "data": {"v": "0"}})
        assert resp.status_code == 201, resp.get_json()
    return client, single_replica


def url(query=""):
    return "/api/v1/namespaces/%s/configmaps%s" % (NS, query)


def pages(client, limit, between=lambda i: None, headers=None):
    """Every page of the list, calling between(i) after page i."""
    out, token, i = [], None, 0
    while True:
        resp = client.get(url("?limit=%d" % limit + ("&continue=" + token if token else "")), headers=headers)
        assert resp.status_code == 200, resp.get_json()
        body = resp.get_json()
        out.append(body)
        token = body["metadata"].get("continue")
        if not token:
            return out
        between(i)
        i += 1
        assert i < 100


def names(body):
    return [o["metadata"]["name"] for o in body["items"]]


def test_pages_cover_the_list_once_with_counts(api):
    client, _ = api
    whole = client.get(url()).get_json()
    assert "continue" not in whole["metadata"] and len(whole["items"]) == 25
    got = pages(client, 10)
    assert [len(p["items"]) for p in got] == [10, 10, 5]
    assert [p["metadata"].get("remainingItemCount") for p in got] == [15, 5, None]
    assert sum((names(p) for p in got), []) == names(whole)
    assert len({p["metadata"]["resourceVersion"] for p in got}) == 1


def test_pages_come_from_the_first_pages_snapshot(api):
    client, _ = api

    def change(i):
        if i == 0:   # after the first page: one deleted, one added, one modified, all in later pages
            assert client.delete(url("/cm-20")).status_code == 200
            assert client.post(url(), json={"metadata": {"name": "cm-21a"}}).status_code == 201
            assert client.patch(url("/cm-22"), json={"data": {"v": "changed"}},
                                headers={"Content-Type": "application/merge-patch+json"}).status_code == 200
    before = {o["metadata"]["name"]: o.get("data") for o in client.get(url()).get_json()["items"]}
    got = pages(client, 10, change)
    listed = {o["metadata"]["name"]: o.get("data") for p in got for o in p["items"]}
    assert listed == before            # the snapshot: cm-20 still there, no cm-21a, cm-22 unchanged
    now = {o["metadata"]["name"]: o.get("data") for o in client.get(url()).get_json()["items"]}
    assert "cm-20" not in now and "cm-21a" in now and now["cm-22"] == {"v": "changed"}


def test_tables_page_too(api):
    client, _ = api
    got = pages(client, 7, headers={"Accept": TABLE})
    assert all(p["kind"] == "Table" for p in got)
    rows = [r["cells"][0] for p in got for r in p["rows"]]
    assert rows == names(client.get(url()).get_json())
    assert got[0]["metadata"]["remainingItemCount"] == len(rows) - 7


def test_bad_tokens_and_parameters_are_400(api):
    client, _ = api
    for token in ("garbage!", paging.encode_token(1, ("a", "b"), "configmaps/" + NS)[:-3], "eyJydiI6LTF9"):
        resp = client.get(url("?limit=5&continue=" + token))
        assert resp.status_code == 400 and "continue token" in resp.get_json()["message"], resp.get_json()
    good = client.get(url("?limit=5")).get_json()["metadata"]["continue"]
    # a token pages only the list that gave it: not another kind, namespace or all namespaces
    for other in ("/api/v1/namespaces/%s/secrets" % NS, "/api/v1/namespaces/default/configmaps",
                  "/api/v1/configmaps"):
        resp = client.get(other + "?limit=5&continue=" + good)
        assert resp.status_code == 400 and "of another list ('configmaps/%s')" % NS in resp.get_json()["message"]
    assert client.get(url("?limit=5&continue=" + good)).status_code == 200
    assert client.get(url("?limit=5&resourceVersion=1&continue=" + good)).status_code == 400
    assert client.get(url("?resourceVersionMatch=Exact")).status_code == 400
    assert client.get(url("?resourceVersionMatch=Newest&resourceVersion=1")).status_code == 400
    assert client.get(url("?limit=-1")).status_code == 400


def test_exact_rebuilds_an_older_state(api):
    client, _ = api
    rv = client.get(url()).get_json()["metadata"]["resourceVersion"]
    old = names(client.get(url()).get_json())
    assert client.post(url(), json={"metadata": {"name": "cm-exact"}}).status_code == 201
    exact = client.get(url("?resourceVersion=%s&resourceVersionMatch=Exact" % rv)).get_json()
    assert exact["metadata"]["resourceVersion"] == rv and names(exact) == old
    newer = client.get(url("?resourceVersion=%s&resourceVersionMatch=NotOlderThan" % rv)).get_json()
    assert "cm-exact" in names(newer) and int(newer["metadata"]["resourceVersion"]) > int(rv)
    ahead = client.get(url("?resourceVersion=%d&resourceVersionMatch=Exact" % (int(rv) + 10 ** 6)))
    assert ahead.status_code == 504


def test_an_expired_token_is_410_with_a_fresh_token(api):
    client, replica = api
    first = client.get(url("?limit=10")).get_json()
    token = first["metadata"]["continue"]
    assert client.post(url(), json={"metadata": {"name": "cm-zz-late"}}).status_code == 201
    replica.watch_log.reset(replica.watch_log.last_revision)       # as a snapshot install does
    expired = client.get(url("?limit=10&continue=" + token))
    body = expired.get_json()
    assert expired.status_code == 410 and body["reason"] == "Expired", body
    fresh = body["metadata"]["continue"]
    rest = client.get(url("?continue=" + fresh)).get_json()
    assert names(rest)[0] > names(first)[-1] and "cm-zz-late" in names(rest)     # the current state
    stale = client.get(url("?resourceVersion=%s&resourceVersionMatch=Exact" % first["metadata"]["resourceVersion"]))
    assert stale.status_code == 410
