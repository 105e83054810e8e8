"""ctl.printers: kubectl-style ages, pod and node status, tables."""
from datetime import datetime, timezone

import pytest

from ctl import printers
from shepherd_ha.model.resources import RESOURCES


@pytest.mark.parametrize("seconds,text", [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (330, "5m30s"),
    (600, "10m"), (179 * 60, "179m"), (3 * 3600, "3h"), (3 * 3600 + 20 * 60, "3h20m"),
    (8 * 3600, "8h"), (47 * 3600, "47h"), (48 * 3600, "2d"), (3 * 86400 + 4 * 3600, "3d4h"),
    (45 * 86400, "45d"), (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration(seconds, text):
    assert printers.human_duration(seconds) == text


def test_age_parses_rfc3339():
    now = datetime(2026, 11, 29, 17, 0, 0, tzinfo=timezone.utc)
    assert printers.age("2026-11-29T16:55:00Z", now) == "5m"
    assert printers.age("2026-11-29T16:59:59.5+00:00", now) == "0s"
    assert printers.age(None, now) == "<unknown>"


def test_pod_status():
    pod = {"status": {"phase": "Running", "containerStatuses": [
        {"state": {"running": {}}}, {"state": {"terminated": {"exitCode": 2}}}]}}
    assert printers.pod_status(pod) == "ExitCode:2"
    pod["status"]["containerStatuses"][1]["state"] = {"terminated": {"reason": "OOMKilled"}}
    assert printers.pod_status(pod) == "OOMKilled"
    pod["metadata"] = {"deletionTimestamp": "2026-11-29T17:00:00Z"}
    assert printers.pod_status(pod) == "Terminating"
    assert printers.pod_status({}) == "Pending"


def test_node_status_and_names():
    # as kubectl prints it (and the server's Table for kubectl): Unknown only without a Ready condition
    node = {"spec": {"unschedulable": True}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert printers.node_status(node) == "NotReady,SchedulingDisabled"
    assert printers.node_status({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}) == "NotReady"
    assert printers.node_status({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}) == "Ready"
    assert printers.node_status({"status": {"conditions": [{"type": "MemoryPressure", "status": "True"}]}}) \
        == "Unknown"
    assert printers.object_name(RESOURCES["deployments"], "web") == "deployment.apps/web"
    assert printers.type_name(RESOURCES["pods"]) == "pod"


def test_format_table_alignment():
    assert printers.format_table(["NAME", "AGE"], [["a-long-name", "1d"], ["b", "2d"]]) == [
        "NAME          AGE", "a-long-name   1d", "b             2d"]


def test_config_map_row_counts_keys():
    cm = {"metadata": {"name": "web-config", "creationTimestamp": "2026-01-01T00:00:00Z"},
          "data": {"a": "1", "b": "2"}, "binaryData": {"c": "Mw=="}}
    now = datetime(2026, 1, 1, 0, 5, tzinfo=timezone.utc)
    r = RESOURCES["configmaps"]
    assert printers.table_headers(r) == ["NAME", "DATA", "AGE"]
    assert printers.table_row(r, cm, now=now) == ["web-config", "3", "5m"]


def test_replica_sets_and_services_have_kubectls_columns():
    rs = {"metadata": {"name": "web-1"}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                                 "template": {"spec": {"containers": [{"name": "c", "image": "i:1"}]}}},
          "status": {"replicas": 3, "readyReplicas": 2}}
    r = RESOURCES["replicasets"]
    assert printers.table_headers(r) == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    assert printers.table_row(r, rs)[:4] == ["web-1", "3", "3", "2"]
    assert printers.table_row(r, rs, wide=True)[-3:] == ["c", "i:1", "app=web"]
    s = RESOURCES["services"]
    assert printers.table_headers(s) == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    lb = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.9",
                                                "ports": [{"port": 80, "nodePort": 30001}]}}
    assert printers.table_row(s, lb)[:5] == ["lb", "LoadBalancer", "10.96.0.9", "<pending>", "80:30001/TCP"]
    lb["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}
    assert printers.table_row(s, lb)[3] == "192.0.2.7"
    plain = {"metadata": {"name": "p"}, "spec": {"clusterIP": "None", "externalIPs": ["192.0.2.8"]}}
    assert printers.table_row(s, plain)[1:4] == ["ClusterIP", "None", "192.0.2.8"]
