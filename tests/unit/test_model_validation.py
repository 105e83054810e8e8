import copy
import random

import pytest

from shepherd_ha.model.defaults import apply_defaults
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.model.validation import (Cause, describe_causes, validate_object,
                                          validate_scale, validate_update)

CONTAINER = {
    "name": "web", "image": "nginx:1.25", "command": ["nginx"], "args": ["-g", "daemon off;"],
    "env": [{"name": "MODE", "value": "prod"}, {"name": "EMPTY"}],
    "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"},
              {"containerPort": 53, "hostPort": 5353, "protocol": "UDP"}],
    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"},
                  "limits": {"cpu": 1, "memory": "128Mi"}},
    "livenessProbe": {"httpGet": {"port": "http", "path": "/healthz"}, "periodSeconds": 5},
    "readinessProbe": {"tcpSocket": {"port": 80}, "successThreshold": 2},
    "imagePullPolicy": "IfNotPresent",
}

SAMPLES = {
    "pods": {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"},
                          "annotations": {"example.com/note": "anything: goes here"},
                          "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                               "name": "web", "uid": "u1",
                                               "controller": True}]},
             "spec": {"containers": [CONTAINER, {"name": "sidecar", "image": "busybox",
                                                 "livenessProbe": {"exec": {"command": ["true"]}}}],
                      "restartPolicy": "OnFailure", "nodeSelector": {"disk": "ssd"},
                      "nodeName": "node-1.example", "terminationGracePeriodSeconds": 0,
                      "activeDeadlineSeconds": 600}},
    "deployments": {"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"replicas": 3,
                             "selector": {"matchLabels": {"app": "web"},
                                          "matchExpressions": [{"key": "tier", "operator": "In",
                                                                "values": ["fe"]}]},
                             "template": {"metadata": {"labels": {"app": "web", "tier": "fe"}},
                                          "spec": {"containers": [CONTAINER]}},
                             "strategy": {"type": "RollingUpdate",
                                          "rollingUpdate": {"maxSurge": 1,
                                                            "maxUnavailable": "0%"}},
                             "minReadySeconds": 5, "progressDeadlineSeconds": 60}},
    "services": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                 "spec": {"selector": {"app": "web"}, "type": "ClusterIP",
                          "ports": [{"name": "http", "port": 80, "targetPort": "http"},
                                    {"name": "dns", "port": 53, "targetPort": 5353,
                                     "protocol": "UDP"}]}},
    "nodes": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1.example"},
              "spec": {"unschedulable": False}, "status": {"capacity": {"cpu": "4"}}},
    "events": {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web-1.17a8b"},
               "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"},
               "reason": "Scheduled", "message": "assigned to node-1", "type": "Normal",
               "count": 1},
    "endpoints": {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"},
                  "subsets": [{"addresses": [{"ip": "10.0.0.5", "targetRef": {"name": "p"}}],
                               "notReadyAddresses": [{"ip": "10.0.0.6"}],
                               "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}]},
    "namespaces": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
    "leases": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "node-1", "namespace": "kube-node-lease"},
               "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40,
                        "renewTime": "2026-11-29T17:00:00Z", "leaseTransitions": 0}},
    "configmaps": {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "web-config", "namespace": "default"},
                   "data": {"MODE": "prod", "nginx.conf": "worker_processes 1;\n", "a-b_c.d": ""},
                   "binaryData": {"logo.png": "iVBORw0KGgo="}, "immutable": False},
    "secrets": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"},
                "type": "Opaque", "data": {"password": "czNjcjN0"}, "immutable": False},
    "replicasets": {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": "web-5d8f7b9c6b", "namespace": "default",
                                 "labels": {"app": "web", "pod-template-hash": "5d8f7b9c6b"}},
                    "spec": {"replicas": 2, "minReadySeconds": 0,
                             "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d8f7b9c6b"}},
                             "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "5d8f7b9c6b"}},
                                          "spec": {"containers": [CONTAINER]}}}},
    "controllerrevisions": {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                            "metadata": {"name": "web-5d8f7b9c6b", "namespace": "default",
                                         "labels": {"app": "web", "pod-template-hash": "5d8f7b9c6b"}},
                            "revision": 2, "data": {"template": {"metadata": {"labels": {"app": "web"}},
                                                                 "spec": {"containers": [CONTAINER]}}}},
    "roles": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
              "metadata": {"name": "pod-reader", "namespace": "default"},
              "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
                        {"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": ["web"],
                         "verbs": ["patch"]}]},
    "clusterroles": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                     "metadata": {"name": "monitoring"},
                     "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                               {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
    "rolebindings": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                     "metadata": {"name": "alice-reads", "namespace": "default"},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
                     "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                                  {"kind": "ServiceAccount", "name": "builder", "namespace": "default"}]},
    "clusterrolebindings": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                            "metadata": {"name": "ops-monitoring"},
                            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                        "name": "monitoring"},
                            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "ops"}]},
}


def sample(plural):
    return copy.deepcopy(SAMPLES[plural])


def fields(causes):
    return [c.field for c in causes]


def cause_for(causes, field):
    found = [c for c in causes if c.field == field]
    assert found, "no cause for %s in %s" % (field, causes)
    return found[0].message


def test_every_resource_has_a_sample():
    assert set(SAMPLES) == set(RESOURCES)


@pytest.mark.parametrize("plural", sorted(SAMPLES))
def test_samples_are_valid(plural):
    assert validate_object(plural, sample(plural)) == []


@pytest.mark.parametrize("plural", sorted(SAMPLES))
def test_defaulted_samples_are_valid(plural):
    assert validate_object(plural, apply_defaults(plural, sample(plural))) == []


