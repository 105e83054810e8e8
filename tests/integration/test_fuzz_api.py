"""A fuzz campaign against a running 3-replica cluster (real replica processes, tokens on):
random methods, paths, query parameters, bodies and headers (tests/integration/fuzz_requests.py).

Asserted: no 5xx; every answer within 5 s; no replica process (nor worker) dies; a write
answered 4xx leaves its object as it was; the controllers still converge afterwards (a
Deployment created after the campaign gets its pods scheduled on a node).

SHEPHERD_FUZZ_REQUESTS sets the count (500 by default, the CI form; docs/security.md
records a run of 5,000). Failures are collected rather than raised at once: the cluster
is live state, so a failing request is reported whole instead of being shrunk.
"""
import json
import os
import time
import urllib.parse
import uuid

import pytest
import requests
from hypothesis import HealthCheck, Phase, given, settings

from . import fuzz_requests as fz
from .helpers import Cluster, call, describe, expect
from .test_scheduling import node_body

pytestmark = pytest.mark.integration

COUNT = int(os.environ.get("SHEPHERD_FUZZ_REQUESTS", "500"))
ANSWER_WITHIN = 5.0
VIEWER = "viewer-" + uuid.uuid4().hex
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@pytest.fixture(scope="module")
def env(tmp_path_factory, request):
    cluster = Cluster(tmp_path_factory.mktemp("fuzz"), auth=True)
    with open(cluster.lc.token_file, "a") as fh:
        fh.write('%s,viewer,viewer,"shepherd:view"\n' % VIEWER)
    request.addfinalizer(cluster.stop_all)
    cluster.start()
    node = cluster.lc.node_token("fuzz-node")      # a node's own token (user system:node:NAME)
    tokens = {"admin": "Bearer " + cluster.lc.token(), "node": "Bearer " + node, "viewer": "Bearer " + VIEWER,
              "bad": "Bearer " + "0" * 32, "garbage": "Basic " + "\x7f" * 3, "none": None}
    admin = {"Authorization": tokens["admin"]}
    _seed(cluster.url(cluster.ids[0]), admin)
    pids = {ident: cluster.lc.pid(ident) for ident in cluster.ids}
    return {"cluster": cluster, "tokens": tokens, "admin": admin, "pids": pids, "problems": [], "codes": {},
            "sent": [0]}


def _seed(url, admin):
    """The fuzz namespace and a few objects of each kind for updates and deletes to meet."""
    deadline = time.monotonic() + 10
    while True:            # after the campaign deleted the namespace, its deletion may still be under way
        resp = call("POST", url + "/api/v1/namespaces", json={"metadata": {"name": fz.NS}}, headers=admin)
        if resp.status_code == 201 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert resp.status_code == 201, describe(resp)
    for plural in ("configmaps", "pods", "services", "deployments"):
        for name in fz.NAMES:
            body = fz.base_object(plural, name)
            path = "%s/namespaces/%s/%s" % ("/api/v1" if fz.GROUP[plural] == "v1" else "/apis/" + fz.GROUP[plural],
                                            fz.NS, plural)
            resp = call("POST", url + path, json=body, headers=admin)
            assert resp.status_code in (201, 409), describe(resp)


def _url(base, req):
    query = "&".join("%s=%s" % (k, urllib.parse.quote(v, safe="", errors="surrogatepass"))
                     for k, v in req["params"].items())
    path = urllib.parse.quote(req["path"], safe="/%?=&", errors="surrogatepass")
    return base + path + ("?" + query if query else "")


def _object_path(req):
    """The object a write names (its path), or None (a collection: the body's name)."""
    if req["plural"] is None or req["plural"] not in fz.GROUP:
        return None
    parts = req["path"].split("/")
    if req["name"] is not None:
        index = parts.index(req["plural"])
        return "/".join(parts[:index + 2])
    try:
        name = json.loads(req["body"] or b"null")["metadata"]["name"]
    except Exception:     # noqa: BLE001 - a body without a usable name names nothing
        return None
    if not isinstance(name, str) or not name or "/" in name or "?" in name or "#" in name:
        return None
    return req["path"] + "/" + urllib.parse.quote(name, safe="", errors="surrogatepass")


def _version(base, path, admin):
    """What a rejected write must not have changed: absent, or uid, metadata and spec
    (not status nor resourceVersion: controllers write those at any time)."""
    resp = call("GET", base + path, headers=admin, timeout=ANSWER_WITHIN)
    if resp.status_code == 404:
        return None
    if resp.status_code != 200:
        return ("unreadable", resp.status_code)
    obj = resp.json()
    meta = {k: v for k, v in obj.get("metadata", {}).items()
            if k not in ("resourceVersion", "managedFields", "annotations", "generation")}
    return json.dumps([meta, obj.get("spec"), obj.get("data")], sort_keys=True)


