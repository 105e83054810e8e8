"""Bad input gets its 4xx with a Status body and writes nothing; hostile bodies never get a 5xx."""
import copy
import json

import pytest

from .helpers import (POD, PODS, assert_no_internal_errors, assert_status, assert_unchanged, call, deployment,
                      describe, ensure_namespace, expect, pod, store_snapshot, strict_json, unique)

pytestmark = pytest.mark.integration

NS = "bad"
NS_NAN = "bad-nan"      # if NaN is accepted, its pod must not spoil the lists of NS
JSON = {"Content-Type": "application/json"}
MERGE = {"Content-Type": "application/merge-patch+json"}
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def env(cluster):
    url = cluster.url(cluster.followers()[0])
    # privileged: FULL_POD sets every pod field, hostPort included (admission is tested elsewhere)
    resp = call("POST", url + "/api/v1/namespaces", json={"metadata": {"name": NS, "labels": {
        "pod-security.kubernetes.io/enforce": "privileged"}}})
    assert resp.status_code in (201, 409), describe(resp)
    ensure_namespace(url, NS_NAN)
    existing = expect(call("POST", url + PODS.format(ns=NS), json=pod("exists", {"app": "x"})), 201)
    expect(call("POST", url + "/apis/apps/v1/namespaces/%s/deployments" % NS, json=deployment("dep")), 201)
    return {"url": url, "existing": existing}


def _pod_with(**changes):
    body = pod("fresh")
    for key, value in changes.items():
        body[key] = value
    return body


def _bad_name():
    return pod("Bad_Name!")


def _no_containers():
    body = pod("nocontainers")
    body["spec"] = {}
    return body