def test_minimal_objects_are_valid_after_defaults():
    minimal = {
        "pods": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
                                                                     "image": "i"}]}},
        "deployments": {"metadata": {"name": "d"}, "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}},
        "services": {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}},
        "nodes": {"metadata": {"name": "n"}},
        "events": {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}},
        "endpoints": {"metadata": {"name": "e"}},
        "namespaces": {"metadata": {"name": "n"}},
    }
    for plural, obj in minimal.items():
        assert validate_object(plural, obj) == [], plural
        assert validate_object(plural, apply_defaults(plural, obj)) == [], plural


def test_causes_are_named_tuples():
    causes = validate_object("pods", {"metadata": {}})
    assert causes and all(isinstance(c, Cause) for c in causes)
    assert causes[0]._fields == ("field", "message")


def test_unknown_resource_is_a_programming_error():
    with pytest.raises(ValueError):
        validate_object("widgets", {})


# --- metadata ------------------------------------------------------------------------

@pytest.mark.parametrize("obj", [None, [], "pod", 1, True])
def test_object_must_be_a_dict(obj):
    causes = validate_object("pods", obj)
    assert len(causes) == 1 and "must be a JSON object" in causes[0].message


def test_metadata_required():
    assert cause_for(validate_object("namespaces", {}), "metadata") == "is required"
    assert "must be an object" in cause_for(validate_object("namespaces", {"metadata": []}),
                                            "metadata")
    assert cause_for(validate_object("namespaces", {"metadata": {}}), "metadata.name") == \
        "is required"


def test_name_message_for_dns_labels():
    causes = validate_object("services", {"metadata": {"name": "Web_1"},
                                          "spec": {"ports": [{"port": 80}]}})
    assert describe_causes(causes) == (
        "metadata.name: 'Web_1' is not a valid name: use at most 63 lowercase letters, digits "
        "and '-', starting and ending with a letter or digit")


@pytest.mark.parametrize("plural, name, ok", [
    ("namespaces", "team-a", True), ("namespaces", "team.a", False),
    ("services", "web.v1", False), ("services", "a" * 63, True), ("services", "a" * 64, False),
    ("nodes", "node-1.example.com", True), ("pods", "web.1", True), ("pods", "a" * 253, True),
    ("pods", "a" * 254, False), ("pods", "-web", False), ("pods", "web-", False),
    ("pods", "Web", False), ("pods", "", False), ("pods", "web..1", False), ("pods", "1", True),
    ("events", "web-1.17a8b", True), ("deployments", "web_1", False),
    ("pods", "web\n", False),
])
def test_name_rules(plural, name, ok):
    obj = sample(plural)
    obj["metadata"]["name"] = name
    assert ("metadata.name" not in fields(validate_object(plural, obj))) is ok


@pytest.mark.parametrize("name", [1, None, [], {}, True])
def test_name_wrong_type(name):
    causes = validate_object("pods", dict(sample("pods"), metadata={"name": name}))
    assert "metadata.name" in fields(causes)


def test_namespace_rules():
    obj = sample("pods")
    obj["metadata"]["namespace"] = "Bad_NS"
    assert "not a valid namespace name" in cause_for(validate_object("pods", obj),
                                                     "metadata.namespace")
    node = sample("nodes")
    node["metadata"]["namespace"] = "default"
    assert "not namespaced" in cause_for(validate_object("nodes", node), "metadata.namespace")
    node["metadata"]["namespace"] = ""
    assert validate_object("nodes", node) == []


@pytest.mark.parametrize("labels, bad", [
    ({"app": "web", "example.com/tier": "fe", "empty": ""}, False),
    ({"app": 1}, True), ({"bad key": "x"}, True), ({"app": "-x"}, True), ({"": "x"}, True),
    ({"app": None}, True), ({"app": "v" * 64}, True), (["app"], True), ("app=web", True),
    ({"k" * 64: "x"}, True), ({"a/b/c": "x"}, True),
])
def test_labels(labels, bad):
    obj = sample("namespaces")
    obj["metadata"]["labels"] = labels
    assert ("metadata.labels" in fields(validate_object("namespaces", obj))) is bad


def test_annotations_allow_any_string_value_but_need_valid_keys():
    obj = sample("namespaces")
    obj["metadata"]["annotations"] = {"note": "free text, with spaces: and {json}"}
    assert validate_object("namespaces", obj) == []
    for bad in ({"note": 1}, {"bad key": "x"}, ["x"], {"big": "x" * (256 * 1024)}):
        obj["metadata"]["annotations"] = bad
        assert "metadata.annotations" in fields(validate_object("namespaces", obj))


def test_kind_and_api_version_must_match():
    obj = sample("pods")
    obj["kind"], obj["apiVersion"] = "Service", "apps/v1"
    causes = validate_object("pods", obj)
    assert "kind" in fields(causes) and "apiVersion" in fields(causes)
    assert "use Pod" in cause_for(causes, "kind")


def test_owner_references():
    obj = sample("pods")
    obj["metadata"]["ownerReferences"] = [{"kind": "Deployment"}, "x"]
    causes = validate_object("pods", obj)
    assert "metadata.ownerReferences[0].name" in fields(causes)
    assert "metadata.ownerReferences[1]" in fields(causes)


# --- pods ------------------------------------------------------------------------------

def pod_causes(mutate):
    obj = sample("pods")
    mutate(obj["spec"], obj["spec"]["containers"][0])
    return validate_object("pods", obj)


def set_(d, key, value):
    d[key] = value


