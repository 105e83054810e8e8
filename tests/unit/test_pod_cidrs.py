"""Pod CIDR allocation in the FSM (store/pod_cidrs.py), its validation, and the node
IPAM controller (condition and Event when the cluster CIDR is exhausted)."""
import pickle

import pytest
from controller_kit import ControllerHarness, create, write

from shepherd_ha.controllers.events import EventRecorder
from shepherd_ha.controllers.node_ipam import NO_CIDR, NodeIPAMController, network_condition
from shepherd_ha.controllers.settings import ControllerSettings
from shepherd_ha.model import network as N
from shepherd_ha.model.validation import validate_object, validate_update
from shepherd_ha.options import ConfigError
from shepherd_ha.store import commands as C
from shepherd_ha.store.encoded_objects import decode
from shepherd_ha.store.fsm import StoreFSM


def node(name, **spec):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": "uid-" + name},
            "spec": dict(spec), "status": {}}


def add(fsm, *names):
    result = fsm.apply(C.write([C.create("nodes", node(n)) for n in names]))
    assert result["ok"], result
    return [r["object"]["spec"].get("podCIDR", "") for r in result["results"]]


def cidr(fsm, name):
    return N.pod_cidr_of(fsm.get("nodes", None, name))


def planned(cluster="10.244.0.0/16", mask=24):
    fsm = StoreFSM()
    assert fsm.apply(C.network(cluster, mask))["ok"]
    return fsm


def test_blocks_are_the_lowest_free_ones_in_order_and_the_same_on_every_replica():
    replicas = [planned(), planned()]
    for fsm in replicas:
        assert add(fsm, "w1", "w2") == ["10.244.0.0/24", "10.244.1.0/24"]
        assert add(fsm, "w3") == ["10.244.2.0/24"]
        assert fsm.get("nodes", None, "w3")["spec"]["podCIDRs"] == ["10.244.2.0/24"]
    assert replicas[0].digest() == replicas[1].digest()


def test_nodes_that_existed_before_the_plan_get_blocks_in_name_order_when_it_is_set():
    fsm = StoreFSM()
    add(fsm, "zeta", "alpha")
    assert cidr(fsm, "alpha") == ""
    result, changes = fsm.apply_with_changes(C.network("10.244.0.0/16", 24))
    assert result["ok"] and result["changed"]
    assert (cidr(fsm, "alpha"), cidr(fsm, "zeta")) == ("10.244.0.0/24", "10.244.1.0/24")
    assert [(c.type, decode(c.object)["metadata"]["name"]) for c in changes] == [("MODIFIED", "alpha"),
                                                                                ("MODIFIED", "zeta")]
    assert fsm.apply(C.network("10.244.0.0/16", 24)) == {"ok": True, "changed": False,
                                                         "network": {"clusterCIDR": "10.244.0.0/16",
                                                                     "nodeCIDRMaskSize": 24}}


def test_the_plan_cannot_change_once_set_and_a_bad_one_is_refused():
    fsm = planned()
    refused = fsm.apply(C.network("10.0.0.0/8", 24))
    assert (refused["ok"], refused["code"], refused["network"]["clusterCIDR"]) == (False, 409, "10.244.0.0/16")
    assert "cannot change" in refused["message"]
    bad = StoreFSM().apply(C.network("10.244.0.0/16", 8))
    assert bad["code"] == 422 and "larger than the cluster CIDR" in bad["message"]
    assert StoreFSM().apply(C.network("10.244.0.1/16", 24))["code"] == 422
    assert C.shape_error({"type": "network", "version": 1, "clusterCIDR": 5, "nodeCIDRMaskSize": 24})


def test_a_stale_epoch_cannot_set_the_plan():
    fsm = StoreFSM()
    fsm.apply(C.claim(3, "r1"))
    result = fsm.apply(C.network("10.244.0.0/16", 24, epoch=[2, "r2"]))
    assert result["reason"] == "Fenced" and fsm.network is None
    assert fsm.apply(C.network("10.244.0.0/16", 24, epoch=[3, "r1"]))["ok"]


