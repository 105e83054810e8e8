"""Hypothesis strategies for the API fuzz campaign (test_fuzz_api.py): requests of every
kind against a running cluster. Mostly plausible (known resources, the fuzz namespace, a
small pool of names so that updates and deletes meet existing objects, valid-ish bodies
with one field mutated), often hostile (wrong types, huge numbers, lone surrogates, deep
nesting, garbage bytes, wrong content types, odd methods and headers)."""
import copy
import json

from hypothesis import strategies as st

NS = "fuzz"
NAMES = ("fz-a", "fz-b", "fz-c")
PLURALS = {"v1": ("pods", "services", "configmaps", "endpoints", "events", "namespaces", "nodes"),
           "apps/v1": ("deployments", "controllerrevisions"), "coordination.k8s.io/v1": ("leases",)}
CLUSTER_SCOPED = ("namespaces", "nodes")
SUBRESOURCES = ("status", "scale", "log", "exec", "")

HUGE = "9" * 4301
SURROGATE = "\ud800"

PODSPEC = {"containers": [{"name": "main", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
                           "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                           "env": [{"name": "A", "value": "b"}]}],
           "restartPolicy": "Always", "terminationGracePeriodSeconds": 30}
TEMPLATES = {
    "pods": {"spec": PODSPEC},
    "services": {"spec": {"selector": {"app": "fz"}, "ports": [{"port": 80, "targetPort": 8080}]}},
    "configmaps": {"data": {"k": "v"}},
    "endpoints": {"subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]},
    "events": {"involvedObject": {"kind": "Pod", "name": "fz-a", "namespace": NS}, "reason": "Fuzz",
               "message": "m", "type": "Normal", "count": 1},
    "namespaces": {},
    "nodes": {"status": {"capacity": {"cpu": "2", "memory": "2Gi", "pods": "10"}}},
    "deployments": {"spec": {"replicas": 0, "selector": {"matchLabels": {"app": "fz"}},
                             "template": {"metadata": {"labels": {"app": "fz"}}, "spec": PODSPEC}}},
    "controllerrevisions": {"revision": 1, "data": {}},
    "leases": {"spec": {"holderIdentity": "fz", "leaseDurationSeconds": 40}},
}
KINDS = {"pods": "Pod", "services": "Service", "configmaps": "ConfigMap", "endpoints": "Endpoints",
         "events": "Event", "namespaces": "Namespace", "nodes": "Node", "deployments": "Deployment",
         "controllerrevisions": "ControllerRevision", "leases": "Lease"}
GROUP = {p: gv for gv, plurals in PLURALS.items() for p in plurals}


def base_object(plural, name, namespace=NS):
    obj = {"apiVersion": GROUP.get(plural, "v1"), "kind": KINDS.get(plural, "Thing"),
           "metadata": {"name": name, "labels": {"app": "fz"}, "annotations": {"note": "fuzz"}}}
    if plural not in CLUSTER_SCOPED:
        obj["metadata"]["namespace"] = namespace
    obj.update(copy.deepcopy(TEMPLATES.get(plural, {})))
    return obj


# ---- values ----

texts = st.one_of(st.sampled_from(["", "a", "fz-a", "x" * 300, SURROGATE, "a" + SURROGATE, "\udfff", "é", "日本",
                                   "\x00", "../..", "%00", "{}", "null", HUGE]), st.text(max_size=20))
numbers = st.one_of(st.integers(-2 ** 70, 2 ** 70), st.sampled_from([0, -1, 2 ** 63, 2 ** 64, 10 ** 400]),
                    st.floats(allow_nan=False, allow_infinity=False))
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(texts, inner, max_size=3)),
                           max_leaves=8)


def _paths(value, prefix=()):
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, prefix + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, prefix + (index,))
    return out


def _deep(depth):
    value = "bottom"
    for _ in range(depth):
        value = {"d": value}
    return value


def near(value):
    """Values of about the same kind as `value`: the object stays plausible, one field is off."""
    if isinstance(value, bool):
        return st.sampled_from([not value, "true", 1, None])
    if isinstance(value, int):
        return st.sampled_from([-1, 0, 2 ** 31, 2 ** 63, 10 ** 30, 1.5, "80", value + 1])
    if isinstance(value, str):
        return st.sampled_from(["", value + SURROGATE, "x" * 300, value.upper() + "_", "日本", value + "-2",
                                "1" + value, "0.5", "-1", "999999999999Gi"])
    if isinstance(value, list):
        return st.sampled_from([[], value + value, [None], value * 30])
    if isinstance(value, dict):
        return st.sampled_from([{}, dict(value, extra="x"), None])
    return json_values


