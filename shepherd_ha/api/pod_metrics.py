"""metrics.k8s.io/v1beta1 PodMetrics, read-only (`kubectl top pods`).

    GET /apis/metrics.k8s.io/v1beta1/pods                              all namespaces
    GET /apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods              one namespace
    GET /apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{name}       one pod
    ?labelSelector=  ?fieldSelector= (the pods' own fields)

The pods come from this replica's copy of the store (as NodeMetrics do); their usage
from the agents that run them, asked now (api/usage_scrape.py: concurrently, within a
deadline, with a signed metrics grant). Per container: CPU in nanocores, memory (the
working set) in Ki, as metrics-server writes them; `timestamp` is the agent's newest
sample and `window` the time since the one before it. A pod is listed when its
agent has two samples of it; a node whose agent does not answer is left out, its
pods with it, and a Warning header names it (kubectl prints it), as metrics-server
leaves out what it cannot scrape. One pod whose node does not answer: 503 saying so.

Authorization is RBAC's, by path: resource `pods` in group `metrics.k8s.io`
(namespaced). Asked for a Table (`kubectl get podmetrics`): NAME, CPU, MEMORY, WINDOW.
"""
from flask import Response, request

from shepherd_ha.model.quantity import usage_millicores
from shepherd_ha.model.selectors import SelectorError, parse_field_selector, parse_label_selector
from shepherd_ha.model.resources import Resource
from shepherd_ha.model.times import now_rfc3339
from shepherd_ha.store.raft_node import Unavailable

from . import tables, usage_scrape
from .bodies import dumps
from .errors import ApiError, unavailable
from .write_options import warning_value

GROUP_VERSION = "metrics.k8s.io/v1beta1"
RESOURCES = {"metrics.k8s.io/pods": Resource("pods", "PodMetrics", GROUP_VERSION, True, verbs=("get", "list"))}
MAX_WARNINGS = 5
_DONE_PHASES = ("Succeeded", "Failed")


# ---- Kubernetes quantities ----

def cpu_quantity(nanocores):
    """Nanocores in Kubernetes' canonical form: 0, 2, 250m, 3128545n."""
    n = max(0, int(nanocores))
    for divisor, suffix in ((10 ** 9, ""), (10 ** 6, "m"), (10 ** 3, "u")):
        if n and n % divisor == 0:
            return "%d%s" % (n // divisor, suffix)
    return "%dn" % n if n else "0"


def memory_quantity(nbytes):
    """Bytes as metrics-server writes them: whole Ki (a working set is whole pages)."""
    return "%dKi" % (max(0, int(nbytes)) // 1024)


def go_duration(seconds):
    """Seconds as a Go duration string, the form of `window`: 10s, 10.003s, 1m5.5s."""
    ms = max(0, int(round(float(seconds) * 1000)))
    minutes, ms = divmod(ms, 60000)
    text = ("%d.%03d" % divmod(ms, 1000)).rstrip("0").rstrip(".") + "s"
    return ("%dm" % minutes + text) if minutes else text


# ---- shapes ----

def pod_metrics(pod, usage):
    """The PodMetrics of a stored pod and its agent's answer (None: nothing to show)."""
    meta = pod.get("metadata") or {}
    if usage.get("uid") and meta.get("uid") and usage["uid"] != meta["uid"]:
        return None        # the agent's is an older pod of the same name
    reported = {c.get("name"): c for c in usage.get("containers") or [] if isinstance(c, dict)}
    containers = []
    for spec in (pod.get("spec") or {}).get("containers") or []:
        c = reported.get(spec.get("name")) if isinstance(spec, dict) else None
        if c is None:
            continue
        try:
            containers.append({"name": spec["name"], "usage": {
                "cpu": cpu_quantity(c.get("cpuNanoCores")), "memory": memory_quantity(c.get("memoryWorkingSetBytes"))}})
        except (TypeError, ValueError):
            continue
    try:
        window = go_duration(usage.get("windowSeconds"))
    except (TypeError, ValueError):
        return None
    if not containers:
        return None
    return {"kind": "PodMetrics", "apiVersion": GROUP_VERSION,
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                         "labels": dict(meta.get("labels") or {}),
                         "creationTimestamp": now_rfc3339()},
            "timestamp": usage.get("timestamp"), "window": window, "containers": containers}


def _table(table_request, items, revision):
    columns = [("Name", "string", "Name must be unique within a namespace."),
               ("CPU", "string", "CPU in use, all containers (millicores)"),
               ("Memory", "string", "memory in use (working set), all containers"),
               ("Window", "string", "what the CPU figure averages over")]
    rows = []
    for m in items:
        cpu = sum(usage_millicores(c["usage"]["cpu"]) for c in m["containers"])
        mem = sum(int(c["usage"]["memory"][:-2]) for c in m["containers"]) // 1024
        row = {"cells": [m["metadata"]["name"], "%dm" % cpu, "%dMi" % mem, m["window"]]}
        if table_request.include == "Metadata":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": table_request.api_version,
                             "metadata": m["metadata"]}
        elif table_request.include == "Object":
            row["object"] = m
        rows.append(row)
    return {"kind": "Table", "apiVersion": table_request.api_version,
            "metadata": {"resourceVersion": str(revision)},
            "columnDefinitions": [{"name": n, "type": t, "format": "name" if n == "Name" else "",
                                   "description": d, "priority": 0} for n, t, d in columns],
            "rows": rows}