@pytest.mark.parametrize("mutate, field, text", [
    (lambda s, c: s.pop("containers"), "spec.containers", "is required"),
    (lambda s, c: set_(s, "containers", []), "spec.containers", "must not be empty"),
    (lambda s, c: set_(s, "containers", {"name": "x"}), "spec.containers", "must be a list"),
    (lambda s, c: s["containers"].append(None), "spec.containers[2]", "must be an object"),
    (lambda s, c: set_(c, "name", "Web"), "spec.containers[0].name", "not a valid container"),
    (lambda s, c: set_(c, "name", "sidecar"), "spec.containers[1].name", "duplicate"),
    (lambda s, c: c.pop("name"), "spec.containers[0].name", "is required"),
    (lambda s, c: set_(c, "image", ""), "spec.containers[0].image", "must not be empty"),
    (lambda s, c: set_(c, "image", 5), "spec.containers[0].image", "must be a string"),
    (lambda s, c: c.pop("image"), "spec.containers[0].image", "is required"),
    (lambda s, c: set_(c, "command", "nginx -g"), "spec.containers[0].command", "must be a list"),
    (lambda s, c: set_(c, "args", ["-p", 80]), "spec.containers[0].args[1]", "must be a string"),
    (lambda s, c: set_(c, "env", {"A": "b"}), "spec.containers[0].env", "must be a list"),
    (lambda s, c: set_(c, "env", [{"value": "x"}]), "spec.containers[0].env[0].name",
     "is required"),
    (lambda s, c: set_(c, "env", [{"name": "A", "value": 1}]), "spec.containers[0].env[0].value",
     "must be a string"),
    (lambda s, c: set_(c, "env", [{"name": "A=B"}]), "spec.containers[0].env[0].name", "'='"),
    (lambda s, c: set_(c, "env", ["A=B"]), "spec.containers[0].env[0]", "must be an object"),
    (lambda s, c: set_(c, "env", [{"name": "A", "valueFrom": {}}]),
     "spec.containers[0].env[0].valueFrom", "not supported"),
    (lambda s, c: set_(c, "ports", [{"containerPort": 0}]),
     "spec.containers[0].ports[0].containerPort", "from 1 to 65535"),
    (lambda s, c: set_(c, "ports", [{"containerPort": 65536}]),
     "spec.containers[0].ports[0].containerPort", "from 1 to 65535"),
    (lambda s, c: set_(c, "ports", [{"containerPort": "80"}]),
     "spec.containers[0].ports[0].containerPort", "got '80'"),
    (lambda s, c: set_(c, "ports", [{"containerPort": 80.0}]),
     "spec.containers[0].ports[0].containerPort", "integer"),
    (lambda s, c: set_(c, "ports", [{"containerPort": True}]),
     "spec.containers[0].ports[0].containerPort", "integer"),
    (lambda s, c: set_(c, "ports", [{}]), "spec.containers[0].ports[0].containerPort",
     "is required"),
    (lambda s, c: set_(c, "ports", [{"containerPort": 80, "hostPort": -1}]),
     "spec.containers[0].ports[0].hostPort", "from 0 to 65535"),
    (lambda s, c: set_(c, "ports", [{"containerPort": 80, "protocol": "tcp"}]),
     "spec.containers[0].ports[0].protocol", "use TCP, UDP or SCTP"),
    (lambda s, c: set_(c, "ports", [{"containerPort": 80, "name": "h"},
                                    {"containerPort": 81, "name": "h"}]),
     "spec.containers[0].ports[1].name", "duplicate"),
    (lambda s, c: set_(c, "ports", [{"containerPort": 80, "name": "HTTP"}]),
     "spec.containers[0].ports[0].name", "not a valid port name"),
    (lambda s, c: set_(c, "ports", [{"containerPort": 80, "name": "a-very-long-port-name"}]),
     "spec.containers[0].ports[0].name", "not a valid port name"),
    (lambda s, c: set_(c, "resources", {"requests": {"memory": "12x"}}),
     "spec.containers[0].resources.requests.memory",
     "'12x' is not a memory quantity: use bytes or a suffix such as 128Mi, 1Gi, 500M"),
    (lambda s, c: set_(c, "resources", {"limits": {"cpu": "1 core"}}),
     "spec.containers[0].resources.limits.cpu", "not a CPU quantity"),
    (lambda s, c: set_(c, "resources", {"limits": {"cpu": "-1"}}),
     "spec.containers[0].resources.limits.cpu", "negative"),
    (lambda s, c: set_(c, "resources", {"limits": {"nvidia.com/gpu": 1}}),
     "spec.containers[0].resources.limits.nvidia.com/gpu", "use cpu or memory"),
    (lambda s, c: set_(c, "resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
     "spec.containers[0].resources.requests.cpu", "more than the limit"),
    (lambda s, c: set_(c, "resources", {"requests": "1Gi"}),
     "spec.containers[0].resources.requests", "must be an object"),
    (lambda s, c: set_(c, "imagePullPolicy", "Sometimes"), "spec.containers[0].imagePullPolicy",
     "use Always, IfNotPresent or Never"),
    (lambda s, c: set_(s, "restartPolicy", "always"), "spec.restartPolicy",
     "use Always, OnFailure or Never"),
    (lambda s, c: set_(s, "nodeSelector", {"disk": 1}), "spec.nodeSelector", "must be a string"),
    (lambda s, c: set_(s, "nodeSelector", ["ssd"]), "spec.nodeSelector", "must be an object"),
    (lambda s, c: set_(s, "terminationGracePeriodSeconds", -1),
     "spec.terminationGracePeriodSeconds", "0 or more"),
    (lambda s, c: set_(s, "terminationGracePeriodSeconds", "30"),
     "spec.terminationGracePeriodSeconds", "integer"),
    (lambda s, c: set_(s, "activeDeadlineSeconds", 0), "spec.activeDeadlineSeconds", "positive"),
    (lambda s, c: set_(s, "nodeName", "Node_1"), "spec.nodeName", "not a valid node name"),
    (lambda s, c: set_(c, "livenessProbe", {}), "spec.containers[0].livenessProbe",
     "needs one of exec, httpGet or tcpSocket"),
    (lambda s, c: set_(c, "livenessProbe", {"exec": {"command": ["x"]},
                                            "httpGet": {"port": 80}}),
     "spec.containers[0].livenessProbe", "use exactly one"),
    (lambda s, c: set_(c, "livenessProbe", {"exec": {"command": "true"}}),
     "spec.containers[0].livenessProbe.exec.command", "must be a list"),
    (lambda s, c: set_(c, "livenessProbe", {"exec": {}}),
     "spec.containers[0].livenessProbe.exec.command", "is required"),
    (lambda s, c: set_(c, "livenessProbe", {"httpGet": {"path": "/"}}),
     "spec.containers[0].livenessProbe.httpGet.port", "is required"),
    (lambda s, c: set_(c, "livenessProbe", {"httpGet": {"port": 80, "path": "healthz"}}),
     "spec.containers[0].livenessProbe.httpGet.path", "must start with '/'"),
    (lambda s, c: set_(c, "livenessProbe", {"httpGet": {"port": 0}}),
     "spec.containers[0].livenessProbe.httpGet.port", "from 1 to 65535"),
    (lambda s, c: set_(c, "livenessProbe", {"httpGet": {"port": "8080"}}),
     "spec.containers[0].livenessProbe.httpGet.port", "without quotes"),
    (lambda s, c: set_(c, "livenessProbe", {"httpGet": {"port": "Bad Name"}}),
     "spec.containers[0].livenessProbe.httpGet.port", "port name"),
    (lambda s, c: set_(c, "readinessProbe", {"tcpSocket": {}}),
     "spec.containers[0].readinessProbe.tcpSocket.port", "is required"),
    (lambda s, c: set_(c, "readinessProbe", {"tcpSocket": {"port": 80}, "periodSeconds": 0}),
     "spec.containers[0].readinessProbe.periodSeconds", "positive"),
    (lambda s, c: set_(c, "readinessProbe", {"tcpSocket": {"port": 80}, "failureThreshold": -3}),
     "spec.containers[0].readinessProbe.failureThreshold", "positive"),
    (lambda s, c: set_(c, "readinessProbe", {"tcpSocket": {"port": 80},
                                             "initialDelaySeconds": -1}),
     "spec.containers[0].readinessProbe.initialDelaySeconds", "0 or more"),
    (lambda s, c: set_(c, "readinessProbe", {"tcpSocket": {"port": 80}, "timeoutSeconds": 1.5}),
     "spec.containers[0].readinessProbe.timeoutSeconds", "integer"),
    (lambda s, c: set_(c, "livenessProbe", {"tcpSocket": {"port": 80}, "successThreshold": 2}),
     "spec.containers[0].livenessProbe.successThreshold", "must be 1"),
    (lambda s, c: set_(c, "readinessProbe", "tcp:80"), "spec.containers[0].readinessProbe",
     "must be an object"),
])
def test_pod_spec_causes(mutate, field, text):
    causes = pod_causes(mutate)
    assert text in cause_for(causes, field)


def test_pod_spec_required():
    obj = sample("pods")
    del obj["spec"]
    assert cause_for(validate_object("pods", obj), "spec") == "is required"


def test_pod_status_phase():
    obj = sample("pods")
    obj["status"] = {"phase": "Running"}
    assert validate_object("pods", obj) == []
    obj["status"] = {"phase": "Done"}
    assert "status.phase" in fields(validate_object("pods", obj))


def test_several_problems_are_all_reported():
    obj = sample("pods")
    obj["metadata"]["name"] = "Bad"
    obj["spec"]["restartPolicy"] = "x"
    obj["spec"]["containers"][0]["image"] = ""
    assert {"metadata.name", "spec.restartPolicy", "spec.containers[0].image"} <= set(
        fields(validate_object("pods", obj)))


# --- deployments -------------------------------------------------------------------------

def deployment_causes(mutate):
    obj = sample("deployments")
    mutate(obj["spec"])
    return validate_object("deployments", obj)


@pytest.mark.parametrize("mutate, field, text", [
    (lambda s: set_(s, "replicas", -1), "spec.replicas", "from 0 to 30000"),
    (lambda s: set_(s, "replicas", 2 ** 31), "spec.replicas", "from 0 to 30000"),
    (lambda s: set_(s, "replicas", True), "spec.replicas", "integer"),
    (lambda s: set_(s, "replicas", "3"), "spec.replicas", "integer"),
    (lambda s: set_(s, "replicas", 1.5), "spec.replicas", "integer"),
    (lambda s: s.pop("selector"), "spec.selector", "is required"),
    (lambda s: set_(s, "selector", {}), "spec.selector", "must not be empty"),
    (lambda s: set_(s, "selector", {"matchLabels": {}}), "spec.selector", "must not be empty"),
    (lambda s: set_(s, "selector", {"app": "web"}), "spec.selector", "use matchLabels"),
    (lambda s: set_(s, "selector", "app=web"), "spec.selector", "must be an object"),
    (lambda s: set_(s, "selector", {"matchExpressions": [{"key": "a", "operator": "Is"}]}),
     "spec.selector", "use In, NotIn, Exists or DoesNotExist"),
    (lambda s: set_(s, "selector", {"matchLabels": {"app": "api"}}),
     "spec.template.metadata.labels", "do not match spec.selector 'app=api'"),
    (lambda s: s["template"].pop("metadata"), "spec.template.metadata.labels",
     "do not match spec.selector"),
    (lambda s: set_(s["template"]["metadata"], "labels", {"app": "web", "tier": "be"}),
     "spec.template.metadata.labels", "do not match spec.selector"),
    (lambda s: set_(s["template"]["metadata"], "labels", {"app": 1}),
     "spec.template.metadata.labels", "must be a string"),
    (lambda s: s.pop("template"), "spec.template", "is required"),
    (lambda s: set_(s, "template", []), "spec.template", "must be an object"),
    (lambda s: s["template"].pop("spec"), "spec.template.spec", "is required"),
    (lambda s: set_(s["template"]["spec"], "containers", []), "spec.template.spec.containers",
     "must not be empty"),
    (lambda s: set_(s["template"]["spec"]["containers"][0], "image", None),
     "spec.template.spec.containers[0].image", "is required"),
    (lambda s: set_(s["template"]["spec"]["containers"][0], "resources",
                    {"limits": {"memory": "1Gb"}}),
     "spec.template.spec.containers[0].resources.limits.memory", "not a memory quantity"),
    (lambda s: set_(s["template"]["spec"], "restartPolicy", "Never"),
     "spec.template.spec.restartPolicy", "use Always"),
    (lambda s: set_(s, "strategy", {"type": "BlueGreen"}), "spec.strategy.type",
     "use RollingUpdate or Recreate"),
    (lambda s: set_(s, "strategy", "Recreate"), "spec.strategy", "must be an object"),
    (lambda s: set_(s, "strategy", {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}),
     "spec.strategy.rollingUpdate", "Recreate"),
    (lambda s: set_(s, "strategy", {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
     "spec.strategy.rollingUpdate.maxUnavailable", "cannot both be 0"),
    (lambda s: set_(s, "strategy", {"rollingUpdate": {"maxSurge": "0%",
                                                      "maxUnavailable": "0%"}}),
     "spec.strategy.rollingUpdate.maxUnavailable", "cannot both be 0"),
    (lambda s: set_(s, "strategy", {"rollingUpdate": {"maxSurge": -1}}),
     "spec.strategy.rollingUpdate.maxSurge", "percentage such as 25%"),
    (lambda s: set_(s, "strategy", {"rollingUpdate": {"maxSurge": "1"}}),
     "spec.strategy.rollingUpdate.maxSurge", "percentage"),
    (lambda s: set_(s, "strategy", {"rollingUpdate": {"maxSurge": "x%"}}),
     "spec.strategy.rollingUpdate.maxSurge", "percentage"),
    (lambda s: set_(s, "strategy", {"rollingUpdate": {"maxSurge": True}}),
     "spec.strategy.rollingUpdate.maxSurge", "percentage"),
    (lambda s: set_(s, "strategy", {"rollingUpdate": {"maxUnavailable": "150%"}}),
     "spec.strategy.rollingUpdate.maxUnavailable", "at most 100%"),
    (lambda s: set_(s, "revisionHistoryLimit", -1), "spec.revisionHistoryLimit", "0 or more"),
    (lambda s: set_(s, "progressDeadlineSeconds", 5), "spec.progressDeadlineSeconds",
     "greater than minReadySeconds"),
    (lambda s: set_(s, "minReadySeconds", "5"), "spec.minReadySeconds", "integer"),
    (lambda s: set_(s, "paused", "yes"), "spec.paused", "true or false"),
])
def test_deployment_causes(mutate, field, text):
    assert text in cause_for(deployment_causes(mutate), field)


def test_deployment_spec_required():
    assert cause_for(validate_object("deployments", {"metadata": {"name": "d"}}),
                     "spec") == "is required"


@pytest.mark.parametrize("strategy", [
    {"type": "Recreate"}, {"type": "RollingUpdate"},
    {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
    {"rollingUpdate": {"maxSurge": "100%", "maxUnavailable": "0%"}},
    {"rollingUpdate": {"maxSurge": "200%"}},
])
def test_valid_strategies(strategy):
    assert deployment_causes(lambda s: set_(s, "strategy", strategy)) == []


def test_zero_replicas_is_valid():
    assert deployment_causes(lambda s: set_(s, "replicas", 0)) == []


def test_template_labels_may_be_a_superset():
    def mutate(s):
        s["template"]["metadata"]["labels"]["extra"] = "x"
    assert deployment_causes(mutate) == []


# --- services, nodes, events, endpoints --------------------------------------------------

def service_causes(mutate):
    obj = sample("services")
    mutate(obj["spec"])
    return validate_object("services", obj)


@pytest.mark.parametrize("mutate, field, text", [
    (lambda s: set_(s, "selector", {"app": 1}), "spec.selector", "must be a string"),
    (lambda s: set_(s, "selector", "app=web"), "spec.selector", "must be an object"),
    (lambda s: s.pop("ports"), "spec.ports", "is required"),
    (lambda s: set_(s, "ports", []), "spec.ports", "must not be empty"),
    (lambda s: set_(s, "ports", {"port": 80}), "spec.ports", "must be a list"),
    (lambda s: set_(s, "ports", [80]), "spec.ports[0]", "must be an object"),
    (lambda s: set_(s["ports"][0], "port", 0), "spec.ports[0].port", "from 1 to 65535"),
    (lambda s: set_(s["ports"][0], "port", 70000), "spec.ports[0].port", "from 1 to 65535"),
    (lambda s: s["ports"][0].pop("port"), "spec.ports[0].port", "is required"),
    (lambda s: set_(s["ports"][0], "targetPort", 0), "spec.ports[0].targetPort",
     "from 1 to 65535"),
    (lambda s: set_(s["ports"][0], "targetPort", "8080"), "spec.ports[0].targetPort",
     "without quotes"),
    (lambda s: set_(s["ports"][0], "targetPort", [80]), "spec.ports[0].targetPort", "port name"),
    (lambda s: set_(s["ports"][0], "protocol", "HTTP"), "spec.ports[0].protocol", "TCP"),
    (lambda s: set_(s["ports"][1], "name", "http"), "spec.ports[1].name", "duplicate"),
    (lambda s: s["ports"][1].pop("name"), "spec.ports[1].name", "more than one port"),
    (lambda s: set_(s["ports"][1], "name", ""), "spec.ports[1].name", "more than one port"),
    (lambda s: set_(s["ports"][1], "name", "DNS"), "spec.ports[1].name", "not a valid"),
    (lambda s: set_(s["ports"][1], "port", 80) or set_(s["ports"][1], "protocol", "TCP"),
     "spec.ports[1].port", "duplicate port 80/TCP"),
    (lambda s: set_(s, "type", "Internal"), "spec.type", "ClusterIP"),
    (lambda s: set_(s, "sessionAffinity", "Bogus"), "spec.sessionAffinity", "ClientIP"),
    (lambda s: set_(s, "sessionAffinityConfig", {"clientIP": {"timeoutSeconds": 10 ** 10}}),
     "spec.sessionAffinityConfig.clientIP.timeoutSeconds", "86400"),
    (lambda s: set_(s, "externalTrafficPolicy", "Bogus"), "spec.externalTrafficPolicy", "Local"),
    (lambda s: set_(s, "internalTrafficPolicy", "Everywhere"), "spec.internalTrafficPolicy", "Cluster"),
    (lambda s: set_(s, "ipFamilyPolicy", "Triple"), "spec.ipFamilyPolicy", "SingleStack"),
    (lambda s: set_(s, "externalIPs", ["not-an-ip"]), "spec.externalIPs[0]", "not an IPv4 address"),
    (lambda s: set_(s, "externalIPs", "192.0.2.1"), "spec.externalIPs", "must be a list"),
    (lambda s: set_(s["ports"][0], "appProtocol", 5), "spec.ports[0].appProtocol", "must be a string"),
])
def test_service_causes(mutate, field, text):
    assert text in cause_for(service_causes(mutate), field)


def test_single_port_service_needs_no_name():
    assert validate_object("services", {"metadata": {"name": "s"},
                                        "spec": {"ports": [{"port": 80}]}}) == []


def test_same_port_different_protocols_is_fine():
    def mutate(s):
        s["ports"][1].update(port=80, protocol="UDP")
    assert service_causes(mutate) == []


def test_headless_service_may_have_no_ports():
    obj = {"metadata": {"name": "s"}, "spec": {"clusterIP": "None", "selector": {"a": "b"}}}
    assert validate_object("services", obj) == []


@pytest.mark.parametrize("spec, ok", [({"unschedulable": True}, True), ({}, True), (None, True),
                                      ({"unschedulable": "true"}, False),
                                      ({"unschedulable": 1}, False), ("x", False)])
def test_node_causes(spec, ok):
    obj = sample("nodes")
    obj["spec"] = spec
    assert (validate_object("nodes", obj) == []) is ok


@pytest.mark.parametrize("mutate, field", [
    (lambda e: e.pop("involvedObject"), "involvedObject"),
    (lambda e: set_(e, "involvedObject", "Pod/web"), "involvedObject"),
    (lambda e: e["involvedObject"].pop("kind"), "involvedObject.kind"),
    (lambda e: set_(e["involvedObject"], "name", ""), "involvedObject.name"),
    (lambda e: set_(e, "reason", 5), "reason"),
    (lambda e: set_(e, "message", ["x"]), "message"),
    (lambda e: set_(e, "type", "Error"), "type"),
    (lambda e: set_(e, "count", -1), "count"),
])
def test_event_causes(mutate, field):
    obj = sample("events")
    mutate(obj)
    assert field in fields(validate_object("events", obj))


@pytest.mark.parametrize("subsets, field", [
    ({"addresses": []}, "subsets"),
    (["x"], "subsets[0]"),
    ([{"addresses": "10.0.0.1"}], "subsets[0].addresses"),
    ([{"addresses": [{"ip": 1}]}], "subsets[0].addresses[0].ip"),
    ([{"addresses": [{}]}], "subsets[0].addresses[0].ip"),
    ([{"notReadyAddresses": ["10.0.0.1"]}], "subsets[0].notReadyAddresses[0]"),
    ([{"ports": [{"port": 0}]}], "subsets[0].ports[0].port"),
    ([{"ports": [80]}], "subsets[0].ports[0]"),
])
def test_endpoints_causes(subsets, field):
    obj = sample("endpoints")
    obj["subsets"] = subsets
    assert field in fields(validate_object("endpoints", obj))


def test_endpoints_may_have_no_subsets():
    assert validate_object("endpoints", {"metadata": {"name": "e"}, "subsets": []}) == []


# --- updates ---------------------------------------------------------------------------

def test_deployment_selector_is_immutable():
    old = sample("deployments")
    new = copy.deepcopy(old)
    new["spec"]["selector"] = {"matchLabels": {"app": "web2"}}
    causes = validate_update("deployments", old, new)
    assert causes == [Cause("spec.selector",
                            "is immutable: delete and re-create the deployment to change it")]


def test_deployment_other_changes_are_allowed():
    old = sample("deployments")
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 10
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.26"
    new["spec"]["template"]["spec"]["containers"][0]["env"] = []
    new["spec"]["strategy"] = {"type": "Recreate"}
    assert validate_update("deployments", old, new) == []


def test_same_selector_written_differently_is_not_a_change():
    old = sample("deployments")
    old["spec"]["selector"]["matchExpressions"] = [
        {"key": "tier", "operator": "In", "values": ["fe", "qa"]},
        {"key": "canary", "operator": "DoesNotExist"}]
    new = copy.deepcopy(old)
    new["spec"]["selector"]["matchExpressions"] = [
        {"key": "canary", "operator": "DoesNotExist", "values": []},
        {"key": "tier", "operator": "In", "values": ["qa", "fe", "qa"]}]
    assert validate_update("deployments", old, new) == []


def test_pod_image_change_is_allowed():
    old = sample("pods")
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "nginx:1.26"
    new["spec"]["containers"][1]["image"] = "busybox:1"
    new["metadata"]["labels"] = {"app": "web", "new": "label"}
    new["status"] = {"phase": "Running"}
    assert validate_update("pods", old, new) == []


def test_pod_binding_once():
    old = sample("pods")
    del old["spec"]["nodeName"]
    bound = copy.deepcopy(old)
    bound["spec"]["nodeName"] = "node-1"
    assert validate_update("pods", old, bound) == []
    moved = copy.deepcopy(bound)
    moved["spec"]["nodeName"] = "node-2"
    assert "already bound to node 'node-1'" in cause_for(
        validate_update("pods", bound, moved), "spec.nodeName")
    unbound = copy.deepcopy(bound)
    del unbound["spec"]["nodeName"]
    assert "spec.nodeName" in fields(validate_update("pods", bound, unbound))
    empty = copy.deepcopy(old)
    empty["spec"]["nodeName"] = ""
    assert validate_update("pods", empty, bound) == []


@pytest.mark.parametrize("before, after, ok", [
    (None, 30, True), (600, 300, True), (600, 600, True), (600, 900, False), (600, None, False),
    (None, 0, False), (None, "30", False),
])
def test_pod_active_deadline(before, after, ok):
    old, new = sample("pods"), sample("pods")
    old["spec"]["activeDeadlineSeconds"] = before
    new["spec"]["activeDeadlineSeconds"] = after
    assert (validate_update("pods", old, new) == []) is ok


@pytest.mark.parametrize("mutate, field", [
    (lambda s: set_(s, "restartPolicy", "Never"), "spec.restartPolicy"),
    (lambda s: set_(s, "nodeSelector", {"disk": "hdd"}), "spec.nodeSelector"),
    (lambda s: set_(s, "terminationGracePeriodSeconds", 5), "spec.terminationGracePeriodSeconds"),
    (lambda s: set_(s, "hostNetwork", True), "spec.hostNetwork"),
    (lambda s: s["containers"].pop(), "spec.containers"),
    (lambda s: s["containers"].append({"name": "x", "image": "y"}), "spec.containers"),
    (lambda s: set_(s["containers"][0], "ports", []), "spec.containers[0].ports"),
    (lambda s: set_(s["containers"][0], "name", "other"), "spec.containers[0].name"),
    (lambda s: set_(s["containers"][1], "command", ["sh"]), "spec.containers[1].command"),
    (lambda s: s["containers"][0].pop("env"), "spec.containers[0].env"),
])
def test_pod_spec_is_otherwise_immutable(mutate, field):
    old = sample("pods")
    new = copy.deepcopy(old)
    mutate(new["spec"])
    causes = validate_update("pods", old, new)
    assert "delete and re-create the pod" in cause_for(causes, field)


@pytest.mark.parametrize("plural", sorted(SAMPLES))
def test_name_and_namespace_are_immutable(plural):
    old = sample(plural)
    new = copy.deepcopy(old)
    new["metadata"]["name"] = "other"
    new["metadata"]["namespace"] = "elsewhere"
    old["metadata"]["namespace"] = "default"
    causes = validate_update(plural, old, new)
    assert {"metadata.name", "metadata.namespace"} <= set(fields(causes))


@pytest.mark.parametrize("plural", ["services", "nodes", "events", "endpoints", "namespaces"])
def test_other_resources_are_freely_updatable(plural):
    old = sample(plural)
    new = apply_defaults(plural, old)
    new["metadata"]["labels"] = {"x": "y"}
    assert validate_update(plural, old, new) == []


# --- scale -------------------------------------------------------------------------------

@pytest.mark.parametrize("body, ok", [
    ({"spec": {"replicas": 3}}, True),
    ({"spec": {"replicas": 0}}, True),
    ({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "web"},
      "spec": {"replicas": 2}}, True),
    ({"spec": {"replicas": -1}}, False),
    ({"spec": {"replicas": "3"}}, False),
    ({"spec": {"replicas": True}}, False),
    ({"spec": {"replicas": 2.0}}, False),
    ({"spec": {}}, False),
    ({"spec": None}, False),
    ({}, False),
    ({"kind": "Deployment", "spec": {"replicas": 1}}, False),
    ([], False), (None, False), ("3", False),
])
def test_validate_scale(body, ok):
    causes = validate_scale(body)
    assert isinstance(causes, list)
    assert (causes == []) is ok


def test_scale_messages():
    assert validate_scale({"spec": {}}) == [Cause("spec.replicas", "is required")]
    assert validate_scale({"spec": {"replicas": -2}}) == [
        Cause("spec.replicas", "must be an integer from 0 to 30000, got -2")]


def test_describe_causes():
    assert describe_causes([Cause("a.b", "is required"), Cause("", "must be an object")]) == \
        "a.b: is required; must be an object"


# --- robustness: odd JSON anywhere must give causes, never exceptions ------------------

ODD = [None, True, False, 0, -1, 1.5, 10 ** 30, "", "x", "Web_1", "-1", "1Gi", [], [None],
       [1, "a", {}], {}, {"a": None}, {"": []}, [[[]]]]


def paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, prefix + (i,))


def replaced(obj, path, value):
    if not path:
        return copy.deepcopy(value)
    obj = copy.deepcopy(obj)
    target = obj
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = copy.deepcopy(value)
    return obj


def removed(obj, path):
    obj = copy.deepcopy(obj)
    target = obj
    for step in path[:-1]:
        target = target[step]
    del target[path[-1]]
    return obj


def assert_causes(result):
    assert isinstance(result, list)
    for cause in result:
        assert isinstance(cause, Cause)
        assert isinstance(cause.field, str) and isinstance(cause.message, str)
        assert cause.message


def check_everything(plural, original, variant):
    assert_causes(validate_object(plural, variant))
    defaulted = apply_defaults(plural, variant)
    assert_causes(validate_object(plural, defaulted))
    assert_causes(validate_update(plural, original, variant))
    assert_causes(validate_update(plural, variant, original))
    assert_causes(validate_update(plural, variant, variant))


@pytest.mark.parametrize("plural", sorted(SAMPLES))
def test_odd_values_at_every_path(plural):
    original = sample(plural)
    all_paths = list(paths(original))
    for path in all_paths:
        for odd in ODD:
            variant = replaced(original, path, odd)
            check_everything(plural, original, variant)
            if not path:        # none of the odd values is a whole valid object
                assert validate_object(plural, variant) != []
        if path:
            check_everything(plural, original, removed(original, path))
    assert original == SAMPLES[plural]      # validation and defaulting mutate nothing


def random_json(rng, depth=0):
    choice = rng.randrange(9 if depth < 4 else 6)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.choice([0, 1, -1, 80, 65536, 2 ** 70, 0.5, -2.5])
    if choice in (3, 4, 5):
        return rng.choice(["", "a", "web", "Web_1", "1Gi", "500m", "25%", "0%", "In", "Always",
                           "TCP", "http", "app=web", "8080", "/", "x" * 300, "\u00e9", "None"])
    if choice in (6, 7):
        keys = ["name", "image", "containers", "spec", "metadata", "labels", "selector",
                "matchLabels", "matchExpressions", "key", "operator", "values", "ports",
                "port", "targetPort", "containerPort", "replicas", "template", "strategy",
                "rollingUpdate", "maxSurge", "maxUnavailable", "resources", "requests",
                "limits", "cpu", "memory", "livenessProbe", "httpGet", "exec", "command",
                "tcpSocket", "involvedObject", "kind", "subsets", "addresses", "ip", "env",
                "value", "type", "nodeName", "unschedulable", "status", "phase", "app"]
        return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randrange(6))}
    return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]


