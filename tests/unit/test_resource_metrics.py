"""metrics.k8s.io NodeMetrics from the usage agents post in node status."""
from shepherd_ha.api import discovery
from shepherd_ha.api.resource_metrics import node_metrics


def node(usage, cpu="4"):
    return {"metadata": {"name": "n1", "labels": {"a": "b"}},
            "status": {"capacity": {"cpu": cpu, "memory": "8Gi"}, "usage": usage}}


def test_node_metrics_shape_from_agent_usage():
    m = node_metrics(node({"cpuPercent": 25.0, "memoryUsedBytes": 3 * 1024 ** 3, "timestamp": "2026-12-02T00:00:00Z"}))
    assert m == {"kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                 "metadata": {"name": "n1", "labels": {"a": "b"}, "creationTimestamp": "2026-12-02T00:00:00Z"},
                 "timestamp": "2026-12-02T00:00:00Z", "window": "30s",
                 "usage": {"cpu": "1000000000n", "memory": "3145728Ki"}}, "25% of 4 cores is 1 core"


def test_no_usage_or_unreadable_usage_gives_no_metrics():
    assert node_metrics(node(None)) is None
    assert node_metrics(node({"cpuPercent": "x", "memoryUsedBytes": 1})) is None
    assert node_metrics(node({"cpuPercent": 1, "memoryUsedBytes": 1}, cpu="lots")) is None


def test_discovery_lists_the_metrics_group_read_only():
    groups = [g["name"] for g in discovery.api_group_list()["groups"]]
    assert "metrics.k8s.io" in groups
    entries = discovery.api_resource_list("metrics.k8s.io", "v1beta1")["resources"]
    assert sorted((e["name"], e["kind"], e["verbs"], e["namespaced"]) for e in entries) == [
        ("nodes", "NodeMetrics", ["get", "list"], False), ("pods", "PodMetrics", ["get", "list"], True)]