def test_a_set_block_survives_updates_that_leave_it_out_and_re_registration():
    fsm = planned()
    add(fsm, "w1", "w2")
    # the agent registering again: a create (409), then label patches and status updates without podCIDR
    again = fsm.apply(C.write([C.create("nodes", node("w1"))]))
    assert again["reason"] == "AlreadyExists"
    assert fsm.apply(C.write([C.update("nodes", None, "w1", node("w1", unschedulable=True))]))["ok"]
    status = dict(node("w1"), status={"conditions": []})
    assert fsm.apply(C.write([C.update("nodes", None, "w1", status, subresource="status")]))["ok"]
    assert fsm.get("nodes", None, "w1")["spec"]["unschedulable"] is True
    assert cidr(fsm, "w1") == "10.244.0.0/24"
    forced = fsm.apply(C.write([C.update("nodes", None, "w1", node("w1", podCIDR="10.244.9.0/24"))]))
    assert forced["ok"]
    assert cidr(fsm, "w1") == "10.244.0.0/24"


def test_a_freed_block_goes_to_the_first_waiting_node_in_the_same_write_and_is_then_reused_lowest_first():
    fsm = planned("10.244.0.0/23", 24)        # two blocks
    assert add(fsm, "a", "b", "c") == ["10.244.0.0/24", "10.244.1.0/24", ""]
    result, changes = fsm.apply_with_changes(C.write([C.delete("nodes", None, "a")]))
    assert result["ok"]
    assert [(c.type, decode(c.object or c.previous)["metadata"]["name"]) for c in changes] == [
        ("DELETED", "a"), ("MODIFIED", "c")]
    assert cidr(fsm, "c") == "10.244.0.0/24"
    assert add(fsm, "d") == [""]                 # still full
    fsm.apply(C.write([C.delete("nodes", None, "b"), C.delete("nodes", None, "d")]))
    assert add(fsm, "e") == ["10.244.1.0/24"]


def test_a_requested_block_is_honoured_when_free_and_refused_when_taken_or_outside_the_plan():
    fsm = planned()
    ok = fsm.apply(C.write([C.create("nodes", node("w5", podCIDR="10.244.5.0/24"))]))
    assert ok["ok"] and cidr(fsm, "w5") == "10.244.5.0/24"
    taken = fsm.apply(C.write([C.create("nodes", node("x", podCIDR="10.244.5.0/24"))]))
    assert taken["code"] == 409 and 'node "w5"' in taken["message"]
    outside = fsm.apply(C.write([C.create("nodes", node("y", podCIDR="10.9.0.0/24"))]))
    assert outside["code"] == 422 and "spec.podCIDR" in outside["message"]
    assert add(fsm, "w0") == ["10.244.0.0/24"]


def test_the_block_index_is_rebuilt_for_a_snapshot_without_it_and_kept_in_one_with_it():
    fsm = planned()
    add(fsm, "w1", "w2")
    copy = pickle.loads(pickle.dumps(fsm))
    assert add(copy, "w3") == ["10.244.2.0/24"]
    del fsm.__dict__["_cidr_owner"]             # as a snapshot written before the index existed
    assert add(fsm, "w3") == ["10.244.2.0/24"]
    assert fsm.digest() == copy.digest()


def test_exhaustion_leaves_the_node_without_a_block_and_never_fails_the_write():
    fsm = planned("10.244.0.0/24", 24)
    assert add(fsm, "only", "late") == ["10.244.0.0/24", ""]
    assert fsm.get("nodes", None, "late") is not None


# ---- validation ----