@pytest.mark.parametrize("plural", sorted(SAMPLES))
def test_random_json_never_raises(plural):
    rng = random.Random("shepherd-" + plural)      # fixed seed: failures reproduce
    original = sample(plural)
    for _ in range(1500):
        junk = random_json(rng)
        candidates = [junk, {"metadata": {"name": "x"}, "spec": junk},
                      {"metadata": junk, "spec": {"containers": [junk]}},
                      replaced(original, rng.choice(list(paths(original))), junk)]
        for variant in candidates:
            check_everything(plural, original, variant)
    assert_causes(validate_scale(random_json(rng)))


def test_integers_beyond_int64_are_refused():
    obj = sample("pods")
    obj["spec"]["terminationGracePeriodSeconds"] = 2 ** 63
    causes = validate_object("pods", obj)
    assert [c.field for c in causes] == ["spec.terminationGracePeriodSeconds"]
    assert "64-bit" in causes[0].message
    obj["spec"]["terminationGracePeriodSeconds"] = 2 ** 63 - 1
    assert validate_object("pods", obj) == []


def test_config_map_rules():
    def fields(obj):
        return sorted(c.field for c in validate_object("configmaps", obj))
    base = {"metadata": {"name": "c", "namespace": "default"}}
    assert fields(dict(base, data={"bad key": "x"})) == ["data.bad key"]
    assert fields(dict(base, data={"..": "x"})) == ["data..."]
    assert fields(dict(base, data={"k": 5})) == ["data.k"]
    assert fields(dict(base, data=["k"])) == ["data"]
    assert fields(dict(base, data={"k": "1"}, binaryData={"k": "MQ=="})) == ["binaryData.k"]
    assert fields(dict(base, binaryData={"a": "!!!", "b": "MQ", "c": "MQ=="})) == ["binaryData.a", "binaryData.b"]
    assert fields(dict(base, immutable="yes")) == ["immutable"]
    assert "letters, digits" in describe_causes(validate_object("configmaps", dict(base, data={"a/b": ""})))