@st.composite
def mutated(draw, obj):
    """`obj` with up to three fields changed a little or a lot, removed, or added."""
    obj = copy.deepcopy(obj)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 1, 2, 3]))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["near"] * 4 + ["replace", "replace", "remove", "add", "deep"]))
        if action == "near":
            parent[path[-1]] = draw(near(parent[path[-1]]))
        elif action == "remove":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(texts)] = draw(json_values)
        elif action == "deep":
            parent[path[-1]] = _deep(draw(st.sampled_from([5, 99, 101, 150])))
        else:
            parent[path[-1]] = draw(json_values)
    return obj


def encode(value):
    """JSON text; lone surrogates are sent as \\ud800 escapes (what json.dumps writes)."""
    try:
        return json.dumps(value).encode()
    except (ValueError, OverflowError):
        return b'{"metadata": {"name": "unencodable"}}'


@st.composite
def bodies(draw, plural, name, create=False):
    kinds = ["object"] * (24 if create else 6) + ["patch", "patch", "raw", "none", "huge-number", "deep"]
    kind = draw(st.sampled_from(kinds))
    if kind == "object":
        return encode(draw(mutated(base_object(plural, name))))
    if kind == "patch":
        return encode(draw(mutated({"metadata": {"labels": {"app": "fz2"}, "annotations": {"n": "x"}},
                                    "spec": {"replicas": 1}, "status": {"phase": "Running"}})))
    if kind == "raw":
        return draw(st.sampled_from([b"", b"{", b"[]", b"null", b"42", b'"x"', b"\xff\xfe", b"{\"a\": NaN}",
                                     b"[" * 5000 + b"]" * 5000, b'{"metadata": {"name": "\\ud800"}}',
                                     b'{"a": 1e999}', b'\x00' * 10])) + draw(st.binary(max_size=20))
    if kind == "huge-number":
        text = encode(base_object(plural, name)).decode()
        return (text[:-1] + ', "spec": {"replicas": %s, "terminationGracePeriodSeconds": %s}}'
                % (draw(st.sampled_from(["1" + "0" * 30, HUGE[:4000], "-1", "1e308", "2.5"])),
                   draw(st.sampled_from(["1" + "0" * 30, "9" * 19, "-5", "1.5"])))).encode()
    if kind == "deep":
        return b'{"metadata": {"name": "d"}, "x": ' + b'{"a": ' * 120 + b"1" + b"}" * 120 + b"}"
    return None


# ---- requests ----

query_values = st.one_of(st.sampled_from(["0", "1", "-1", "true", "false", "", HUGE, "1e3", "²", "10",
                                          "2026-01-01T00:00:00Z", "app=fz", "app in (fz", "spec.nodeName=n1",
                                          "metadata.name=fz-a", "Orphan", "Foreground", "x" * 500, SURROGATE]),
                         st.integers(-5, 2 ** 64).map(str), st.text(max_size=10))
QUERY_KEYS = ("resourceVersion", "timeoutSeconds", "labelSelector", "fieldSelector", "gracePeriodSeconds",
              "propagationPolicy", "tailLines", "sinceSeconds", "sinceTime", "follow", "previous", "timestamps",
              "container", "limit", "continue", "allowWatchBookmarks", "digest", "dryRun", "x")


@st.composite
def paths(draw):
    """(path, plural, name)."""
    plural = draw(st.sampled_from(sorted(GROUP) + ["widgets", ""]))
    gv = GROUP.get(plural, draw(st.sampled_from(["v1", "apps/v1", "v2"])))
    if draw(st.integers(0, 9)) == 0:
        gv = draw(st.sampled_from(["v1", "apps/v1", "coordination.k8s.io/v1"]))     # the wrong group
    prefix = "/api/v1" if gv == "v1" else "/apis/" + gv
    name = draw(st.one_of(st.sampled_from(NAMES), st.sampled_from(["", "UPPER", "a" * 300, "%ED%A0%80", "..",
                                                                   "%2F", "x.y", "-a", "fz-new"]),
                          st.text(alphabet="abc-.%", max_size=8)))
    namespace = draw(st.sampled_from([NS] * 6 + ["default", "Bad_NS", "nosuch", "a" * 70, "%ED%A0%80"]))
    shape = draw(st.sampled_from(["collection"] * 3 + ["item"] * 3 + ["sub", "all-namespaces", "other"]))
    if shape == "other":
        return draw(st.sampled_from(["/", "/healthz", "/readyz", "/metrics", "/version", "/shepherd/v1/replica",
                                     "/shepherd/v1/cluster", "/api", "/apis", "/api/v1", "//api/v1/pods",
                                     "/api/v1/namespaces/%s/pods/%s/log/x" % (NS, NAMES[0]),
                                     "/shepherd/v1/replica?digest=1", "/api/v1/namespaces/" + NS])), None, None
    cluster_scoped = plural in CLUSTER_SCOPED
    base = prefix if (cluster_scoped or shape == "all-namespaces") else "%s/namespaces/%s" % (prefix, namespace)
    path = "%s/%s" % (base, plural)
    if shape in ("item", "sub"):
        path += "/" + name
    if shape == "sub":
        path += "/" + draw(st.sampled_from(SUBRESOURCES))
    return path, plural, name if shape in ("item", "sub") else None


