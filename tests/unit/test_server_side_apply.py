"""Server-side apply and managedFields (shepherd_ha/model/server_side_apply.py): the
FieldsV1 encoding Kubernetes uses, conflicts with other managers, force, shared
ownership of equal values, removal of fields a manager stops applying, and the
ownership that updates by other means take."""
import copy

import pytest

from shepherd_ha.model import server_side_apply as ssa

CONFIG = {"apiVersion": "apps/v1", "kind": "Deployment",
          "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
          "spec": {"replicas": 2, "template": {"spec": {"containers": [
              {"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
               "env": [{"name": "A", "value": "1"}]}]}}}}


def entries(obj):
    return {(e["manager"], e["operation"]): e for e in obj["metadata"]["managedFields"]}


def apply(current, config=CONFIG, manager="alice", force=False):
    return ssa.apply("deployments", current, copy.deepcopy(config), manager, "apps/v1", "2026-01-01T00:00:00Z", force)


def test_fields_v1_encoding_is_kubernetes():
    obj = apply(None)
    entry = entries(obj)["alice", "Apply"]
    assert entry["fieldsType"] == "FieldsV1" and entry["apiVersion"] == "apps/v1"
    assert entry["time"] == "2026-01-01T00:00:00Z"
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
            'k:{"name":"web"}': {".": {}, "f:name": {}, "f:image": {},
                                 "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}},
                                 "f:env": {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}}}}}}}}


def test_encode_and_decode_are_inverse():
    paths = ssa.field_set("deployments", CONFIG)
    assert ssa.decode(ssa.encode(paths)) == paths


def test_sets_are_encoded_by_value():
    paths = ssa.field_set("pods", {"metadata": {"name": "p", "finalizers": ["a/b"]}})
    assert ssa.encode(paths) == {"f:metadata": {"f:finalizers": {'v:"a/b"': {}}}}


def test_another_managers_change_conflicts_and_force_takes_it_over():
    obj = apply(None)
    scaled = copy.deepcopy(obj)
    scaled["spec"]["replicas"] = 5
    scaled = ssa.record_update("deployments", obj, scaled, "kubectl-scale", "apps/v1", "t")
    assert ssa.decode(entries(scaled)["kubectl-scale", "Update"]["fieldsV1"]) == {("f:spec", "f:replicas")}
    assert ("f:spec", "f:replicas") not in ssa.decode(entries(scaled)["alice", "Apply"]["fieldsV1"])
    with pytest.raises(ssa.ApplyConflict) as err:
        apply(scaled)
    assert err.value.conflicts == [('conflict with "kubectl-scale" using apps/v1', ".spec.replicas")]
    assert 'conflict with "kubectl-scale" using apps/v1: .spec.replicas' in str(err.value)
    forced = apply(scaled, force=True)
    assert forced["spec"]["replicas"] == 2
    assert ("kubectl-scale", "Update") not in entries(forced)      # it owned nothing else


def test_applying_the_same_value_shares_ownership_without_conflict():
    obj = apply(None)
    both = apply(obj, manager="bob")
    assert ssa.decode(entries(both)["bob", "Apply"]["fieldsV1"]) == ssa.decode(entries(both)["alice", "Apply"]["fieldsV1"])
    changed = copy.deepcopy(CONFIG)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    with pytest.raises(ssa.ApplyConflict) as err:
        apply(both, changed)
    assert err.value.conflicts == [('conflict with "bob" using apps/v1', '.spec.template.spec.containers[name="web"].image')]


