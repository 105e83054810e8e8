"""Status fields are typed for every kind: a wrong type is a cause naming the field (what
the API answers 422 with), and everything the agents and controllers write passes."""
import threading

import pytest

from agent import status as S
from agent.node import NodeManager
from agent.runtime.hollow_runtime import HollowRuntime
from shepherd_ha.controllers.node_lifecycle import with_ready_condition
from shepherd_ha.model.validation import validate_object

POD_SPEC = {"containers": [{"name": "c", "image": "i"}]}
TEMPLATE = {"metadata": {"labels": {"app": "a"}}, "spec": POD_SPEC}


def obj(resource, status):
    meta = {"name": "x"} if resource in ("nodes", "namespaces") else {"name": "x", "namespace": "default"}
    base = {"nodes": {}, "namespaces": {}, "pods": {"spec": POD_SPEC},
            "services": {"spec": {"selector": {"app": "a"}, "ports": [{"port": 80}]}},
            "deployments": {"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": TEMPLATE}},
            "configmaps": {}, "leases": {}}[resource]
    return dict(base, metadata=meta, status=status)


def fields(resource, status):
    return {c.field: c.message for c in validate_object(resource, obj(resource, status))}


@pytest.mark.parametrize("resource,status,field,words", [
    ("nodes", {"conditions": 1}, "status.conditions", "must be a list of objects"),
    ("nodes", {"conditions": [1]}, "status.conditions[0]", "must be an object"),
    ("nodes", {"conditions": [{"status": "True"}]}, "status.conditions[0].type", "is required"),
    ("nodes", {"conditions": [{"type": "Ready", "status": True}]}, "status.conditions[0].status", '"True"'),
    ("nodes", {"conditions": [{"type": "Ready", "status": "Yes"}]}, "status.conditions[0].status", "Unknown"),
    ("nodes", {"conditions": [{"type": "Ready", "status": "True", "reason": 3}]}, "status.conditions[0].reason",
     "must be a string"),
    ("nodes", {"allocatable": 1}, "status.allocatable", "must be an object"),
    ("nodes", {"allocatable": {"cpu": "lots"}}, "status.allocatable.cpu", "CPU quantity"),
    ("nodes", {"capacity": {"memory": [1]}}, "status.capacity.memory", "memory quantity"),
    ("nodes", {"allocatable": {"pods": "many"}}, "status.allocatable.pods", "number of pods"),
    ("nodes", {"addresses": "10.0.0.1"}, "status.addresses", "list of objects"),
    ("nodes", {"nodeInfo": {"kubeletVersion": 1}}, "status.nodeInfo.kubeletVersion", "must be a string"),
    ("nodes", {"daemonEndpoints": {"kubeletEndpoint": {"Port": "10250"}}},
     "status.daemonEndpoints.kubeletEndpoint.Port", "integer"),
    ("nodes", {"usage": 5}, "status.usage", "must be an object"),
    ("nodes", "Ready", "status", "must be an object"),
    ("pods", {"podIP": {"a": 1}}, "status.podIP", "must be a string"),
    ("pods", {"podIP": "not-an-ip"}, "status.podIP", "not an IP address"),
    ("pods", {"podIPs": [{"ip": 1}]}, "status.podIPs[0].ip", "must be a string"),
    ("pods", {"hostIP": 7}, "status.hostIP", "must be a string"),
    ("pods", {"conditions": {"Ready": "True"}}, "status.conditions", "must be a list of objects"),
    ("pods", {"phase": 1}, "status.phase", "not supported"),
    ("pods", {"containerStatuses": [{"name": "c", "restartCount": "3"}]}, "status.containerStatuses[0].restartCount",
     "integer"),
    ("pods", {"containerStatuses": [{"name": "c", "ready": "yes"}]}, "status.containerStatuses[0].ready",
     "true or false"),
    ("pods", {"containerStatuses": [{"name": "c", "state": {"running": 1}}]},
     "status.containerStatuses[0].state.running", "must be an object"),
    ("pods", {"startTime": "garbage"}, "status.startTime", "RFC 3339 time"),
    ("pods", {"startTime": "2026-01-01"}, "status.startTime", "RFC 3339 time"),
    ("pods", {"containerStatuses": [{"name": "c", "state": {"terminated": {"finishedAt": "yesterday"}}}]},
     "status.containerStatuses[0].state.terminated.finishedAt", "RFC 3339 time"),
    ("nodes", {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "garbage"}]},
     "status.conditions[0].lastHeartbeatTime", "RFC 3339 time"),
    ("nodes", {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-13-45T00:00:00Z"}]},
     "status.conditions[0].lastHeartbeatTime", "RFC 3339 time"),
    ("deployments", {"replicas": "3"}, "status.replicas", "integer"),
    ("deployments", {"availableReplicas": -1}, "status.availableReplicas", "integer of 0 or more"),
    ("deployments", {"conditions": 1}, "status.conditions", "must be a list of objects"),
    ("namespaces", {"phase": "Gone"}, "status.phase", "not supported"),
    ("services", {"loadBalancer": {"ingress": 1}}, "status.loadBalancer.ingress", "list of objects"),
    ("configmaps", [1], "status", "must be an object"),
])
def test_a_wrong_type_names_its_field(resource, status, field, words):
    found = fields(resource, status)
    assert field in found, found
    assert words in found[field], found[field]