def test_validation_refuses_changing_a_set_pod_cidr_naming_the_field():
    old = node("w1", podCIDR="10.244.1.0/24", podCIDRs=["10.244.1.0/24"])
    causes = validate_update("nodes", old, node("w1", podCIDR="10.244.2.0/24", podCIDRs=["10.244.2.0/24"]))
    assert {c[0] for c in causes} == {"spec.podCIDR", "spec.podCIDRs"}
    assert "immutable" in causes[0][1]
    assert validate_update("nodes", old, node("w1")) == []                  # left out: kept by the store
    assert validate_update("nodes", node("w1"), node("w1", podCIDR="10.244.2.0/24")) == []   # set once


def test_validation_of_pod_cidr_shapes():
    assert validate_object("nodes", node("w1", podCIDR="10.244.1.0/24", podCIDRs=["10.244.1.0/24"])) == []
    assert [c[0] for c in validate_object("nodes", node("w1", podCIDR="10.244.1.1/24"))] == ["spec.podCIDR"]
    assert [c[0] for c in validate_object("nodes", node("w1", podCIDR=7))] == ["spec.podCIDR"]
    assert [c[0] for c in validate_object("nodes", node("w1", podCIDR="10.244.1.0/24",
                                                        podCIDRs=["10.244.2.0/24"]))] == ["spec.podCIDRs"]


def test_the_plan_options_are_checked():
    with pytest.raises(ConfigError, match="cluster-cidr"):
        ControllerSettings(cluster_cidr="10.244.0.0/33").validate()
    assert ControllerSettings().cluster_cidr == N.CLUSTER_CIDR == "10.244.0.0/16"


# ---- the controller ----

def harness(cluster="10.244.0.0/16", mask=24):
    settings = ControllerSettings(cluster_cidr=cluster, node_cidr_mask_size=mask)
    return ControllerHarness(lambda store: [NodeIPAMController(store, EventRecorder(store, "test"), settings)])


def test_the_controller_sets_the_plan_and_nodes_created_before_it_get_their_blocks():
    h = harness()
    create(h.store, "nodes", node("w1"))
    h.settle()
    assert h.store.fsm.network == {"clusterCIDR": "10.244.0.0/16", "nodeCIDRMaskSize": 24}
    assert N.pod_cidr_of(h.store.get("nodes", None, "w1")) == "10.244.0.0/24"
    assert any("set the cluster CIDR to 10.244.0.0/16" in s for s in h.controller.sentences)
    assert network_condition(h.store.get("nodes", None, "w1")) is None


def test_an_exhausted_cidr_gives_the_node_a_condition_and_an_event_and_a_freed_block_clears_them():
    h = harness("10.244.0.0/24", 24)
    h.settle()
    create(h.store, "nodes", node("first"))
    create(h.store, "nodes", node("second"))
    h.settle()
    cond = network_condition(h.store.get("nodes", None, "second"))
    assert (cond["status"], cond["reason"]) == ("True", NO_CIDR)
    assert "no free /24 block left in the cluster CIDR 10.244.0.0/24" in cond["message"]
    events = [e for e in h.store.list("events") if e["reason"] == NO_CIDR]
    assert len(events) == 1 and events[0]["involvedObject"]["name"] == "second" and events[0]["type"] == "Warning"
    h.settle()
    assert len([e for e in h.store.list("events") if e["reason"] == NO_CIDR]) == 1      # said once
    write(h.store, C.delete("nodes", None, "first"))
    h.settle()
    second = h.store.get("nodes", None, "second")
    assert N.pod_cidr_of(second) == "10.244.0.0/24"
    assert (network_condition(second)["status"], network_condition(second)["reason"]) == ("False", "CIDRAssigned")


def test_a_different_configured_plan_is_ignored_and_said_once():
    h = harness()
    h.store.apply(C.network("10.250.0.0/16", 24))
    h.settle()
    h.controller.resync()
    h.settle()
    said = [s for s in h.controller.sentences if "ignored" in s]
    assert len(said) == 1 and "10.250.0.0/16" in said[0]
    create(h.store, "nodes", node("w1"))
    assert N.pod_cidr_of(h.store.get("nodes", None, "w1")) == "10.250.0.0/24"
