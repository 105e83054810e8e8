"""Cluster IPs and node ports, allocated by the FSM (store/service_allocation.py)."""
import pickle

import pytest

from shepherd_ha.store import commands
from shepherd_ha.store.fsm import StoreFSM


def svc(name, namespace="default", cluster_ip=None, type_=None, ports=None, **spec):
    spec = dict(spec, selector={"app": name}, ports=ports or [{"port": 80, "protocol": "TCP", "targetPort": 80}])
    if cluster_ip is not None:
        spec["clusterIP"] = cluster_ip
    if type_:
        spec["type"] = type_
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace,
                                                               "uid": "uid-" + name}, "spec": spec}


@pytest.fixture
def fsm():
    f = StoreFSM()
    assert f.apply(commands.write([commands.create("namespaces", {"metadata": {"name": "default"}})]))["ok"]
    return f


def create(fsm, obj):
    return fsm.apply(commands.write([commands.create("services", obj)]))


def update(fsm, obj):
    meta = obj["metadata"]
    return fsm.apply(commands.write([commands.update("services", meta["namespace"], meta["name"], obj)]))


def delete(fsm, name):
    return fsm.apply(commands.write([commands.delete("services", "default", name)]))


def spec_of(fsm, name):
    return fsm.get("services", "default", name)["spec"]


def test_cluster_ips_are_the_lowest_free_and_the_first_is_kept_for_kubernetes(fsm):
    assert create(fsm, svc("a"))["ok"]
    assert create(fsm, svc("b"))["ok"]
    assert spec_of(fsm, "a")["clusterIP"] == "10.96.0.2"
    assert spec_of(fsm, "b")["clusterIP"] == "10.96.0.3"
    assert create(fsm, svc("kubernetes"))["ok"]
    assert spec_of(fsm, "kubernetes")["clusterIP"] == "10.96.0.1"
    a = spec_of(fsm, "a")
    assert a["clusterIPs"] == ["10.96.0.2"] and a["ipFamilies"] == ["IPv4"] and a["ipFamilyPolicy"] == "SingleStack"


def test_a_delete_frees_the_address_for_the_next_service(fsm):
    for name in ("a", "b", "c"):
        assert create(fsm, svc(name))["ok"]
    assert delete(fsm, "b")["ok"]
    assert create(fsm, svc("d"))["ok"]
    assert spec_of(fsm, "d")["clusterIP"] == "10.96.0.3"


def test_a_requested_free_ip_is_honoured_and_a_taken_one_refused_naming_the_field(fsm):
    assert create(fsm, svc("a", cluster_ip="10.100.0.7"))["ok"]
    assert spec_of(fsm, "a")["clusterIP"] == "10.100.0.7"
    result = create(fsm, svc("b", cluster_ip="10.100.0.7"))
    assert not result["ok"] and result["code"] == 422 and result["reason"] == "Invalid"
    assert "spec.clusterIP" in result["message"] and "default/a" in result["message"]
    assert fsm.get("services", "default", "b") is None


@pytest.mark.parametrize("ip, says", [("192.168.1.1", "not in the service CIDR 10.96.0.0/12"),
                                      ("10.96.0.0", "network address"), ("10.111.255.255", "broadcast"),
                                      ("nonsense", "not an IPv4 address"), ("fd00::1", "not an IPv4 address")])
def test_an_ip_outside_the_range_is_refused(fsm, ip, says):
    result = create(fsm, svc("a", cluster_ip=ip))
    assert result["code"] == 422 and "spec.clusterIP" in result["message"] and says in result["message"]


def test_headless_gets_no_address(fsm):
    assert create(fsm, svc("h", cluster_ip="None"))["ok"]
    spec = spec_of(fsm, "h")
    assert spec["clusterIP"] == "None" and spec["clusterIPs"] == ["None"]
    assert create(fsm, svc("a"))["ok"] and spec_of(fsm, "a")["clusterIP"] == "10.96.0.2"


def test_cluster_ip_is_kept_when_an_update_leaves_it_out_and_refused_when_changed(fsm):
    assert create(fsm, svc("a"))["ok"]
    assert update(fsm, svc("a", ports=[{"port": 81, "protocol": "TCP", "targetPort": 81}]))["ok"]
    assert spec_of(fsm, "a")["clusterIP"] == "10.96.0.2"
    stored = fsm.get("services", "default", "a")
    result = update(fsm, svc("a", cluster_ip="10.96.0.9"))
    assert result["code"] == 422 and "spec.clusterIP: is immutable" in result["message"]
    result = update(fsm, svc("a", cluster_ip="None"))
    assert result["code"] == 422 and "immutable" in result["message"]
    same = dict(stored, metadata=dict(stored["metadata"]))
    assert update(fsm, same).get("results")[0].get("unchanged")


def test_cluster_ips_must_match_cluster_ip(fsm):
    result = create(fsm, svc("a", cluster_ip="10.96.0.5", clusterIPs=["10.96.0.6"]))
    assert result["code"] == 422 and "spec.clusterIPs" in result["message"]
    assert create(fsm, svc("b", clusterIPs=["10.96.0.6"]))["ok"]
    assert spec_of(fsm, "b")["clusterIP"] == "10.96.0.6"
    result = create(fsm, svc("c", ipFamilies=["IPv6"]))
    assert result["code"] == 422 and "spec.ipFamilies" in result["message"]


