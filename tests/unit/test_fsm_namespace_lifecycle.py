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
    # A second delete is Kubernetes' 409 while the content is being removed, and changes nothing.
    again, changes = fsm.apply_with_changes(write(C.delete("namespaces", None, "team",
                                                           deletionTimestamp="2030-01-01T00:00:00Z", terminate=True)))
    assert again["code"] == 409 and changes == []
    assert again["message"].startswith('Operation cannot be fulfilled on namespaces "team": The system is ensuring '
                                       'all content is removed from this namespace.')
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
    again = fsm.apply(write(delete_op("namespaces", None, "team")))     # only someone's finalizer holds it
    assert again["ok"] and again["results"][0].get("unchanged")
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


@pytest.mark.parametrize("name", ["default", "kube-node-lease", "kube-system", "kube-public"])
def test_no_writer_may_terminate_a_built_in_namespace(name):
    """The API refuses it too, but a controller's delete (the garbage collector judging an
    ownerReference someone put on kube-node-lease) reaches the store directly."""
    f = StoreFSM()
    assert f.apply(write(C.create("namespaces", ns(name))))["ok"]
    refused = f.apply(write(delete_op("namespaces", None, name)))
    assert refused["code"] == 403 and refused["message"] == \
        'namespaces "%s" is forbidden: this namespace may not be deleted' % name
    assert "deletionTimestamp" not in f.get("namespaces", None, name)["metadata"]


def test_an_update_keeps_the_status_of_a_terminating_namespace(fsm):
    terminate(fsm)
    marked = fsm.get("namespaces", None, "team")
    replaced = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"a": "b"}},
                "spec": {}, "status": {"phase": "Active"}}         # what a PUT of the manifest sends
    assert fsm.apply(write(C.update("namespaces", None, "team", replaced)))["ok"]
    now = fsm.get("namespaces", None, "team")
    assert now["status"] == marked["status"] and now["metadata"]["labels"] == {"a": "b"}
    assert now["metadata"]["deletionTimestamp"] == STAMP and now["spec"]["finalizers"] == ["kubernetes"]


def test_namespace_updates_logged_before_the_lifecycle_replay_as_they_did(fsm):
    """Version 2 stored a namespace update's spec.finalizers and status as sent, and deleted
    a marked namespace when its last metadata finalizer went: a replica replaying such a
    log must end where one that applied it then did."""
    def v2(op):
        return dict(C.write([op]), version=2)
    current = fsm.get("namespaces", None, "team")
    sent = dict(current, metadata=dict(current["metadata"], finalizers=["example.com/x"]),
                spec={"finalizers": ["kubernetes"]}, status={"phase": "Active", "note": "as sent"})
    assert fsm.apply(v2(C.update("namespaces", None, "team", sent)))["ok"]
    stored = fsm.get("namespaces", None, "team")
    assert stored["spec"] == {"finalizers": ["kubernetes"]} and stored["status"]["note"] == "as sent"
    # An old delete of a namespace with a finalizer: contents gone, the namespace marked ...
    assert fsm.apply(v2(C.delete("namespaces", None, "team", deletionTimestamp=STAMP)))["ok"]
    marked = fsm.get("namespaces", None, "team")
    assert marked["metadata"]["deletionTimestamp"] and fsm.get("pods", "team", "a") is None
    # ... and gone with its last metadata finalizer, spec.finalizers notwithstanding.
    done = dict(marked, metadata=dict(marked["metadata"], finalizers=[]))
    assert fsm.apply(v2(C.update("namespaces", None, "team", done)))["results"][0].get("deleted")
    assert fsm.get("namespaces", None, "team") is None


def test_a_create_in_a_namespace_being_deleted_logged_before_the_lifecycle_is_answered_as_then(fsm):
    current = fsm.get("namespaces", None, "team")
    held = dict(current, metadata=dict(current["metadata"], finalizers=["example.com/x"]))
    assert fsm.apply(write(C.update("namespaces", None, "team", held)))["ok"]
    terminate(fsm)
    old = dict(C.write([C.create("configmaps", {"metadata": {"name": "late", "namespace": "team"}})]), version=2)
    refused = fsm.apply(old)
    assert (refused["code"], refused["reason"]) == (409, "Conflict") and "details" not in refused
