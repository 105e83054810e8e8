"""The command language (store/commands.py): built in one place, checked by the FSM
before it applies anything, versioned; a command from before the version field
(an old journal) still applies as version 1."""
import copy
import pickle

import pytest

from shepherd_ha.store import commands as C
from shepherd_ha.store.fsm import StoreFSM


def ns(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "uid": "ns-" + name}}


def pod(name, phase="Pending"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": "u-" + name},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}, "status": {"phase": phase}}


def history():
    """A short life of the store in the constructors' format."""
    return [C.write([C.create("namespaces", ns("default"))], key="k1"),
            C.claim(3, "r1"),
            C.write([C.create("pods", pod("a")), C.create("pods", pod("b"))], epoch=[3, "r1"]),
            C.write([C.update("pods", "default", "a", pod("a", "Running"), subresource="status",
                              precondition={"uid": "u-a"})]),
            C.group([C.write([C.delete("pods", "default", "b", precondition={"uid": "u-b"})], key="k2"),
                     C.write([C.create("pods", pod("c"))])]),
            C.barrier()]


def unversioned(command):
    """The same command as journals written before the version field hold it."""
    old = {k: v for k, v in command.items() if k != "version"}
    if "commands" in old:
        old["commands"] = [unversioned(c) for c in old["commands"]]
    return old


def apply_all(commands):
    fsm = StoreFSM()
    results = [fsm.apply(copy.deepcopy(c)) for c in commands]
    return fsm, results


def test_constructed_commands_are_well_formed_and_apply():
    assert all(C.shape_error(c) is None for c in history())
    fsm, results = apply_all(history())
    assert all(r["ok"] for r in results), results
    assert sorted(n for _, n in fsm.objects["pods"]) == ["a", "c"]
    assert fsm.get("pods", "default", "a")["status"]["phase"] == "Running"
    assert fsm.epoch == [3, "r1"] and fsm.malformed_commands == 0
    assert all(c["version"] == C.VERSION for c in history())


def test_a_journal_without_versions_replays_to_the_same_state():
    new, new_results = apply_all(history())
    old, old_results = apply_all([unversioned(c) for c in history()])
    assert "version" not in pickle.dumps(unversioned(history()[0])).decode("latin-1")
    assert old.digest() == new.digest() and old_results == new_results and old.malformed_commands == 0


def test_optional_op_fields_are_left_out():
    assert C.delete("pods", "default", "a") == {"op": "delete", "resource": "pods", "namespace": "default",
                                                "name": "a"}
    assert C.update("nodes", None, "n1", {"status": {}}, subresource="status")["subresource"] == "status"
    assert "precondition" not in C.update("nodes", None, "n1", {})


@pytest.mark.parametrize("command, says", [
    ("write", "a command is a mapping, not str"),
    ({"type": "launch"}, "unknown command type 'launch'"),
    ({"type": ["write"]}, "unknown command type"),
    ({"type": "write", "version": 5, "ops": []}, "command format version 5 is not one this replica applies (1, 2, 3, 4)"),
    ({"type": "barrier", "version": True}, "version True"),
    ({"type": "write", "ops": []}, "non-empty list of ops"),
    ({"type": "write", "key": 7, "ops": [C.create("pods", pod("x"))]}, "key is a string or None"),
    ({"type": "write", "epoch": 3, "ops": [C.create("pods", pod("x"))]}, "epoch is [term, replica]"),
    (C.write([C.create("pods", pod("x")), "delete it"]), "op 1: an op is a mapping"),
    (C.write([{"op": "patch", "resource": "pods"}]), "op 0: unknown op 'patch'"),
    (C.write([{"op": "create", "resource": "widgets", "object": pod("x")}]), "unknown resource 'widgets'"),
    (C.write([{"op": "create", "resource": ["pods"], "object": pod("x")}]), "unknown resource"),
    (C.write([{"op": "create", "resource": "pods", "object": {"metadata": {}}}]), "metadata.name"),
    (C.write([{"op": "update", "resource": "pods", "name": "a"}]), "an update needs an object"),
    (C.write([{"op": "delete", "resource": "pods", "namespace": "default"}]), "a delete needs the object's name"),
    (C.write([C.delete("pods", "default", "a", precondition="rv 3")]), "precondition is a mapping"),
    (C.write([C.update("pods", "default", "a", pod("a"), subresource="scale")]), "unknown subresource 'scale'"),
    (C.write([C.update("nodes", None, "n1", {"spec": {"nodeName": "n1"}}, subresource="binding")]),
     "a binding is a pods update"),
    (C.write([C.update("pods", "default", "a", {"spec": {}}, subresource="binding")]), "a binding is a pods update"),
    (C.write([C.update("pods", "default", "a", {"spec": {"nodeName": "n1"}, "status": 1}, subresource="binding")]),
     "a binding is a pods update"),
    (C.write([C.update("pods", "default", "a", {"spec": {"finalizers": []}}, subresource="finalize")]),
     "a finalize is a namespaces update"),
    (C.write([C.update("namespaces", None, "a", {"spec": {"finalizers": "kubernetes"}}, subresource="finalize")]),
     "a finalize is a namespaces update"),
    (C.write([C.finalize("a", ["kubernetes", ""])]), "a finalize is a namespaces update"),
    (C.write([C.delete("pods", "default", "a", terminate=True)]), "terminate is only true"),
    (C.write([C.delete("namespaces", None, "a", terminate="yes")]), "terminate is only true"),
    ({"type": "group", "commands": "all"}, "a group needs a list of commands"),
    ({"type": "claim", "term": "3", "replica": "r1"}, "integer term"),
])
def test_malformed_commands_are_refused_with_what_is_wrong(command, says):
    fsm, _ = apply_all(history())
    before, revision = fsm.digest(), fsm.revision
    result, changes = fsm.apply_with_changes(command)          # never raises
    assert result["ok"] is False and result["code"] == 400 and result["reason"] == "BadRequest"
    assert says in result["message"], result["message"]
    assert result["message"].startswith("malformed command refused by the store: ")
    assert changes == [] and fsm.digest() == before and fsm.revision == revision
    assert fsm.malformed_commands == 1


def test_a_malformed_command_in_a_group_fails_alone():
    fsm, _ = apply_all(history()[:1])
    result = fsm.apply(C.group([C.write([C.create("pods", pod("good"))]), {"type": "write", "ops": "none"}]))
    assert result["ok"] and [r["ok"] for r in result["results"]] == [True, False]
    assert "non-empty list of ops" in result["results"][1]["message"]
    assert fsm.get("pods", "default", "good") is not None


def test_a_write_digest_is_optional_and_a_string():
    op = C.delete("pods", "default", "p")
    assert "digest" not in C.write([op], "k")
    assert C.shape_error(C.write([op], "k", digest="abc")) is None
    assert "digest" in C.shape_error(dict(C.write([op], "k"), digest=5))


def test_a_version_1_binding_and_a_version_2_one_make_the_same_pod():
    """A journal of version 1 binds with an update and a status update (two changes); it
    replays as it was, and the pod is the one a version 2 binding makes in one change."""
    status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    bound = dict(pod("c"), spec=dict(pod("c")["spec"], nodeName="n1"))
    old_binding = {"type": "write", "version": 1, "key": None, "epoch": None, "ops": [
        {"op": "update", "resource": "pods", "namespace": "default", "name": "c", "object": bound},
        {"op": "update", "resource": "pods", "namespace": "default", "name": "c", "object": {"status": status},
         "subresource": "status"}]}
    old, old_results = apply_all([dict(c, version=1) for c in history()] + [old_binding])
    new, _ = apply_all(history() + [C.write([C.bind("default", "c", "n1", status)])])
    assert old_results[-1]["ok"] and old.malformed_commands == 0, old_results[-1]
    assert old.revision == new.revision + 1          # two changes then, one now
    strip = lambda p: dict(p, metadata={k: v for k, v in p["metadata"].items() if k != "resourceVersion"})  # noqa
    assert strip(old.get("pods", "default", "c")) == strip(new.get("pods", "default", "c"))


def bound_history():
    fsm, _ = apply_all(history())
    return fsm


def test_a_binding_sets_node_and_status_in_one_change():
    fsm = bound_history()
    before = fsm.get("pods", "default", "c")
    status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    result, changes = fsm.apply_with_changes(C.write([C.bind("default", "c", "n1", status, precondition={
        "resourceVersion": before["metadata"]["resourceVersion"], "uid": "u-c"})]))
    assert result["ok"], result
    assert len(changes) == 1
    after = fsm.get("pods", "default", "c")
    assert after["spec"] == dict(before["spec"], nodeName="n1") and after["status"] == status
    assert after["metadata"]["resourceVersion"] == str(fsm.revision)
    assert after["metadata"]["generation"] == before["metadata"].get("generation", 1) + 1
    assert {k: v for k, v in after["metadata"].items() if k not in ("resourceVersion", "generation")} == \
        {k: v for k, v in before["metadata"].items() if k not in ("resourceVersion", "generation")}


def test_a_binding_of_a_bound_or_terminating_pod_is_a_conflict():
    fsm = bound_history()
    assert fsm.apply(C.write([C.bind("default", "c", "n1", None)]))["ok"]
    again = fsm.apply(C.write([C.bind("default", "c", "n2", None)]))
    assert again["code"] == 409 and "already assigned to node n1" in again["message"], again
    assert fsm.get("pods", "default", "c")["spec"]["nodeName"] == "n1"
    fsm.apply(C.write([C.create("pods", dict(pod("d"), metadata=dict(pod("d")["metadata"],
                                                                     deletionTimestamp="2026-01-01T00:00:00Z")))]))
    gone = fsm.apply(C.write([C.bind("default", "d", "n1", None)]))
    assert gone["code"] == 409 and "being deleted" in gone["message"], gone
    missing = fsm.apply(C.write([C.bind("default", "nobody", "n1", None)]))
    assert missing["code"] == 404, missing


def test_a_binding_of_a_pod_whose_spec_is_not_a_mapping_is_refused_not_raised():
    fsm = bound_history()
    assert fsm.apply(C.write([C.create("pods", dict(pod("odd"), spec=1))]))["ok"]      # planted past validation
    refused = fsm.apply(C.write([C.bind("default", "odd", "n1", None)]))
    assert refused["code"] == 422 and "its spec is not a mapping" in refused["message"], refused
    assert fsm.get("pods", "default", "odd")["spec"] == 1