def test_a_field_no_longer_applied_is_removed_when_nobody_else_owns_it():
    obj = apply(None)
    smaller = copy.deepcopy(CONFIG)
    del smaller["metadata"]["labels"]
    smaller["spec"]["template"]["spec"]["containers"][0]["env"] = []
    del smaller["spec"]["template"]["spec"]["containers"][0]["env"]
    out = apply(obj, smaller)
    assert not out["metadata"].get("labels")
    assert "env" not in out["spec"]["template"]["spec"]["containers"][0]
    assert out["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"


def test_a_field_another_manager_also_owns_stays():
    obj = apply(apply(None), manager="bob")
    smaller = copy.deepcopy(CONFIG)
    del smaller["metadata"]["labels"]
    out = apply(obj, smaller)
    assert out["metadata"]["labels"] == {"app": "web"}


def test_a_list_item_no_longer_applied_goes():
    two = copy.deepcopy(CONFIG)
    two["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox"})
    obj = apply(None, two)
    out = apply(obj)
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == ["web"]


def test_updates_take_the_fields_they_change_and_removed_fields_leave_every_set():
    obj = apply(None)
    edited = copy.deepcopy(obj)
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:9"
    del edited["metadata"]["labels"]
    edited = ssa.record_update("deployments", obj, edited, "kubectl-edit", "apps/v1", "t")
    image = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"web"}', "f:image")
    assert ssa.decode(entries(edited)["kubectl-edit", "Update"]["fieldsV1"]) == {image}
    alice = ssa.decode(entries(edited)["alice", "Apply"]["fieldsV1"])
    assert image not in alice and ("f:metadata", "f:labels", "f:app") not in alice


def test_create_gives_every_field_to_its_manager_and_status_is_separate():
    pod = {"metadata": {"name": "p", "uid": "u", "resourceVersion": "3"}, "spec": {"nodeName": "n1"},
           "status": {"phase": "Pending"}}
    out = ssa.record_update("pods", None, copy.deepcopy(pod), "kubectl-create", "v1", "t")
    assert entries(out)["kubectl-create", "Update"]["fieldsV1"] == {"f:spec": {"f:nodeName": {}}}
    running = copy.deepcopy(out)
    running["status"] = {"phase": "Running"}
    running = ssa.record_update("pods", out, running, "shepherd-agent", "v1", "t", subresource="status")
    status_entry = entries(running)["shepherd-agent", "Update"]
    assert status_entry["subresource"] == "status"
    assert status_entry["fieldsV1"] == {"f:status": {"f:phase": {}}}


def test_managed_fields_stay_small():
    obj = apply(None)
    for i in range(30):
        new = copy.deepcopy(obj)
        new["metadata"]["labels"]["l%d" % i] = "x"
        obj = ssa.record_update("deployments", obj, new, "writer-%d" % i, "apps/v1", "t%02d" % i)
    managers = [e["manager"] for e in obj["metadata"]["managedFields"]]
    assert len(managers) == ssa.MAX_ENTRIES
    assert "alice" in managers and "writer-29" in managers and "writer-0" not in managers


def test_dotted_names_items_like_kubernetes():
    path = ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}', "f:targetPort")
    assert ssa.dotted(path) == '.spec.ports[port=80,protocol="TCP"].targetPort'


def test_a_write_that_changes_nothing_keeps_managed_fields_as_they_were():
    obj = apply(None)
    again = ssa.apply("deployments", obj, copy.deepcopy(CONFIG), "alice", "apps/v1", "2030-01-01T00:00:00Z")
    assert again["metadata"]["managedFields"] == obj["metadata"]["managedFields"]
    same = ssa.record_update("deployments", obj, copy.deepcopy(obj), "kubectl-edit", "apps/v1", "2030")
    assert same["metadata"]["managedFields"] == obj["metadata"]["managedFields"]


def test_the_same_managers_update_entry_conflicts_with_its_apply():
    obj = apply(None, manager="kubectl")
    scaled = copy.deepcopy(obj)
    scaled["spec"]["replicas"] = 0
    scaled = ssa.record_update("deployments", obj, scaled, "kubectl", "apps/v1", "t", subresource="scale")
    with pytest.raises(ssa.ApplyConflict) as err:
        apply(scaled, manager="kubectl")
    assert err.value.conflicts == [('conflict with "kubectl" with subresource "scale" using apps/v1', ".spec.replicas")]