# name -> (method, path, request kwargs (a callable for the env-dependent ones), code, reason)
CASES = {
    "malformed-json": ("POST", PODS, {"data": '{"metadata": {"name": "x"', "headers": JSON}, 400, "BadRequest"),
    "body-not-object": ("POST", PODS, {"json": [pod("inlist")]}, 400, "BadRequest"),
    "body-is-string": ("POST", PODS, {"json": "pod"}, 400, "BadRequest"),
    "empty-body": ("POST", PODS, {"data": "", "headers": JSON}, 400, "BadRequest"),
    "invalid-name": ("POST", PODS, {"json": _bad_name()}, 422, "Invalid"),
    "missing-containers": ("POST", PODS, {"json": _no_containers()}, 422, "Invalid"),
    "kind-mismatch": ("POST", PODS, {"json": _pod_with(kind="Service")}, 400, "BadRequest"),
    "apiversion-mismatch": ("POST", PODS, {"json": _pod_with(apiVersion="apps/v1")}, 400, "BadRequest"),
    "namespace-mismatch": ("POST", PODS, {"json": dict(pod("nsmismatch"), metadata={"name": "nsmismatch",
                                                                                      "namespace": "default"})},
                           400, "BadRequest"),
    "body-over-3mib": ("POST", PODS, {"data": json.dumps(dict(pod("big"), junk="x" * (3 * MIB))), "headers": JSON},
                       413, "RequestEntityTooLarge"),
    "unknown-resource-get": ("GET", "/api/v1/namespaces/{ns}/widgets", {}, 404, "NotFound"),
    "unknown-resource-post": ("POST", "/api/v1/namespaces/{ns}/widgets", {"json": pod("w")}, 404, "NotFound"),
    "unknown-path": ("GET", "/api/v2/pods", {}, 404, "NotFound"),
    "deployments-under-core": ("POST", "/api/v1/namespaces/{ns}/deployments", {"json": deployment("d2")},
                               404, "NotFound"),
    "json-patch-failed-test": ("PATCH", POD.replace("{name}", "exists"),
                               {"data": '[{"op": "add", "path": "/metadata/labels/a", "value": "b"}, '
                                        '{"op": "test", "path": "/spec/nodeName", "value": "nowhere"}]',
                                "headers": {"Content-Type": "application/json-patch+json"}},
                               422, "Invalid"),
    "json-patch-not-a-list": ("PATCH", POD.replace("{name}", "exists"),
                              {"data": '{"op": "add"}', "headers": {"Content-Type": "application/json-patch+json"}},
                              400, "BadRequest"),
    "strategic-item-without-key": ("PATCH", POD.replace("{name}", "exists"),
                                   {"data": '{"spec": {"containers": [{"image": "x"}]}}',
                                    "headers": {"Content-Type": "application/strategic-merge-patch+json"}},
                                   422, "Invalid"),
    "apply-without-field-manager": ("PATCH", POD.replace("{name}", "exists"),
                                    {"data": json.dumps(pod("exists")),
                                     "headers": {"Content-Type": "application/apply-patch+yaml"}}, 422, "Invalid"),
    "patch-protobuf": ("PATCH", POD.replace("{name}", "exists"),
                       {"data": "\x6b\x38\x73\x00", "headers": {"Content-Type": "application/vnd.kubernetes.protobuf"}},
                       415, "UnsupportedMediaType"),
    "strict-unknown-field": ("POST", PODS, {"json": _pod_with(spek={"x": 1}),
                                            "params": {"fieldValidation": "Strict"}}, 400, "BadRequest"),
    "bad-dry-run-value": ("POST", PODS, {"json": pod("dry"), "params": {"dryRun": "true"}}, 422, "Invalid"),
    "bad-field-validation": ("POST", PODS, {"json": pod("fv"), "params": {"fieldValidation": "strict"}},
                             422, "Invalid"),
    "patch-text-plain": ("PATCH", POD.replace("{name}", "exists"),
                         {"data": '{"metadata": {"labels": {"a": "b"}}}', "headers": {"Content-Type": "text/plain"}},
                         415, "UnsupportedMediaType"),
    "put-stale-resource-version": ("PUT", POD.replace("{name}", "exists"),
                                   lambda env: {"json": dict(env["existing"], metadata=dict(
                                       env["existing"]["metadata"], resourceVersion="1",
                                       labels={"changed": "yes"}))},
                                   409, "Conflict"),
    "create-existing-name": ("POST", PODS, {"json": pod("exists")}, 409, "AlreadyExists"),
    "delete-missing": ("DELETE", POD.replace("{name}", "nosuchpod"), {}, 404, "NotFound"),
    "create-in-missing-namespace": ("POST", "/api/v1/namespaces/nosuchns/pods", {"json": pod("orphan")},
                                    404, "NotFound"),
    "invalid-namespace-in-path": ("POST", "/api/v1/namespaces/Not_Valid/pods", {"json": pod("p")}, 400, None),
    "bad-label-selector": ("GET", PODS, {"params": {"labelSelector": "app in (web"}}, 400, "BadRequest"),
    "bad-label-selector-all-ns": ("GET", "/api/v1/pods", {"params": {"labelSelector": "a=b=c"}}, 400, "BadRequest"),
    "unsupported-field-selector": ("GET", PODS, {"params": {"fieldSelector": "spec.dnsPolicy=Default"}},
                                   400, "BadRequest"),
    "malformed-field-selector": ("GET", PODS, {"params": {"fieldSelector": "metadata.name"}}, 400, "BadRequest"),
    "watch-non-numeric-rv": ("GET", PODS, {"params": {"watch": "1", "resourceVersion": "abc"}}, 400, "BadRequest"),
    "watch-unicode-digit-rv": ("GET", PODS, {"params": {"watch": "1", "resourceVersion": "\u00b2"}},
                               400, "BadRequest"),
    "get-unicode-digit-rv": ("GET", POD.replace("{name}", "exists"), {"params": {"resourceVersion": "\u00b2"}},
                             400, "BadRequest"),
    "watch-unicode-digit-timeout": ("GET", PODS, {"params": {"watch": "1", "resourceVersion": "1",
                                                             "timeoutSeconds": "\u00b2"}}, 400, "BadRequest"),
    "watch-bad-timeout": ("GET", PODS, {"params": {"watch": "1", "timeoutSeconds": "soon"}}, 400, "BadRequest"),
    "nan-literal-is-not-json": ("POST", "/api/v1/namespaces/%s/pods" % NS_NAN, {"data": '{"metadata": {"name": "nan"}, "spec": {"containers": '
                                                       '[{"name": "c", "image": "nginx"}]}, "x": NaN}',
                                               "headers": JSON}, 400, "BadRequest"),
    "deeply-nested-body": ("POST", PODS, {"data": "[" * 100000 + "]" * 100000, "headers": JSON}, 400, "BadRequest"),
    "bad-idempotency-key": ("POST", PODS, {"json": pod("longkey"), "headers": {"Idempotency-Key": "k" * 129}},
                            400, "BadRequest"),
    "delete-bad-propagation": ("DELETE", POD.replace("{name}", "exists"),
                               {"json": {"propagationPolicy": "Sometimes"}}, 400, "BadRequest"),
    "scale-not-a-number": ("PUT", "/apis/apps/v1/namespaces/{ns}/deployments/dep/scale",
                           {"json": {"spec": {"replicas": "many"}}}, 422, "Invalid"),
    "method-not-allowed": ("DELETE", PODS, {}, 405, "MethodNotAllowed"),
    "status-phase-wrong-type": ("PATCH", POD.replace("{name}", "exists") + "/status",
                                {"json": {"status": {"phase": 5}}, "headers": MERGE}, 422, "Invalid"),
    "integer-beyond-int64": ("POST", PODS, {"data": json.dumps(pod("huge"))[:-1] +
                                            ', "spec": {"containers": [{"name": "c", "image": "i"}], '
                                            '"terminationGracePeriodSeconds": ' + "9" * 400 + "}}",
                                            "headers": JSON}, 422, "Invalid"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_request_gets_status_and_writes_nothing(cluster, env, case):
    method, path, kwargs, code, reason = CASES[case]
    if callable(kwargs):
        kwargs = kwargs(env)
    url = env["url"]
    before = store_snapshot(url)
    resp = call(method, url + path.format(ns=NS), **kwargs)
    body = assert_status(resp, code, reason)
    if code == 422:
        causes = body.get("details", {}).get("causes")
        assert isinstance(causes, list) and causes, body
        for cause in causes:
            assert isinstance(cause.get("field"), str) and isinstance(cause.get("message"), str) and \
                cause["message"], cause
        if case == "invalid-name":
            assert "metadata.name" in [c["field"] for c in causes], causes
        if case == "missing-containers":
            assert any(c["field"].startswith("spec.containers") for c in causes), causes
    assert_unchanged(before, store_snapshot(url))
    if case == "put-stale-resource-version":
        got = expect(call("GET", url + POD.format(ns=NS, name="exists")), 200)
        assert got == env["existing"]


# ---- hostile bodies: wrong types everywhere, deep nesting, huge numbers ----

FULL_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "full", "labels": {"app": "full"}, "annotations": {"note": "hello"},
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "dep",
                                      "uid": "0000", "controller": True}]},
    "spec": {
        "containers": [{
            "name": "main", "image": "nginx:1.25", "command": ["sh"], "args": ["-c", "sleep 1"],
            "workingDir": "/srv", "imagePullPolicy": "IfNotPresent",
            "env": [{"name": "MODE", "value": "prod"}],
            "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP", "name": "http"}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}},
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 80, "scheme": "HTTP"},
                              "initialDelaySeconds": 1, "timeoutSeconds": 1, "periodSeconds": 10,
                              "successThreshold": 1, "failureThreshold": 3},
            "readinessProbe": {"tcpSocket": {"port": "http"}},
            "startupProbe": {"exec": {"command": ["true"]}},
        }],
        "restartPolicy": "Always", "nodeSelector": {"disk": "ssd"}, "nodeName": "node-1",
        "terminationGracePeriodSeconds": 30, "activeDeadlineSeconds": 100, "hostNetwork": False,
    },
    "status": {"phase": "Pending"},
}


