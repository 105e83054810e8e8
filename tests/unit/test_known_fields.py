"""The schema of known fields (shepherd_ha/model/known_fields.py): unknown fields are
found at any depth with Kubernetes-style paths and pruned; every field our own
defaults, validators and writers use is known, so pruning never loses real data."""
import copy

from shepherd_ha.model.defaults import apply_defaults
from shepherd_ha.model.known_fields import SCHEMAS, prune_unknown
from shepherd_ha.model.resources import RESOURCES


def test_every_served_kind_has_a_schema():
    assert set(SCHEMAS) == set(RESOURCES)


def test_unknown_fields_are_found_and_pruned_at_any_depth():
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"any-key": "x"}},
           "spec": {"replicaz": 3, "template": {"spec": {"containers": [
               {"name": "a", "image": "x", "ports": [{"containerPort": 80, "bogus": 1}]},
               {"name": "b", "image": "y", "$setElementOrder/env": []}]}}},
           "extra": {"deep": 1}}
    pruned, unknown = prune_unknown("deployments", dep)
    assert unknown == ["spec.replicaz", "spec.template.spec.containers[0].ports[0].bogus",
                       "spec.template.spec.containers[1].$setElementOrder/env", "extra"]
    assert pruned["metadata"]["labels"] == {"any-key": "x"}
    assert pruned["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 80}]
    assert "extra" not in pruned and "replicaz" not in pruned["spec"]
    assert "bogus" in dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]     # input untouched


def test_a_full_pod_and_its_defaults_are_all_known():
    probe = {"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"}, "initialDelaySeconds": 1}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "n", "labels": {"a": "b"}, "annotations": {"x": "y"},
                        "finalizers": ["a/b"], "generateName": "p-",
                        "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u",
                                             "controller": True, "blockOwnerDeletion": True}]},
           "spec": {"nodeName": "n1", "nodeSelector": {"k": "v"}, "restartPolicy": "Always", "hostNetwork": False,
                    "terminationGracePeriodSeconds": 3, "activeDeadlineSeconds": 9,
                    "volumes": [{"name": "c", "configMap": {"name": "cm", "items": [{"key": "k", "path": "p"}]}},
                                {"name": "e", "emptyDir": {"sizeLimit": "1Gi"}}, {"name": "h", "hostPath": {"path": "/x"}}],
                    "containers": [{"name": "c", "image": "i", "command": ["a"], "args": ["b"], "workingDir": "/",
                                    "env": [{"name": "A", "value": "1"},
                                            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}],
                                    "envFrom": [{"prefix": "P_", "configMapRef": {"name": "cm"}}],
                                    "ports": [{"containerPort": 80, "hostPort": 8080, "name": "http"}],
                                    "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}},
                                    "volumeMounts": [{"name": "c", "mountPath": "/c", "readOnly": True, "subPath": "s"}],
                                    "livenessProbe": probe, "readinessProbe": {"tcpSocket": {"port": 80}},
                                    "startupProbe": {"exec": {"command": ["true"]}}}]},
           "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}], "hostIP": "1.1.1.1",
                      "startTime": "t", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t"}],
                      "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0, "image": "i",
                                             "imageID": "x", "containerID": "docker://1", "started": True,
                                             "state": {"running": {"startedAt": "t"}},
                                             "lastState": {"terminated": {"exitCode": 1}}}]}}
    defaulted = apply_defaults("pods", copy.deepcopy(pod))
    assert prune_unknown("pods", defaulted) == (defaulted, [])


def test_defaulted_deployments_services_and_nodes_are_all_known():
    dep = {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
                                               "template": {"metadata": {"labels": {"a": "b"}},
                                                            "spec": {"containers": [{"name": "c", "image": "i"}]}}},
           "status": {"replicas": 1, "readyReplicas": 1, "observedGeneration": 2,
                      "conditions": [{"type": "Available", "status": "True", "lastUpdateTime": "t"}]}}
    svc = {"metadata": {"name": "s"}, "spec": {"selector": {"a": "b"}, "ports": [{"port": 80, "name": "h"}],
                                               "clusterIP": "10.96.0.1"}}
    node = {"metadata": {"name": "n"}, "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "t"}],
                       "capacity": {"cpu": "2"}, "allocatable": {"cpu": "2"},
                       "addresses": [{"type": "InternalIP", "address": "1.2.3.4"}],
                       "nodeInfo": {"kubeletVersion": "x", "architecture": "amd64"},
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                       "usage": {"cpuPercent": 3.0, "memoryUsedBytes": 1}}}
    for plural, obj in (("deployments", dep), ("services", svc), ("nodes", node)):
        defaulted = apply_defaults(plural, obj)
        assert prune_unknown(plural, defaulted) == (defaulted, []), plural