def test_what_agents_write_passes():
    manager = NodeManager(None, HollowRuntime("n1"), "n1", "10.0.0.7", threading.Event(), port=10250,
                          cpu_millicores=2000, memory_bytes=4 << 30)
    node = manager.node_object(usage={"cpuPercent": 1.0, "timestamp": "2026-01-01T00:00:00Z", "containers": 2})
    assert validate_object("nodes", node) == []
    t0, t1, t2, now = ("2026-01-01T00:00:0%dZ" % i for i in range(4))     # times as the agents write them
    statuses = [S.container_status("c", "i", S.running(t0), ready=True, restart_count=2,
                                   last_state=S.terminated(1, t1, t2, container_id="abc"), container_id="abc")]
    status = S.build_pod_status({"status": {"phase": "Pending"}}, statuses, "Running", "172.17.0.2", "10.0.0.7",
                                t0, now)
    assert fields("pods", status) == {}


def test_what_controllers_write_passes():
    node = obj("nodes", {"conditions": [{"type": "Ready", "status": "True"}]})
    assert fields("nodes", with_ready_condition(node, "Unknown", "NodeStatusUnknown", "lease not renewed",
                                                "2026-01-01T00:00:00Z")) == {}
    deployment_status = {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 1,
                         "availableReplicas": 1, "unavailableReplicas": 2,
                         "conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                                         "message": "m", "lastUpdateTime": "2026-01-01T00:00:00Z",
                                         "lastTransitionTime": "2026-01-01T00:00:00.123456Z"}]}
    assert fields("deployments", deployment_status) == {}
    assert fields("namespaces", {"phase": "Terminating"}) == {}
    assert fields("pods", {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes",
         "lastTransitionTime": "2026-01-01T01:00:00+01:00", "lastProbeTime": None}]}) == {}


def test_other_fields_controllers_read_are_typed():
    event = {"metadata": {"name": "e", "namespace": "default"}, "involvedObject": {"kind": "Pod", "name": "p"},
             "lastTimestamp": 5, "source": "me"}
    found = {c.field: c.message for c in validate_object("events", event)}
    assert "must be a string" in found["lastTimestamp"] and "must be an object" in found["source"]
    endpoints = {"metadata": {"name": "e", "namespace": "default"},
                 "subsets": [{"addresses": [{"ip": "10.0.0.1", "targetRef": "p", "nodeName": 1}]}]}
    found = {c.field: c.message for c in validate_object("endpoints", endpoints)}
    assert set(found) == {"subsets[0].addresses[0].targetRef", "subsets[0].addresses[0].nodeName"}
    owned = obj("pods", {})
    owned["metadata"]["ownerReferences"] = [{"kind": "Deployment", "name": "d", "uid": "u", "blockOwnerDeletion": 1}]
    found = {c.field: c.message for c in validate_object("pods", owned)}
    assert "true or false" in found["metadata.ownerReferences[0].blockOwnerDeletion"]