# ---- serving ----

def _selected(pods, name=None):
    try:
        labels = parse_label_selector(request.args.get("labelSelector"))
        fields = parse_field_selector(request.args.get("fieldSelector"), "pods")
    except SelectorError as exc:
        raise ApiError(400, str(exc))
    return [p for p in pods if (name is None or (p.get("metadata") or {}).get("name") == name)
            and labels.matches((p.get("metadata") or {}).get("labels")) and fields.matches(p)
            and (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase") not in _DONE_PHASES]


def _nodes(replica, names):
    if len(names) > 20:
        listed, _ = replica.list("nodes", None, False)
        return [n for n in listed if (n.get("metadata") or {}).get("name") in names]
    found = (replica.get("nodes", None, name, False)[0] for name in sorted(names))
    return [n for n in found if n is not None]


def collect(replica, namespace, name=None, grants=None, outbound=None, scrape=usage_scrape.scrape):
    """(PodMetrics items, {node: why left out}, {node: pods left out}, store revision)."""
    try:
        listed, revision = replica.list("pods", namespace, False)
        pods = _selected(listed, name)
        wanted = {p["spec"]["nodeName"] for p in pods}
        nodes = _nodes(replica, wanted)
    except Unavailable as exc:
        raise unavailable(exc)
    answers, failures = scrape(nodes, namespace or "", name or "", replica.id, grants, outbound)
    for missing in wanted - set(answers) - set(failures):
        failures[missing] = "its Node object is gone"
    usage = {}
    for node_name, reported in answers.items():
        for u in reported:
            usage[(node_name, u.get("namespace"), u.get("name"))] = u
    items, left_out = [], {}
    for p in pods:
        meta, node_name = p.get("metadata") or {}, p["spec"]["nodeName"]
        if node_name in failures:
            left_out[node_name] = left_out.get(node_name, 0) + 1
            continue
        u = usage.get((node_name, meta.get("namespace"), meta.get("name")))
        m = pod_metrics(p, u) if u is not None else None
        if m is not None:
            items.append(m)
    items.sort(key=lambda m: (m["metadata"]["namespace"] or "", m["metadata"]["name"] or ""))
    return items, failures, left_out, revision


def warnings(failures, left_out):
    """The Warning header texts for nodes left out (at most MAX_WARNINGS, then a count)."""
    texts = ["the usage of %d pod(s) on node %s is left out: %s" % (left_out[n], n, failures[n])
             for n in sorted(left_out)]
    if len(texts) > MAX_WARNINGS:
        texts = texts[:MAX_WARNINGS] + ["and %d more node(s) did not answer" % (len(texts) - MAX_WARNINGS)]
    return texts


def register(app, replica, grants=None, outbound=None):
    """grants: the replica's credentials (signs metrics grants; None: the agents want none)."""

    def answer(body, texts=()):
        resp = Response(dumps(body), content_type="application/json")
        for text in texts:
            resp.headers.add("Warning", warning_value(text))
        return resp

    def listing(namespace=None):
        table_request = tables.requested()
        items, failures, left_out, revision = collect(replica, namespace, None, grants, outbound)
        if table_request is not None:
            return answer(_table(table_request, items, revision), warnings(failures, left_out))
        return answer({"kind": "PodMetricsList", "apiVersion": GROUP_VERSION,
                       "metadata": {"resourceVersion": str(revision)}, "items": items},
                      warnings(failures, left_out))

    app.add_url_rule("/apis/%s/pods" % GROUP_VERSION, "pod_metrics_all", lambda: listing())
    app.add_url_rule("/apis/%s/namespaces/<namespace>/pods" % GROUP_VERSION, "pod_metrics_list",
                     lambda namespace: listing(namespace))

    @app.get("/apis/%s/namespaces/<namespace>/pods/<name>" % GROUP_VERSION)
    def get_pod_metrics(namespace, name):
        table_request = tables.requested()
        items, failures, left_out, revision = collect(replica, namespace, name, grants, outbound)
        if left_out:
            [(node, why)] = [(n, failures[n]) for n in left_out]
            raise ApiError(503, "the usage of pod %s/%s cannot be read: node %s: %s" % (namespace, name, node, why),
                           headers={"Retry-After": "5"})
        if not items:
            raise ApiError(404, 'podmetrics.metrics.k8s.io "%s/%s" not found: no such pod runs, or its agent has '
                                'no two samples of it yet (one every 10 s)' % (namespace, name), "NotFound",
                           details={"name": name, "group": "metrics.k8s.io", "kind": "pods"})
        if table_request is not None:
            return answer(_table(table_request, items, revision))
        return answer(items[0])