def test_immutable_config_map_cannot_change():
    old = dict(SAMPLES["configmaps"], immutable=True)
    assert validate_update("configmaps", old, copy.deepcopy(old)) == []
    changed = copy.deepcopy(old)
    changed["data"]["MODE"] = "dev"
    assert [c.field for c in validate_update("configmaps", old, changed)] == ["data"]
    unset = dict(copy.deepcopy(old), immutable=False)
    assert [c.field for c in validate_update("configmaps", old, unset)] == ["immutable"]
    # Mutable ones change freely, and may become immutable.
    mutable = dict(SAMPLES["configmaps"])
    assert validate_update("configmaps", mutable, dict(changed, immutable=True)) == []


def test_finalizers_must_be_qualified_names():
    body = sample("pods")
    body["metadata"]["finalizers"] = ["example.com/cleanup", "foregroundDeletion", "bad name", 7, "a/b/c"]
    fields = [c.field for c in validate_object("pods", body)]
    assert fields == ["metadata.finalizers[2]", "metadata.finalizers[3]", "metadata.finalizers[4]"]
    body["metadata"]["finalizers"] = "example.com/x"
    assert [c.field for c in validate_object("pods", body)] == ["metadata.finalizers"]


def test_keys_and_finalizers_with_a_trailing_newline_are_refused():
    cm = {"metadata": {"name": "c", "namespace": "default"}, "data": {"key\n": "v"}}
    assert [c.field for c in validate_object("configmaps", cm)] == ["data.key\n"]
    body = sample("pods")
    body["metadata"]["finalizers"] = ["example.com/x\n"]
    assert [c.field for c in validate_object("pods", body)] == ["metadata.finalizers[0]"]


