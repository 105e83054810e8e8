"""metrics.k8s.io/v1beta1 NodeMetrics, read-only (`kubectl top nodes`), from what the
agents already post in their node status (`status.usage`, every --status-interval):
cpu as cores in use (cpuPercent of the node's cpu capacity, in nanocores), memory
in use (memoryUsedBytes, in Ki), stamped with the sample's time.

PodMetrics: api/pod_metrics.py (asked from the agents on request, not stored).
Authorization is RBAC's, by path: resource `nodes` in group `metrics.k8s.io`.
"""
from flask import Response

from shepherd_ha.model.quantity import QuantityError, parse_cpu
from shepherd_ha.model.resources import Resource
from shepherd_ha.store.raft_node import Unavailable

from .bodies import dumps
from .errors import ApiError, unavailable

GROUP_VERSION = "metrics.k8s.io/v1beta1"
RESOURCES = {"metrics.k8s.io/nodes": Resource("nodes", "NodeMetrics", GROUP_VERSION, False, verbs=("get", "list"))}
WINDOW = "30s"      # the agents' default status interval: what one sample averages over


def node_metrics(node):
    """The NodeMetrics of a Node object, or None when its agent posted no usage."""
    status = node.get("status") or {}
    usage = status.get("usage")
    if not isinstance(usage, dict) or "cpuPercent" not in usage or "memoryUsedBytes" not in usage:
        return None
    capacity = (status.get("capacity") or status.get("allocatable") or {}).get("cpu")
    try:
        millicores = parse_cpu(capacity)
        nanocores = int(float(usage["cpuPercent"]) / 100.0 * millicores * 1_000_000)
        memory_ki = max(0, int(usage["memoryUsedBytes"])) // 1024
    except (TypeError, ValueError, QuantityError):
        return None
    meta = node.get("metadata") or {}
    return {"kind": "NodeMetrics", "apiVersion": GROUP_VERSION,
            "metadata": {"name": meta.get("name"), "labels": dict(meta.get("labels") or {}),
                         "creationTimestamp": usage.get("timestamp")},
            "timestamp": usage.get("timestamp"), "window": WINDOW,
            "usage": {"cpu": "%dn" % max(0, nanocores), "memory": "%dKi" % memory_ki}}


def register(app, replica):
    def nodes():
        try:
            listed, revision = replica.list("nodes", None, False)
        except Unavailable as exc:
            raise unavailable(exc)
        return listed, revision

    @app.get("/apis/%s/nodes" % GROUP_VERSION)
    def list_node_metrics():
        listed, revision = nodes()
        items = [m for m in (node_metrics(n) for n in listed) if m is not None]
        return Response(dumps({"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION,
                               "metadata": {"resourceVersion": str(revision)}, "items": items}),
                        content_type="application/json")

    @app.get("/apis/%s/nodes/<name>" % GROUP_VERSION)
    def get_node_metrics(name):
        try:
            node, _ = replica.get("nodes", None, name, False)
        except Unavailable as exc:
            raise unavailable(exc)
        metrics = node_metrics(node) if node is not None else None
        if metrics is None:
            raise ApiError(404, 'nodemetrics.metrics.k8s.io "%s" not found%s' % (
                name, "" if node is None else ": its agent has posted no usage yet"), "NotFound",
                details={"name": name, "group": "metrics.k8s.io", "kind": "nodes"})
        return Response(dumps(metrics), content_type="application/json")