def _paths(value, prefix=()):
    """Every path into value (dict keys and list indexes), parents before children."""
    out = []
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return out
    for key, child in items:
        path = prefix + (key,)
        out.append(path)
        out += _paths(child, path)
    return out


def _wrong_values(path, original):
    leaf = str(path[-1])
    if leaf == "port":                               # a number or a port name
        return [1.5, True, [], {}, "-not-a-name-"]
    if len(path) >= 2 and path[-2] in ("requests", "limits"):   # quantities: strings or numbers
        return [True, [], {}, "lots"]
    if isinstance(original, bool):
        return [7, "yes", [], {}]
    if isinstance(original, int):
        return ["7", 1.5, True, [], {}]
    if isinstance(original, str):
        return [7, 1.5, True, [], {}]
    if isinstance(original, list):
        return [7, "x", True, {}, [7]]
    if isinstance(original, dict):
        return [7, "x", True, []]
    return []


def _set(obj, path, value):
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def _get(obj, path):
    for key in path:
        obj = obj[key]
    return obj


def _hostile_pods():
    """(label, body): FULL_POD with one field replaced by a value of a wrong type, for every field."""
    out = []
    for path in _paths(FULL_POD):
        for wrong in _wrong_values(path, _get(FULL_POD, path)):
            body = copy.deepcopy(FULL_POD)
            body["metadata"]["name"] = "hostile"
            _set(body, path, wrong)
            out.append(("%s=%s" % (".".join(map(str, path)), json.dumps(wrong)), body))
    # and everything in the pod spec wrong at once
    everything = copy.deepcopy(FULL_POD)
    everything["metadata"]["name"] = "hostile"
    for path in reversed(_paths(FULL_POD["spec"], ("spec",))):
        wrong = _wrong_values(path, _get(FULL_POD, path))
        if wrong:
            _set(everything, path, wrong[0])
    out.append(("spec: every field wrong", everything))
    return out


