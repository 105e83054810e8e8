import copy

import pytest

from shepherd_ha.model.defaults import apply_defaults, image_pull_policy

PROBE_DEFAULTS = {"initialDelaySeconds": 0, "timeoutSeconds": 1, "periodSeconds": 10,
                  "successThreshold": 1, "failureThreshold": 3}


def pod(**spec):
    spec.setdefault("containers", [{"name": "web", "image": "nginx:1.25"}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": spec}


@pytest.mark.parametrize("image, policy", [
    ("nginx", "Always"), ("nginx:latest", "Always"), ("nginx:1.25", "IfNotPresent"),
    ("registry.local:5000/nginx", "Always"), ("registry.local:5000/nginx:1.25", "IfNotPresent"),
    ("registry.local:5000/team/nginx:latest", "Always"),
    ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
    ("nginx:1.25@sha256:" + "a" * 64, "IfNotPresent"),
])
def test_image_pull_policy(image, policy):
    assert image_pull_policy(image) == policy


def test_pod_defaults():
    obj = pod()
    out = apply_defaults("pods", obj)
    assert out["spec"]["restartPolicy"] == "Always"
    assert out["spec"]["terminationGracePeriodSeconds"] == 30
    assert out["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert out["status"] == {"phase": "Pending"}
    assert "namespace" not in out["metadata"]       # the API sets it from the path
    assert obj == pod()                             # input untouched


def test_pod_defaults_keep_given_values():
    obj = pod(restartPolicy="Never", terminationGracePeriodSeconds=0,
              containers=[{"name": "a", "image": "x", "imagePullPolicy": "Never",
                           "ports": [{"containerPort": 53, "protocol": "UDP"}]}])
    obj["status"] = {"phase": "Running"}
    out = apply_defaults("pods", obj)
    assert out["spec"]["restartPolicy"] == "Never"
    assert out["spec"]["terminationGracePeriodSeconds"] == 0
    assert out["spec"]["containers"][0]["imagePullPolicy"] == "Never"
    assert out["spec"]["containers"][0]["ports"][0]["protocol"] == "UDP"
    assert out["status"] == {"phase": "Running"}


def test_container_ports_and_probes():
    obj = pod(containers=[{
        "name": "web", "image": "nginx",
        "ports": [{"containerPort": 80}, {"containerPort": 443, "name": "https"}],
        "livenessProbe": {"httpGet": {"port": 80}},
        "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 5},
    }])
    c = apply_defaults("pods", obj)["spec"]["containers"][0]
    assert c["imagePullPolicy"] == "Always"
    assert [p["protocol"] for p in c["ports"]] == ["TCP", "TCP"]
    assert c["livenessProbe"] == dict(PROBE_DEFAULTS, httpGet={"port": 80, "path": "/",
                                                               "scheme": "HTTP"})
    assert c["readinessProbe"] == dict(PROBE_DEFAULTS, tcpSocket={"port": 80}, periodSeconds=5)


def deployment(**spec):
    spec.setdefault("selector", {"matchLabels": {"app": "web"}})
    spec.setdefault("template", {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "web", "image": "nginx"}]}})
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": spec}


def test_deployment_defaults():
    obj = deployment()
    out = apply_defaults("deployments", obj)
    spec = out["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    assert spec["minReadySeconds"] == 0
    pod_spec = spec["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Always"
    assert pod_spec["terminationGracePeriodSeconds"] == 30
    assert pod_spec["containers"][0]["imagePullPolicy"] == "Always"
    assert "status" not in out and "status" not in spec["template"]
    assert obj == deployment()


def test_deployment_keeps_zero_replicas_and_partial_strategy():
    spec = apply_defaults("deployments", deployment(
        replicas=0, strategy={"rollingUpdate": {"maxSurge": 2}}))["spec"]
    assert spec["replicas"] == 0
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxSurge": 2, "maxUnavailable": "25%"}}


def test_recreate_strategy_gets_no_rolling_update():
    spec = apply_defaults("deployments", deployment(strategy={"type": "Recreate"}))["spec"]
    assert spec["strategy"] == {"type": "Recreate"}


def test_service_defaults():
    obj = {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [
        {"port": 80}, {"port": 443, "targetPort": "https", "protocol": "TCP"},
        {"port": 53, "protocol": "UDP", "targetPort": 5353}]}}
    out = apply_defaults("services", obj)
    assert out["spec"]["type"] == "ClusterIP"
    assert out["spec"]["ports"] == [
        {"port": 80, "protocol": "TCP", "targetPort": 80},
        {"port": 443, "targetPort": "https", "protocol": "TCP"},
        {"port": 53, "protocol": "UDP", "targetPort": 5353}]
    assert "targetPort" not in obj["spec"]["ports"][0]


def test_node_defaults():
    assert apply_defaults("nodes", {"metadata": {"name": "n1"}})["spec"] == {
        "unschedulable": False}
    out = apply_defaults("nodes", {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}})
    assert out["spec"]["unschedulable"] is True


def test_namespace_defaults():
    assert apply_defaults("namespaces", {"metadata": {"name": "ns"}})["status"] == {
        "phase": "Active"}
    out = apply_defaults("namespaces", {"metadata": {"name": "ns"},
                                        "status": {"phase": "Terminating"}})
    assert out["status"] == {"phase": "Terminating"}


@pytest.mark.parametrize("plural", ["events", "endpoints"])
def test_resources_without_defaults_are_copied(plural):
    obj = {"metadata": {"name": "x"}, "subsets": [], "reason": "r"}
    out = apply_defaults(plural, obj)
    assert out == obj and out is not obj


def test_defaults_are_idempotent():
    for plural, obj in [("pods", pod()), ("deployments", deployment()),
                        ("services", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 1}]}}),
                        ("nodes", {"metadata": {"name": "n"}}),
                        ("namespaces", {"metadata": {"name": "n"}})]:
        once = apply_defaults(plural, obj)
        assert apply_defaults(plural, once) == once


ODD = [None, True, 0, -1, 1.5, "", "x", [], [None], [1, "a"], {}, {"a": None}]


@pytest.mark.parametrize("plural", ["pods", "deployments", "services", "nodes", "namespaces",
                                    "events", "endpoints"])
def test_defaults_tolerate_odd_shapes(plural):
    """Defaulting runs before validation, so malformed input must pass through, not crash."""
    shapes = list(ODD)
    for odd in ODD:
        shapes += [{"spec": odd}, {"status": odd}, {"spec": {"containers": odd}},
                   {"spec": {"containers": [odd]}}, {"spec": {"ports": [odd]}},
                   {"spec": {"ports": odd}}, {"spec": {"strategy": odd}},
                   {"spec": {"strategy": {"type": odd, "rollingUpdate": odd}}},
                   {"spec": {"template": odd}}, {"spec": {"template": {"spec": odd}}},
                   {"spec": {"containers": [{"image": odd, "ports": [odd],
                                             "livenessProbe": odd,
                                             "readinessProbe": {"httpGet": odd}}]}}]
    for shape in shapes:
        before = copy.deepcopy(shape)
        apply_defaults(plural, shape)
        assert shape == before
