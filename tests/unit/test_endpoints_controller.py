"""Endpoints controller against an in-memory store: which pods are listed, how ports
resolve, that it writes only on change, and that it follows the service's life."""
from controller_kit import ControllerHarness, create, write

from shepherd_ha.controllers.endpoints import controllers, desired_subsets
from shepherd_ha.controllers.settings import ControllerSettings
from shepherd_ha.model.defaults import apply_defaults


def service(name, selector, ports=None, namespace="default"):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector, "ports": ports or [{"port": 80, "targetPort": 8080}]}}


def pod(name, labels, ip=None, ready=False, node="n1", ports=None, namespace="default", phase="Running"):
    container = {"name": "main", "image": "nginx:1.25"}
    if ports:
        container["ports"] = ports
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
           "spec": {"containers": [container], "nodeName": node},
           "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
    if ip:
        obj["status"]["podIP"] = ip
    return obj


def set_status(store, namespace, name, **fields):
    current = store.get("pods", namespace, name)
    status = dict(current["status"], **fields)
    write(store, {"op": "update", "resource": "pods", "namespace": namespace, "name": name,
                  "subresource": "status", "object": {"status": status}})


def set_ready(store, name, ready, namespace="default"):
    set_status(store, namespace, name, conditions=[{"type": "Ready", "status": "True" if ready else "False"}])


class Harness(ControllerHarness):
    def __init__(self):
        super().__init__(lambda store: controllers(store, None, ControllerSettings()))

    def endpoints(self, name, namespace="default"):
        return self.store.get("endpoints", namespace, name)


def ips(ep, group="addresses"):
    return sorted(a["ip"] for s in ep.get("subsets") or [] for a in s.get(group) or [])