def test_node_ports_allocated_lowest_free_requested_honoured_taken_refused(fsm):
    two = [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "dns", "port": 53, "protocol": "UDP"}]
    assert create(fsm, svc("a", type_="NodePort", ports=two))["ok"]
    assert [p["nodePort"] for p in spec_of(fsm, "a")["ports"]] == [30000, 30001]
    assert create(fsm, svc("b", type_="NodePort", ports=[{"port": 80, "nodePort": 30080}]))["ok"]
    assert spec_of(fsm, "b")["ports"][0]["nodePort"] == 30080
    result = create(fsm, svc("c", type_="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
    assert result["code"] == 422 and "spec.ports[0].nodePort" in result["message"] and "default/b" in result["message"]
    result = create(fsm, svc("d", type_="NodePort", ports=[{"port": 80, "nodePort": 8080}]))
    assert result["code"] == 422 and "outside the NodePort range 30000-32767" in result["message"]
    result = create(fsm, svc("e", ports=[{"port": 80, "nodePort": 30500}]))
    assert result["code"] == 422 and "may not be used when type is ClusterIP" in result["message"]
    assert delete(fsm, "a")["ok"]
    assert create(fsm, svc("f", type_="NodePort"))["ok"]
    assert spec_of(fsm, "f")["ports"][0]["nodePort"] == 30000


def test_an_update_keeps_node_ports_and_a_type_change_to_cluster_ip_frees_them(fsm):
    assert create(fsm, svc("a", type_="NodePort"))["ok"]
    assert spec_of(fsm, "a")["ports"][0]["nodePort"] == 30000
    assert update(fsm, svc("a", type_="NodePort", ports=[{"port": 80, "protocol": "TCP", "targetPort": 8080}]))["ok"]
    assert spec_of(fsm, "a")["ports"][0]["nodePort"] == 30000
    as_read = fsm.get("services", "default", "a")
    as_read = dict(as_read, spec=dict(as_read["spec"], type="ClusterIP"))
    assert update(fsm, as_read)["ok"]
    assert "nodePort" not in spec_of(fsm, "a")["ports"][0]
    assert create(fsm, svc("b", type_="NodePort"))["ok"]
    assert spec_of(fsm, "b")["ports"][0]["nodePort"] == 30000


def test_services_created_in_one_write_get_different_addresses(fsm):
    result = fsm.apply(commands.write([commands.create("services", svc("a")),
                                       commands.create("services", svc("b", type_="NodePort"))]))
    assert result["ok"]
    ips = [r["object"]["spec"]["clusterIP"] for r in result["results"]]
    assert ips == ["10.96.0.2", "10.96.0.3"]


def test_the_service_cidr_is_fsm_state_set_by_a_fenced_command(fsm):
    assert fsm.apply(commands.claim(3, "r1"))["ok"]
    assert fsm.apply(commands.service_network("172.30.0.0/16", [2, "r0"]))["reason"] == "Fenced"
    result = fsm.apply(commands.service_network("172.30.0.0/16", [3, "r1"]))
    assert result["ok"] and result["changed"]
    assert not fsm.apply(commands.service_network("172.30.0.0/16", [3, "r1"]))["changed"]
    assert create(fsm, svc("a"))["ok"] and spec_of(fsm, "a")["clusterIP"] == "172.30.0.2"
    # A snapshot keeps it; one taken before the setting existed reads the default.
    restored = pickle.loads(pickle.dumps(fsm))
    assert restored.service_cidr == "172.30.0.0/16"
    old = StoreFSM()
    del_state = old.__dict__
    assert "service_cidr" not in del_state and old.service_cidr == "10.96.0.0/12"


def test_a_bad_service_network_is_refused_by_the_shape_check(fsm):
    result = fsm.apply(commands.service_network("10.96.0.0/33"))
    assert not result["ok"] and result["code"] == 400 and "service_network" in result["message"]
    assert fsm.service_cidr == "10.96.0.0/12"


def test_a_full_range_is_refused_not_raised(fsm):
    assert fsm.apply(commands.service_network("10.0.0.0/30"))["ok"]
    assert create(fsm, svc("a"))["ok"]            # .2 (.1 is kubernetes', .3 broadcast)
    result = create(fsm, svc("b"))
    assert result["code"] == 422 and "is full" in result["message"]


def test_the_controller_commits_the_configured_cidr_once_per_epoch():
    from shepherd_ha.controllers.service_network import ServiceNetwork
    from shepherd_ha.controllers.settings import ControllerSettings
    from shepherd_ha.controllers.store_access import MemoryStore
    store = MemoryStore()
    controller = ServiceNetwork(store, None, ControllerSettings(service_cidr="10.200.0.0/16"))
    controller.run_until_idle()
    assert store.fsm.service_cidr == "10.200.0.0/16"
    assert controller.sentences[-1] == "service CIDR set to 10.200.0.0/16"
    assert controller.all_keys() == []