def test_full_pod_is_valid(cluster, env):
    """The template the hostile cases mutate is itself accepted, so a 422 below is about the mutation."""
    body = copy.deepcopy(FULL_POD)
    body["metadata"]["name"] = "full-valid"
    resp = call("POST", env["url"] + PODS.format(ns=NS), json=body)
    assert resp.status_code == 201, describe(resp)


def test_wrong_types_in_every_pod_field_get_4xx_and_write_nothing(cluster, env):
    url = env["url"]
    before = store_snapshot(url)
    cases = _hostile_pods()
    assert len(cases) > 150
    wrong = []
    for label, body in cases:
        resp = call("POST", url + PODS.format(ns=NS), json=body)
        if resp.status_code not in (400, 422):
            wrong.append("%s -> %s" % (label, describe(resp)))
            continue
        assert_status(resp, resp.status_code)
    # The same through PATCH and PUT on an existing object.
    target = url + POD.format(ns=NS, name="exists")
    for patch in ({"spec": 7}, {"spec": {"containers": "x"}}, {"spec": {"containers": [7]}},
                  {"metadata": "x"}, {"metadata": {"labels": [1]}}, {"metadata": {"labels": {"a": 1}}},
                  {"status": "x"}, {"spec": {"containers": [{"name": 7, "image": []}]}}):
        resp = call("PATCH", target, headers=MERGE, json=patch)
        if resp.status_code not in (400, 422):
            wrong.append("PATCH %s -> %s" % (json.dumps(patch), describe(resp)))
    for status in ("x", 7, ["Running"]):
        resp = call("PUT", target + "/status", json=dict(env["existing"], status=status))
        if resp.status_code not in (400, 422):
            wrong.append("PUT status %s -> %s" % (json.dumps(status), describe(resp)))
    dep = url + "/apis/apps/v1/namespaces/%s/deployments/dep" % NS
    for method, path, body in (("PATCH", "", {"spec": {"replicas": "x"}}), ("PATCH", "", {"spec": {"selector": 7}}),
                               ("PUT", "/scale", {"spec": {"replicas": -1}}), ("PUT", "/scale", {"spec": []}),
                               ("PATCH", "/scale", {"spec": {"replicas": 1.5}}), ("PUT", "/scale", ["x"])):
        resp = call(method, dep + path, headers=MERGE, json=body)
        if resp.status_code not in (400, 422):
            wrong.append("%s deployment%s %s -> %s" % (method, path, json.dumps(body), describe(resp)))
    assert not wrong, "%d hostile bodies not answered 400/422:\n%s" % (len(wrong), "\n".join(wrong[:25]))
    assert_unchanged(before, store_snapshot(url))


def _nested(depth):
    return "[" * depth + "]" * depth


NESTED = [
    ("POST pod, spec.extra nested 600 deep", "POST", PODS,
     '{"metadata": {"name": "deep1"}, "spec": {"containers": [{"name": "c", "image": "nginx"}], "extra": %s}}'
     % _nested(600)),
    ("POST pod, containers nested 2000 deep", "POST", PODS,
     '{"metadata": {"name": "deep2"}, "spec": {"containers": %s}}' % _nested(2000)),
    ("PUT pod status nested 600 deep", "PUT", POD.replace("{name}", "exists") + "/status",
     '{"metadata": {"name": "exists"}, "status": {"phase": "Running", "x": %s}}' % _nested(600)),
    ("PATCH pod, annotation-like map nested 600 deep", "PATCH", POD.replace("{name}", "exists"),
     '{"spec": {"extra": %s}}' % ('{"a":' * 600 + "1" + "}" * 600)),
]


@pytest.mark.parametrize("label", [n[0] for n in NESTED])
def test_deeply_nested_json_is_a_4xx(cluster, env, label):
    _, method, path, data = [n for n in NESTED if n[0] == label][0]
    url = env["url"]
    before = store_snapshot(url)
    headers = MERGE if method == "PATCH" else JSON
    resp = call(method, url + path.format(ns=NS), data=data, headers=headers)
    assert 400 <= resp.status_code < 500, "deeply nested JSON must be refused as bad input: %s" % describe(resp)
    assert_status(resp, resp.status_code)
    assert_unchanged(before, store_snapshot(url))