def _send(env, req, base):
    headers = dict(req["headers"])
    body = req["body"]
    if headers.pop("chunked", None) and body is not None:
        body = iter([body[:len(body) // 2], body[len(body) // 2:]])     # sent in chunked encoding
    if body is None:
        headers.pop("Transfer-Encoding", None)    # a client that announces a body and sends none is slow, not bad
    token = env["tokens"][req["auth"]]
    if token is not None:
        headers["Authorization"] = token
    started = time.monotonic()
    resp = requests.request(req["method"], _url(base, req), data=body, headers=headers,
                            timeout=(ANSWER_WITHIN, ANSWER_WITHIN), stream=True)
    try:
        for _ in resp.iter_content(65536):          # the whole answer, streams included
            if time.monotonic() - started > ANSWER_WITHIN:
                break
    finally:
        resp.close()
    return resp.status_code, time.monotonic() - started


@settings(max_examples=COUNT, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(req=fz.requests_())
def _campaign(env, req):
    cluster = env["cluster"]
    base = cluster.url(cluster.ids[env["sent"][0] % len(cluster.ids)])
    env["sent"][0] += 1
    write = req["method"] in ("POST", "PUT", "PATCH", "DELETE")
    target = _object_path(req) if write else None
    shown = dict(req, body=(req["body"] or b"")[:300])
    try:
        before = _version(base, target, env["admin"]) if target else None
        code, took = _send(env, req, base)
    except requests.RequestException as exc:
        env["problems"].append(("no answer: %r" % exc, shown))
        return
    env["codes"][code] = env["codes"].get(code, 0) + 1
    if code >= 500:
        env["problems"].append(("answered %d" % code, shown))
    if took > ANSWER_WITHIN:
        env["problems"].append(("took %.1f s" % took, shown))
    if target and 400 <= code < 500:
        try:
            after = _version(base, target, env["admin"])
        except requests.RequestException as exc:
            env["problems"].append(("no answer reading %s back: %r" % (target, exc), shown))
            return
        if after != before:
            env["problems"].append(("a %d write changed %s: %s -> %s" % (code, target, before, after), shown))
    if req["method"] == "DELETE" and code == 200 and req["path"] == "/api/v1/namespaces/" + fz.NS:
        env["reseeded"] = env.get("reseeded", 0) + 1
        _seed(base, env["admin"])        # the rest of the campaign needs its namespace


def test_fuzz_campaign(env):
    _campaign(env)
    cluster = env["cluster"]
    for ident, pid in env["pids"].items():
        assert cluster.lc.pid(ident) == pid, "replica %s died during the campaign" % ident
    restarts = []
    for ident in cluster.ids:
        with open(os.path.join(cluster.lc.dir, ident, "server.log"), errors="replace") as fh:
            lines = fh.read().splitlines()
        for at, line in enumerate(lines):
            if "restarting it" in line or "internal error on" in line or "Traceback" in line:
                # the line before names what failed; a traceback's own lines say where
                restarts.append("%s:\n    %s" % (ident, "\n    ".join(lines[max(0, at - 1):at + 25])))
    summary = "%d requests, answers %s; the fuzz namespace deleted (and re-made) %d times" % (
        env["sent"][0], dict(sorted(env["codes"].items())), env.get("reseeded", 0))
    print("fuzz campaign:", summary)
    assert not env["problems"], "%s\n%d problems, first ones:\n%s\n%s" % (
        summary, len(env["problems"]), "\n".join("%s: %r" % p for p in env["problems"][:15]), cluster.log_tails(60))
    assert not restarts, "%d worker restarts, internal errors or tracebacks in the logs, the first ones:\n%s" % (
        len(restarts), "\n".join(restarts[:5]))


def test_controllers_converge_after_the_campaign(env):
    cluster, admin = env["cluster"], env["admin"]
    url = cluster.url(cluster.ids[1])
    name, node = "after-" + uuid.uuid4().hex[:6], "fuzz-node-" + uuid.uuid4().hex[:4]
    for namespace in ("kube-node-lease", name):
        resp = call("POST", url + "/api/v1/namespaces", json={"metadata": {"name": namespace}}, headers=admin)
        assert resp.status_code in (201, 409), describe(resp)
    expect(call("POST", url + "/api/v1/nodes", json=node_body(node), headers=admin), 201)
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": node, "namespace": "kube-node-lease"},
             "spec": {"holderIdentity": node, "leaseDurationSeconds": 40,
                      "renewTime": "2026-01-01T00:00:00.000000Z"}}
    expect(call("POST", url + LEASES, json=lease, headers=admin), 201)
    dep = fz.base_object("deployments", name)
    dep["spec"]["replicas"] = 2
    dep["spec"]["selector"] = {"matchLabels": {"app": name}}
    dep["spec"]["template"]["metadata"]["labels"] = {"app": name}
    dep["metadata"]["namespace"] = name
    expect(call("POST", url + "/apis/apps/v1/namespaces/%s/deployments" % name, json=dep, headers=admin), 201)
    deadline = time.monotonic() + 30
    while True:
        pods = expect(call("GET", url + "/api/v1/namespaces/%s/pods" % name, params={"labelSelector": "app=" + name},
                           headers=admin), 200)["items"]
        if len(pods) == 2 and all(p["spec"].get("nodeName") == node for p in pods):
            break
        assert time.monotonic() < deadline, "the Deployment's pods were not scheduled within 30 s: %s" % [
            (p["metadata"]["name"], p["spec"].get("nodeName")) for p in pods]
        time.sleep(0.5)