def test_lists_ready_pods_in_addresses_and_others_in_not_ready():
    h = Harness()
    svc = create(h.store, "services", service("web", {"app": "web"}))
    create(h.store, "pods", pod("a", {"app": "web"}, ip="10.0.0.1", ready=True))
    create(h.store, "pods", pod("b", {"app": "web"}, ip="10.0.0.2", ready=False, node="n2"))
    create(h.store, "pods", pod("c", {"app": "web"}))                       # no IP yet: not listed
    create(h.store, "pods", pod("d", {"app": "other"}, ip="10.0.0.4", ready=True))
    create(h.store, "pods", pod("e", {"app": "web"}, ip="10.0.0.5", ready=True, phase="Succeeded"))
    h.settle()
    ep = h.endpoints("web")
    assert ep["kind"] == "Endpoints" and ep["metadata"]["uid"]
    assert ep["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Service", "name": "web",
                                                  "uid": svc["metadata"]["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]
    [subset] = ep["subsets"]
    assert subset["ports"] == [{"port": 8080, "protocol": "TCP"}]
    store_pod = h.store.get("pods", "default", "a")
    assert subset["addresses"] == [{"ip": "10.0.0.1", "nodeName": "n1", "targetRef": {
        "kind": "Pod", "name": "a", "namespace": "default", "uid": store_pod["metadata"]["uid"]}}]
    assert ips(ep, "notReadyAddresses") == ["10.0.0.2"]
    assert subset["notReadyAddresses"][0]["nodeName"] == "n2"
    assert list(h.controller.sentences)[-1] == "created endpoints default/web: 1 ready, 1 not ready"


def test_follows_pod_readiness_ip_and_labels():
    h = Harness()
    create(h.store, "services", service("web", {"app": "web"}))
    create(h.store, "pods", pod("a", {"app": "web"}))
    h.settle()
    assert h.endpoints("web")["subsets"] == []
    set_status(h.store, "default", "a", podIP="10.0.0.1")
    h.settle()
    assert ips(h.endpoints("web"), "notReadyAddresses") == ["10.0.0.1"]
    set_ready(h.store, "a", True)
    h.settle()
    assert ips(h.endpoints("web")) == ["10.0.0.1"] and ips(h.endpoints("web"), "notReadyAddresses") == []
    # Relabel the pod away from the selector: it leaves the endpoints (old labels matched).
    current = h.store.get("pods", "default", "a")
    write(h.store, {"op": "update", "resource": "pods", "namespace": "default", "name": "a",
                    "object": dict(current, metadata=dict(current["metadata"], labels={"app": "gone"}))})
    h.settle()
    assert h.endpoints("web")["subsets"] == []
    assert list(h.controller.sentences)[-1] == "updated endpoints default/web: 0 ready, 0 not ready"
    # Pod deleted after being re-added: gone again.
    write(h.store, {"op": "update", "resource": "pods", "namespace": "default", "name": "a",
                    "object": dict(current, metadata=dict(current["metadata"], labels={"app": "web"}))})
    h.settle()
    assert ips(h.endpoints("web")) == ["10.0.0.1"]
    write(h.store, {"op": "delete", "resource": "pods", "namespace": "default", "name": "a"})
    h.settle()
    assert h.endpoints("web")["subsets"] == []


def test_written_only_when_it_changes():
    h = Harness()
    create(h.store, "services", service("web", {"app": "web"}))
    create(h.store, "pods", pod("a", {"app": "web"}, ip="10.0.0.1", ready=True))
    h.settle()
    rv = h.endpoints("web")["metadata"]["resourceVersion"]
    writes = len(h.controller.sentences)
    # Changes that do not affect endpoints: a status field they do not show, an unrelated pod,
    # a resync of every key.
    set_status(h.store, "default", "a", message="still fine")
    create(h.store, "pods", pod("z", {"app": "other"}, ip="10.0.0.9", ready=True))
    h.controller.resync()
    h.settle()
    assert h.endpoints("web")["metadata"]["resourceVersion"] == rv
    assert len(h.controller.sentences) == writes


def test_target_port_int_and_named_per_pod():
    h = Harness()
    create(h.store, "services", service("api", {"app": "api"}, ports=[
        {"name": "http", "port": 80, "targetPort": "web"},
        {"name": "metrics", "port": 9100, "targetPort": 9100, "protocol": "TCP"}]))
    create(h.store, "pods", pod("a", {"app": "api"}, ip="10.0.0.1", ready=True,
                                ports=[{"name": "web", "containerPort": 8080}]))
    create(h.store, "pods", pod("b", {"app": "api"}, ip="10.0.0.2", ready=True,
                                ports=[{"name": "web", "containerPort": 9090}]))
    create(h.store, "pods", pod("c", {"app": "api"}, ip="10.0.0.3", ready=True))      # no port named web
    h.settle()
    subsets = h.endpoints("api")["subsets"]
    by_ports = {tuple((p.get("name"), p["port"]) for p in s["ports"]): ips({"subsets": [s]}) for s in subsets}
    assert by_ports == {
        (("http", 8080), ("metrics", 9100)): ["10.0.0.1"],
        (("http", 9090), ("metrics", 9100)): ["10.0.0.2"],
        (("metrics", 9100),): ["10.0.0.3"],
    }


def test_target_port_defaults_to_port_and_named_port_without_match_skips_pod():
    svc = apply_defaults("services", service("s", {"app": "s"}, ports=[{"port": 80}]))
    p = pod("a", {"app": "s"}, ip="10.0.0.1", ready=True)
    p["metadata"]["uid"] = "u"
    assert desired_subsets(svc, [p])[0]["ports"] == [{"port": 80, "protocol": "TCP"}]
    named = service("s", {"app": "s"}, ports=[{"port": 80, "targetPort": "nope"}])
    assert desired_subsets(named, [p]) == []


def test_selector_change_and_pods_in_other_namespaces():
    h = Harness()
    write(h.store, {"op": "create", "resource": "namespaces", "object": {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other", "uid": "ns-other"}}})
    create(h.store, "services", service("web", {"app": "web"}))
    create(h.store, "pods", pod("a", {"app": "web"}, ip="10.0.0.1", ready=True))
    create(h.store, "pods", pod("b", {"app": "web"}, ip="10.0.1.1", ready=True, namespace="other"))
    create(h.store, "pods", pod("c", {"app": "new"}, ip="10.0.0.3", ready=True))
    h.settle()
    assert ips(h.endpoints("web")) == ["10.0.0.1"]
    current = h.store.get("services", "default", "web")
    write(h.store, {"op": "update", "resource": "services", "namespace": "default", "name": "web",
                    "object": dict(current, spec=dict(current["spec"], selector={"app": "new"}))})
    h.settle()
    assert ips(h.endpoints("web")) == ["10.0.0.3"]


def test_deleted_with_its_service_and_recreated_with_new_owner():
    h = Harness()
    create(h.store, "services", service("web", {"app": "web"}))
    create(h.store, "pods", pod("a", {"app": "web"}, ip="10.0.0.1", ready=True))
    h.settle()
    assert h.endpoints("web") is not None
    write(h.store, {"op": "delete", "resource": "services", "namespace": "default", "name": "web"})
    h.settle()
    assert h.endpoints("web") is None
    assert list(h.controller.sentences)[-1] == "deleted endpoints default/web: its service is gone"
    svc = create(h.store, "services", service("web", {"app": "web"}))
    h.settle()
    ep = h.endpoints("web")
    assert ep["metadata"]["ownerReferences"][0]["uid"] == svc["metadata"]["uid"]
    assert ips(ep) == ["10.0.0.1"]


def test_endpoints_changed_by_someone_else_are_put_back():
    h = Harness()
    create(h.store, "services", service("web", {"app": "web"}))
    create(h.store, "pods", pod("a", {"app": "web"}, ip="10.0.0.1", ready=True))
    h.settle()
    ep = h.endpoints("web")
    write(h.store, {"op": "update", "resource": "endpoints", "namespace": "default", "name": "web",
                    "object": dict(ep, subsets=[{"addresses": [{"ip": "1.2.3.4"}], "ports": [{"port": 1}]}])})
    h.settle()
    assert ips(h.endpoints("web")) == ["10.0.0.1"]
    write(h.store, {"op": "delete", "resource": "endpoints", "namespace": "default", "name": "web"})
    h.settle()
    assert ips(h.endpoints("web")) == ["10.0.0.1"]


def test_service_without_selector_is_left_alone():
    h = Harness()
    create(h.store, "services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext",
                                 "namespace": "default"}, "spec": {"ports": [{"port": 80}]}})
    manual = create(h.store, "endpoints", {"apiVersion": "v1", "kind": "Endpoints",
                                           "metadata": {"name": "ext", "namespace": "default"},
                                           "subsets": [{"addresses": [{"ip": "192.0.2.1"}], "ports": [{"port": 80}]}]})
    create(h.store, "pods", pod("a", {"app": "web"}, ip="10.0.0.1", ready=True))
    h.settle()
    assert h.endpoints("ext")["metadata"]["resourceVersion"] == manual["metadata"]["resourceVersion"]
    write(h.store, {"op": "delete", "resource": "services", "namespace": "default", "name": "ext"})
    h.settle()
    assert h.endpoints("ext") is not None, "endpoints the user wrote are not the controller's to delete"