HUGE = [
    ("int with 400 digits in terminationGracePeriodSeconds", "POST", PODS,
     '{"metadata": {"name": "huge1"}, "spec": {"containers": [{"name": "c", "image": "nginx"}], '
     '"terminationGracePeriodSeconds": %s}}' % ("9" * 400)),
    ("int with 5000 digits", "POST", PODS,
     '{"metadata": {"name": "huge2"}, "spec": {"containers": [{"name": "c", "image": "nginx"}], '
     '"activeDeadlineSeconds": %s}}' % ("9" * 5000)),
    ("1e999 in containerPort", "POST", PODS,
     '{"metadata": {"name": "huge3"}, "spec": {"containers": [{"name": "c", "image": "nginx", '
     '"ports": [{"containerPort": 1e999}]}]}}'),
    ("1e999 in an unknown spec field", "POST", PODS,
     '{"metadata": {"name": "huge4"}, "spec": {"containers": [{"name": "c", "image": "nginx"}], "weight": 1e999}}'),
    ("-1e999 in status via the status subresource", "PUT", POD.replace("{name}", "exists") + "/status",
     '{"metadata": {"name": "exists"}, "status": {"phase": "Running", "score": -1e999}}'),
    ("1e400 replicas on a deployment", "PATCH", "/apis/apps/v1/namespaces/{ns}/deployments/dep",
     '{"spec": {"replicas": 1e400}}'),
]


@pytest.mark.parametrize("label", [h[0] for h in HUGE])
def test_huge_numbers_never_5xx_and_responses_stay_json(cluster, env, label):
    _, method, path, data = [h for h in HUGE if h[0] == label][0]
    url = env["url"]
    ns = unique("huge")     # its own namespace: an accepted object must not spoil other tests' lists
    ensure_namespace(url, ns)
    expect(call("POST", url + PODS.format(ns=ns), json=pod("exists")), 201)
    expect(call("POST", url + "/apis/apps/v1/namespaces/%s/deployments" % ns, json=deployment("dep")), 201)
    headers = MERGE if method == "PATCH" else JSON
    resp = call(method, url + path.format(ns=ns), data=data, headers=headers)
    assert resp.status_code < 500, describe(resp)
    if resp.status_code >= 400:
        assert_status(resp, resp.status_code)
        return
    # Accepted: what the server stored and sends must still be JSON every client can parse
    # (RFC 8259 has no Infinity/NaN), or every list and watch of the collection breaks.
    try:
        obj = strict_json(resp.text)
    except ValueError as exc:
        pytest.fail("accepted, but the response is not valid JSON (%s): %s" % (exc, resp.text[:300]))
    collection = "/apis/apps/v1/namespaces/%s/deployments" % ns if "deployments" in path else PODS.format(ns=ns)
    listed = call("GET", url + collection)
    try:
        strict_json(listed.text)
    except ValueError as exc:
        pytest.fail("the collection's list is no longer valid JSON (%s)" % exc)
    assert obj["metadata"]["resourceVersion"]


def _body_of_size(name, size):
    body = pod(name)
    body["spec"]["padding"] = ""
    base = len(json.dumps(body, separators=(",", ":")))
    body["spec"]["padding"] = "x" * (size - base)
    data = json.dumps(body, separators=(",", ":"))
    assert len(data) == size
    return data


def test_body_size_limit_is_exactly_3_mib(cluster, env):
    url = env["url"]
    ns = unique("size")
    ensure_namespace(url, ns)
    before = store_snapshot(url)
    over = call("POST", url + PODS.format(ns=ns), data=_body_of_size("over", 3 * MIB + 1), headers=JSON)
    assert_status(over, 413, "RequestEntityTooLarge")
    assert_unchanged(before, store_snapshot(url))
    # The largest allowed body is stored and replicated whole.
    at = call("POST", url + PODS.format(ns=ns), data=_body_of_size("at-limit", 3 * MIB), headers=JSON)
    assert at.status_code == 201, describe(at)
    for ident in cluster.ids:
        got = expect(call("GET", cluster.url(ident) + POD.format(ns=ns, name="at-limit")), 200)
        assert got == at.json(), ident


def test_cluster_healthy_after_hostile_input(cluster, env):
    for ident in cluster.ids:
        assert call("GET", cluster.url(ident) + "/readyz").status_code == 200, ident
    resp = call("POST", env["url"] + PODS.format(ns=NS), json=pod("still-works"))
    assert resp.status_code == 201, describe(resp)
    for ident in cluster.ids:
        expect(call("GET", cluster.url(ident) + POD.format(ns=NS, name="still-works")), 200)


def test_no_request_was_answered_500(cluster, env):
    assert_no_internal_errors(cluster)