@st.composite
def creates(draw):
    """A well-formed create of a plausible object (one field maybe off): what gets past
    validation is what the controllers must then cope with."""
    plural = draw(st.sampled_from(["pods", "deployments", "deployments", "services", "configmaps", "endpoints",
                                   "events", "leases", "nodes", "controllerrevisions"]))
    name = "fz-%s" % draw(st.uuids()).hex[:10]
    prefix = "/api/v1" if GROUP[plural] == "v1" else "/apis/" + GROUP[plural]
    path = "%s/%s" % (prefix, plural) if plural in CLUSTER_SCOPED else "%s/namespaces/%s/%s" % (prefix, NS, plural)
    obj = draw(mutated(base_object(plural, name)))
    return {"method": "POST", "path": path, "params": {}, "headers": {"Content-Type": "application/json"},
            "body": encode(obj), "auth": "admin", "plural": plural, "name": None}


def requests_():
    return st.one_of(any_request(), any_request(), any_request(), creates())


@st.composite
def any_request(draw):
    """A dict: method, path, params, headers, body (bytes or None)."""
    path, plural, name = draw(paths())
    if name is None:       # a collection: mostly lists, watches and creates
        method = draw(st.sampled_from(["GET"] * 4 + ["POST"] * 5 + ["PUT", "DELETE", "HEAD", "OPTIONS", "FOO"]))
    else:
        method = draw(st.sampled_from(["GET"] * 3 + ["PUT"] * 3 + ["PATCH"] * 3 + ["DELETE"] * 2 + [
            "POST", "HEAD", "OPTIONS", "TRACE"]))
    params = draw(st.one_of(st.just({}), st.dictionaries(st.sampled_from(QUERY_KEYS), query_values, max_size=3)))
    if method == "GET" and draw(st.integers(0, 3)) == 0:
        params["watch"] = draw(st.sampled_from(["1", "true", "0", "yes", "maybe"]))
    if params.get("watch", "").lower() in ("1", "true", "yes") or params.get("follow", "").lower() in ("1", "true", "yes"):
        # a stream that is valid stays open: keep it short (an invalid timeout is answered at once)
        # (an empty one is no timeout at all, as absent: the server's default, minutes)
        if params.get("timeoutSeconds") in (None, "") or params["timeoutSeconds"].isdigit() \
                and len(params["timeoutSeconds"]) < 12:
            params["timeoutSeconds"] = "1"
    body = None
    if method in ("POST", "PUT", "PATCH", "DELETE") or draw(st.integers(0, 9)) == 0:
        fresh = "fz-" + draw(st.text(alphabet="abcdefghij0123456789", min_size=4, max_size=8))
        create = method == "POST" and name is None
        pool = NAMES + (fresh,) * (6 if create else 2)
        body = draw(bodies(plural or "configmaps", name or draw(st.sampled_from(pool)), create))
    headers = {"Content-Type": draw(st.sampled_from(["application/json"] * 4 + [
        "application/merge-patch+json"] * 3 + ["application/json-patch+json", "text/plain", "", "application/yaml",
                                               "multipart/form-data; boundary=x", "application/json; charset=latin-1"]))}
    auth = draw(st.sampled_from(["admin"] * 8 + ["viewer", "node", "none", "bad", "garbage"]))
    extra = draw(st.sampled_from([None, None, None, ("Idempotency-Key", "fz-key"), ("Idempotency-Key", "k" * 200),
                                  ("Expect", "100-continue"), ("Transfer-Encoding", "chunked"), ("chunked", "yes"),
                                  ("Content-Encoding", "gzip"), ("X-Forwarded-For", "1.2.3.4"),
                                  ("Accept", "application/vnd.kubernetes.protobuf")]))
    if extra:
        headers[extra[0]] = extra[1]
    return {"method": method, "path": path, "params": params, "headers": headers, "body": body, "auth": auth,
            "plural": plural, "name": name}