@pytest.mark.parametrize("plural, change, field", [
    ("roles", lambda o: o["rules"][0].update(verbs=["steal"]), "rules[0].verbs"),
    ("roles", lambda o: o["rules"][0].pop("apiGroups"), "rules[0].apiGroups"),
    ("roles", lambda o: o["rules"].append({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}),
     "rules[2].nonResourceURLs"),
    ("clusterroles", lambda o: o["metadata"].update(name="cluster-admin"), "metadata.name"),
    ("rolebindings", lambda o: o["roleRef"].update(kind="Robot"), "roleRef.kind"),
    ("rolebindings", lambda o: o["subjects"][1].pop("namespace"), "subjects[1].namespace"),
    ("clusterrolebindings", lambda o: o["roleRef"].update(kind="Role"), "roleRef.kind"),
    ("clusterrolebindings", lambda o: o["roleRef"].update(apiGroup="example.com"), "roleRef.apiGroup"),
])
def test_rbac_objects_are_checked(plural, change, field):
    obj = sample(plural)
    change(obj)
    assert field in fields(validate_object(plural, obj))


def test_service_policies_kubernetes_accepts_pass():
    def every_policy(s):
        s.update(sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 10800}},
                 externalTrafficPolicy="Local", internalTrafficPolicy="Cluster", ipFamilyPolicy="SingleStack",
                 externalIPs=["192.0.2.1"])
        s["ports"][0]["appProtocol"] = "http"
    assert service_causes(every_policy) == []
