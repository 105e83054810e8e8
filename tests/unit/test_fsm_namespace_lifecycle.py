"""The store's half of Kubernetes' namespace lifecycle: a delete marks the namespace
Terminating and keeps its contents, new content is refused with the cause clients look
for, finalize completes the deletion, and a log written before the lifecycle replays as
it did (the namespace and its contents deleted at once)."""
import pytest

from shepherd_ha.store import commands as C
from shepherd_ha.store.deletion import delete_op
from shepherd_ha.store.fsm import StoreFSM

from test_fsm import ns, pod

STAMP = "2026-12-06T01:00:00Z"


def write(*ops):
    return C.write(list(ops))


@pytest.fixture
def fsm():
    f = StoreFSM()
    for name in ("default", "team"):
        assert f.apply(write(C.create("namespaces", ns(name))))["ok"]
    assert f.apply(write(C.create("pods", pod("a", namespace="team"))))["ok"]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "team"}, "data": {}}
    assert f.apply(write(C.create("configmaps", cm)))["ok"]
    return f


def terminate(fsm, name="team"):
    op = C.delete("namespaces", None, name, deletionTimestamp=STAMP, terminate=True)
    return fsm.apply_with_changes(write(op))


def test_the_api_deletes_a_namespace_by_marking_it():
    op = delete_op("namespaces", None, "team")
    assert op["terminate"] is True and op["deletionTimestamp"]
    assert "terminate" not in delete_op("configmaps", "team", "c")


def test_a_delete_marks_the_namespace_terminating_and_keeps_its_contents(fsm):
    result, changes = terminate(fsm)
    assert result["ok"]
    assert [(c.resource, c.type) for c in changes] == [("namespaces", "MODIFIED")]
    marked = fsm.get("namespaces", None, "team")
    assert marked["metadata"]["deletionTimestamp"] == STAMP
    assert marked["status"]["phase"] == "Terminating"
    assert marked["spec"]["finalizers"] == ["kubernetes"]
    assert result["results"][0]["object"] == marked
    assert fsm.get("pods", "team", "a") is not None and fsm.get("configmaps", "team", "c") is not None
    # A second delete changes nothing (and does not move the timestamp).
    again, changes = fsm.apply_with_changes(write(C.delete("namespaces", None, "team",
                                                           deletionTimestamp="2030-01-01T00:00:00Z", terminate=True)))
    assert again["ok"] and again["results"][0].get("unchanged") and changes == []
    assert fsm.get("namespaces", None, "team")["metadata"]["deletionTimestamp"] == STAMP


def test_new_content_in_a_terminating_namespace_is_forbidden_with_its_cause(fsm):
    terminate(fsm)
    refused = fsm.apply(write(C.create("pods", pod("b", namespace="team"))))
    assert not refused["ok"] and refused["code"] == 403 and refused["reason"] == "Forbidden"
    assert refused["message"] == ('pods "b" is forbidden: unable to create new content in namespace team '
                                  'because it is being terminated')
    assert refused["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    assert fsm.get("pods", "team", "b") is None
    # Updates and deletes of what is there still go through (the controller's deletes).
    assert fsm.apply(write(C.delete("configmaps", "team", "c")))["ok"]


def test_finalize_with_no_finalizers_left_deletes_the_namespace_and_what_is_left(fsm):
    terminate(fsm)
    result, changes = fsm.apply_with_changes(write(C.finalize("team", [])))
    assert result["ok"] and result["results"][0].get("deleted")
    assert fsm.get("namespaces", None, "team") is None
    assert fsm.get("pods", "team", "a") is None and fsm.get("configmaps", "team", "c") is None
    assert sorted((c.resource, c.type) for c in changes) == [
        ("configmaps", "DELETED"), ("namespaces", "DELETED"), ("pods", "DELETED")]
    assert fsm.get("pods", "default", "a") is None and fsm.get("namespaces", None, "default") is not None


def test_metadata_finalizers_hold_the_namespace_after_finalize(fsm):
    current = fsm.get("namespaces", None, "team")
    held = dict(current, metadata=dict(current["metadata"], finalizers=["example.com/keep"]))
    assert fsm.apply(write(C.update("namespaces", None, "team", held)))["ok"]
    terminate(fsm)
    assert fsm.apply(write(C.finalize("team", [])))["ok"]
    kept = fsm.get("namespaces", None, "team")
    assert kept is not None and kept["spec"]["finalizers"] == []
    # The last finalizer of either kind going completes it.
    done = dict(kept, metadata=dict(kept["metadata"], finalizers=[]))
    assert fsm.apply(write(C.update("namespaces", None, "team", done)))["results"][0].get("deleted")
    assert fsm.get("namespaces", None, "team") is None and fsm.get("pods", "team", "a") is None


def test_finalizers_cannot_be_added_while_terminating(fsm):
    terminate(fsm)
    refused = fsm.apply(write(C.finalize("team", ["kubernetes", "example.com/more"])))
    assert refused["code"] == 422 and "spec.finalizers: example.com/more cannot be added" in refused["message"]


def test_an_update_keeps_spec_finalizers(fsm):
    assert fsm.apply(write(C.finalize("team", ["kubernetes"])))["ok"]
    current = fsm.get("namespaces", None, "team")
    relabelled = dict(current, metadata=dict(current["metadata"], labels={"a": "b"}), spec={})
    assert fsm.apply(write(C.update("namespaces", None, "team", relabelled)))["ok"]
    assert fsm.get("namespaces", None, "team")["spec"]["finalizers"] == ["kubernetes"]
    terminate(fsm)
    marked = fsm.get("namespaces", None, "team")
    stripped = dict(marked, spec={"finalizers": []})
    assert fsm.apply(write(C.update("namespaces", None, "team", stripped)))["ok"]
    assert fsm.get("namespaces", None, "team")["spec"]["finalizers"] == ["kubernetes"], \
        "only finalize removes the controller's finalizer"


def test_a_namespace_delete_logged_before_the_lifecycle_replays_as_it_did(fsm):
    old = {"type": "write", "version": 2, "key": None, "epoch": None,
           "ops": [{"op": "delete", "resource": "namespaces", "namespace": None, "name": "team"}]}
    result, changes = fsm.apply_with_changes(old)
    assert result["ok"]
    assert fsm.get("namespaces", None, "team") is None and fsm.get("pods", "team", "a") is None
    assert {(c.resource, c.type) for c in changes} == {
        ("pods", "DELETED"), ("configmaps", "DELETED"), ("namespaces", "DELETED")}
