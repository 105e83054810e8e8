"""The replicated state machine: pure, deterministic, outcomes as values, never raises."""
import collections
import copy
import pickle
import sys
import tracemalloc

import pytest

from shepherd_ha.store.encoded_objects import decode, encode
from shepherd_ha.store.fsm import DEFAULT_DEDUP_LIMIT, SERVER_KEY_LIMIT, StoreFSM


def ns(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "uid": "ns-" + name}}


def pod(name, namespace="default", uid=None, labels=None, image="busybox:1"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid or "uid-" + name,
                         "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": image}]}, "status": {"phase": "Pending"}}


def create(resource, obj, key=None, epoch=None):
    return {"type": "write", "key": key, "epoch": epoch,
            "ops": [{"op": "create", "resource": resource, "object": copy.deepcopy(obj)}]}


def update(resource, obj, rv=None, uid=None, sub=None, key=None):
    meta = obj["metadata"]
    return {"type": "write", "key": key, "ops": [{
        "op": "update", "resource": resource, "namespace": meta.get("namespace"), "name": meta["name"],
        "object": copy.deepcopy(obj), "subresource": sub,
        "precondition": {"resourceVersion": rv, "uid": uid}}]}


def delete(resource, name, namespace=None, rv=None, uid=None, key=None):
    return {"type": "write", "key": key, "ops": [{
        "op": "delete", "resource": resource, "namespace": namespace, "name": name,
        "precondition": {"resourceVersion": rv, "uid": uid}}]}


@pytest.fixture
def fsm():
    f = StoreFSM()
    assert f.apply(create("namespaces", ns("default")))["ok"]
    return f


def test_create_stamps_revision_and_generation(fsm):
    result = fsm.apply(create("pods", pod("a")))
    assert result["ok"] and result["revision"] == 2
    stored = fsm.get("pods", "default", "a")
    assert stored["metadata"]["resourceVersion"] == "2"
    assert stored["metadata"]["generation"] == 1


def test_create_existing_is_already_exists_and_changes_nothing(fsm):
    fsm.apply(create("pods", pod("a")))
    before = fsm.revision
    result = fsm.apply(create("pods", pod("a", uid="other")))
    assert not result["ok"] and result["code"] == 409 and result["reason"] == "AlreadyExists"
    assert fsm.revision == before
    assert fsm.get("pods", "default", "a")["metadata"]["uid"] == "uid-a"


def test_create_in_missing_namespace_is_not_found(fsm):
    result = fsm.apply(create("pods", pod("a", namespace="nope")))
    assert result["code"] == 404 and "namespace" in result["message"]


def test_update_bumps_generation_only_on_spec_change(fsm):
    fsm.apply(create("pods", pod("a")))
    relabelled = pod("a", labels={"x": "y"})
    r1 = fsm.apply(update("pods", relabelled))["results"][0]["object"]
    assert r1["metadata"]["generation"] == 1 and r1["metadata"]["labels"] == {"x": "y"}
    changed = pod("a", labels={"x": "y"}, image="busybox:2")
    r2 = fsm.apply(update("pods", changed))["results"][0]["object"]
    assert r2["metadata"]["generation"] == 2
    assert int(r2["metadata"]["resourceVersion"]) > int(r1["metadata"]["resourceVersion"])


def test_update_keeps_server_fields_and_status(fsm):
    fsm.apply(create("pods", pod("a")))
    sneaky = pod("a", uid="forged")
    sneaky["metadata"]["creationTimestamp"] = "1999-01-01T00:00:00Z"
    sneaky["status"] = {"phase": "Running"}
    sneaky["spec"]["containers"][0]["image"] = "busybox:9"
    obj = fsm.apply(update("pods", sneaky))["results"][0]["object"]
    assert obj["metadata"]["uid"] == "uid-a"
    assert "creationTimestamp" not in obj["metadata"]
    assert obj["status"] == {"phase": "Pending"}, "main resource writes keep the stored status"


def test_status_subresource_changes_only_status(fsm):
    fsm.apply(create("pods", pod("a")))
    new = pod("a", image="evil:1")
    new["status"] = {"phase": "Running"}
    obj = fsm.apply(update("pods", new, sub="status"))["results"][0]["object"]
    assert obj["status"] == {"phase": "Running"}
    assert obj["spec"]["containers"][0]["image"] == "busybox:1"
    assert obj["metadata"]["generation"] == 1


def test_noop_update_does_not_bump_revision(fsm):
    fsm.apply(create("pods", pod("a")))
    before = fsm.revision
    result = fsm.apply(update("pods", pod("a")))
    assert result["ok"] and fsm.revision == before
    assert result["results"][0].get("unchanged")


def test_stale_resource_version_is_conflict(fsm):
    fsm.apply(create("pods", pod("a")))
    fsm.apply(update("pods", pod("a", labels={"v": "1"})))
    result = fsm.apply(update("pods", pod("a", labels={"v": "2"}), rv="2"))
    assert result["code"] == 409 and result["reason"] == "Conflict"
    assert "resourceVersion 3" in result["message"]
    assert fsm.get("pods", "default", "a")["metadata"]["labels"] == {"v": "1"}


def test_uid_precondition(fsm):
    fsm.apply(create("pods", pod("a")))
    assert fsm.apply(delete("pods", "a", "default", uid="someone-else"))["code"] == 409
    assert fsm.apply(delete("pods", "a", "default", uid="uid-a"))["ok"]


def test_delete_missing_is_not_found_and_delete_event_carries_revision(fsm):
    assert fsm.apply(delete("pods", "a", "default"))["code"] == 404
    fsm.apply(create("pods", pod("a")))
    result, changes = fsm.apply_with_changes(delete("pods", "a", "default"))
    assert fsm.get("pods", "default", "a") is None
    assert changes[0].type == "DELETED"
    assert decode(changes[0].previous)["metadata"]["resourceVersion"] == str(fsm.revision)


def test_batch_is_atomic(fsm):
    ops = [{"op": "create", "resource": "pods", "object": pod("a")},
           {"op": "create", "resource": "pods", "object": pod("b")},
           {"op": "create", "resource": "pods", "object": pod("a", uid="dup")}]
    before = fsm.revision
    result = fsm.apply({"type": "write", "key": None, "ops": ops})
    assert not result["ok"] and result["index"] == 2
    assert fsm.revision == before
    assert fsm.get("pods", "default", "a") is None and fsm.get("pods", "default", "b") is None


def test_batch_sees_its_own_earlier_ops(fsm):
    ops = [{"op": "create", "resource": "namespaces", "object": ns("team")},
           {"op": "create", "resource": "pods", "object": pod("a", namespace="team")},
           {"op": "delete", "resource": "pods", "namespace": "team", "name": "a"}]
    result, changes = fsm.apply_with_changes({"type": "write", "key": None, "ops": ops})
    assert result["ok"]
    assert [c.type for c in changes] == ["ADDED", "ADDED", "DELETED"]
    assert [c.revision for c in changes] == [2, 3, 4]


def test_group_results_are_independent(fsm):
    group = {"type": "group", "commands": [create("pods", pod("a")), create("pods", pod("a", uid="x")),
                                           create("pods", pod("b"))]}
    result = fsm.apply(group)
    assert [r["ok"] for r in result["results"]] == [True, False, True]
    assert fsm.get("pods", "default", "b") is not None


def test_idempotency_key_applies_once(fsm):
    first = fsm.apply(create("pods", pod("a"), key="k1"))
    revision = fsm.revision
    again = fsm.apply(create("pods", pod("a"), key="k1"))
    assert again["ok"] and again.get("duplicate")
    assert again["results"][0]["object"]["metadata"]["uid"] == first["results"][0]["object"]["metadata"]["uid"]
    assert fsm.revision == revision


def test_idempotency_remembers_failures_too(fsm):
    fsm.apply(create("pods", pod("a")))
    failed = fsm.apply(update("pods", pod("a"), rv="999", key="k2"))
    assert failed["code"] == 409
    assert fsm.apply(update("pods", pod("a"), rv="999", key="k2"))["code"] == 409


def test_dedup_table_is_bounded():
    f = StoreFSM(dedup_limit=3)
    f.apply(create("namespaces", ns("default")))
    for i in range(10):
        f.apply(create("pods", pod("p%d" % i), key="idem:k%d" % i))
    assert list(f.dedup) == ["idem:k7", "idem:k8", "idem:k9"]


def test_keys_the_server_made_have_a_smaller_table_of_their_own():
    """Clients' keys (scoped by the API: "idem:...") and the server's own (a write sent
    without a key, a controller's) are bounded apart: a burst of the server's writes does
    not push clients' keys out."""
    f = StoreFSM(dedup_limit=3, server_key_limit=2)
    f.apply(create("namespaces", ns("default")))
    f.apply(create("pods", pod("c0"), key="idem:c0"))
    for i in range(6):
        f.apply(create("pods", pod("s%d" % i), key="s%d" % i))
    assert list(f.dedup) == ["idem:c0"] and list(f.server_dedup) == ["s4", "s5"]
    assert f.apply(create("pods", pod("c0"), key="idem:c0"))["duplicate"]
    assert f.apply(create("pods", pod("s5"), key="s5"))["duplicate"]
    assert f.apply(create("pods", pod("s0"), key="s0"))["code"] == 409     # forgotten: applied again


def test_a_state_dumped_with_one_table_is_still_answered_and_gets_the_second():
    f = StoreFSM()
    f.apply(create("namespaces", ns("default")))
    f.apply(create("pods", pod("a"), key="server-made"))
    f.apply(create("pods", pod("c"), key="idem:client"))
    f.apply(create("pods", pod("d"), key="server-made-2"))
    f.dedup = collections.OrderedDict((k, f.remembered(k)) for k in ("server-made", "idem:client", "server-made-2"))
    del f.server_dedup, f.server_key_limit                 # as a dump written before the split:
    f.dedup_limit = 50000                                  # one table, and the bound then
    old = pickle.loads(pickle.dumps(f))
    assert (old.dedup_limit, old.server_key_limit) == (DEFAULT_DEDUP_LIMIT, SERVER_KEY_LIMIT), "the code's bounds"
    # Filed as this version files them, in order: the same tables as a replica whose dump
    # was taken before those writes and which applied them itself.
    assert list(old.dedup) == ["idem:client"] and list(old.server_dedup) == ["server-made", "server-made-2"]
    assert old.apply(create("pods", pod("a"), key="server-made"))["duplicate"]
    assert old.apply(create("pods", pod("b"), key="another"))["ok"]
    assert list(old.server_dedup) == ["server-made", "server-made-2", "another"]


def test_deleting_namespace_deletes_its_objects(fsm):
    fsm.apply(create("namespaces", ns("team")))
    fsm.apply(create("pods", pod("a", namespace="team")))
    fsm.apply(create("pods", pod("a", namespace="default")))
    result, changes = fsm.apply_with_changes(delete("namespaces", "team"))
    assert result["ok"]
    assert fsm.get("pods", "team", "a") is None
    assert fsm.get("pods", "default", "a") is not None
    assert {(c.resource, c.type) for c in changes} == {("pods", "DELETED"), ("namespaces", "DELETED")}


def test_claim_and_fencing(fsm):
    assert fsm.apply({"type": "claim", "term": 3, "replica": "r1"})["ok"]
    assert fsm.apply(create("pods", pod("a"), epoch=[3, "r1"]))["ok"]
    assert fsm.apply({"type": "claim", "term": 5, "replica": "r2"})["ok"]
    stale = fsm.apply(create("pods", pod("b"), epoch=[3, "r1"]))
    assert stale["reason"] == "Fenced" and fsm.fenced_rejections == 1
    assert fsm.get("pods", "default", "b") is None
    assert not fsm.apply({"type": "claim", "term": 4, "replica": "r1"})["ok"], "older claims lose"
    assert fsm.epoch == [5, "r2"]


@pytest.mark.parametrize("command", [
    None, 42, "write", [], {"type": None}, {"type": "nonsense"}, {"type": "write"},
    {"type": "write", "ops": "garbage"}, {"type": "write", "ops": []},
    {"type": "write", "ops": [{"op": "explode"}]},
    {"type": "write", "ops": [{"op": "create", "resource": "nope", "object": {}}]},
    {"type": "write", "ops": [{"op": "create", "resource": "pods", "object": {"metadata": "x"}}]},
    {"type": "write", "ops": [{"op": "create", "resource": "pods", "object": {"metadata": {}}}]},
    {"type": "group", "commands": "x"}, {"type": "claim", "term": "abc"},
    {"type": "__init__"}, {"type": "_dispatch"},
])
def test_apply_never_raises_and_keeps_state(fsm, command):
    fsm.apply(create("pods", pod("a")))
    digest = fsm.digest()
    result = fsm.apply(command)
    assert result["ok"] is False and result["code"] == 400
    assert fsm.digest() == digest
    assert fsm.malformed_commands == 1
    assert fsm.apply(create("pods", pod("b")))["ok"], "the store keeps committing"


def test_same_commands_same_state_and_digest():
    commands = [create("namespaces", ns("default")), create("pods", pod("a")),
                update("pods", pod("a", labels={"k": "v"})), create("pods", pod("b"), key="x"),
                create("pods", pod("b"), key="x"), delete("pods", "a", "default"), {"type": "barrier"}]
    a, b = StoreFSM(), StoreFSM()
    for c in commands:
        a.apply(copy.deepcopy(c))
        b.apply(copy.deepcopy(c))
    assert a.digest() == b.digest() and a.revision == b.revision == 5


def test_state_survives_pickle_roundtrip(fsm):
    """PySyncObj snapshots the FSM with pickle: nothing in it may be unpicklable."""
    fsm.apply(create("pods", pod("a"), key="k"))
    restored = pickle.loads(pickle.dumps(fsm))
    assert restored.digest() == fsm.digest()
    assert restored.apply(create("pods", pod("a"), key="k")).get("duplicate")


def test_objects_are_kept_as_json_bytes_and_readers_get_their_own_copy(fsm):
    result = fsm.apply(create("pods", pod("a")))
    raw = fsm.objects["pods"].raw(("default", "a"))
    assert isinstance(raw, bytes) and decode(raw) == fsm.get("pods", "default", "a") == result["results"][0]["object"]
    mine = fsm.get("pods", "default", "a")
    mine["metadata"]["labels"] = {"changed": "behind the store's back"}
    result["results"][0]["object"]["spec"] = {}
    assert fsm.get("pods", "default", "a") == decode(raw)          # nobody changes the store but a command


def test_a_dump_with_objects_as_dicts_loads_into_bytes_with_the_same_digest(fsm):
    fsm.apply(create("pods", pod("a", labels={"app": "web"})))
    fsm.apply(update("pods", dict(pod("a"), status={"phase": "Running"}), sub="status"))
    digest = fsm.digest()
    state = fsm.__getstate__()
    # What a version that kept dicts dumped: the same objects, decoded.
    old_form = dict(state, objects={r: {k: decode(v) for k, v in b.items()} for r, b in state["objects"].items()})
    loaded = StoreFSM.__new__(StoreFSM)
    loaded.__setstate__(dict(old_form, _shared="an interner of that version"))
    assert loaded.digest() == digest and "_shared" not in loaded.__dict__
    assert isinstance(loaded.objects["pods"].raw(("default", "a")), bytes)
    assert loaded.apply(update("pods", dict(pod("a"), status={"phase": "Failed"}), sub="status"))["ok"]


def test_an_object_that_is_not_json_refuses_the_whole_write_and_changes_nothing(fsm):
    revision, digest = fsm.revision, fsm.digest()
    bad = pod("b")
    bad["spec"]["nodeSelector"] = {"size": {1, 2}}           # a set: only a command built in code has one
    command = create("pods", pod("a"))
    command["ops"] += create("pods", bad)["ops"]
    result = fsm.apply(command)
    assert result["code"] == 400 and "not JSON" in result["message"]
    assert (fsm.revision, fsm.digest()) == (revision, digest) and fsm.get("pods", "default", "a") is None


def test_an_integer_past_64_bits_is_stored_the_same_on_every_replica():
    a, b = StoreFSM(), StoreFSM()
    big = pod("a")
    big["spec"]["activeDeadlineSeconds"] = 2 ** 70 + 1        # not a float's
    for f in (a, b):
        f.apply(create("namespaces", ns("default")))
        assert f.apply(create("pods", copy.deepcopy(big)))["ok"]
    assert a.objects["pods"].raw(("default", "a")) == b.objects["pods"].raw(("default", "a"))
    assert a.get("pods", "default", "a")["spec"]["activeDeadlineSeconds"] == 2 ** 70 + 1     # read back exact
    # The same write again changes nothing (it compares equal to what is stored).
    revision = a.revision
    assert a.apply(update("pods", big))["results"][0].get("unchanged") and a.revision == revision


def test_orphan_delete_reads_a_dependent_staged_in_the_same_write_and_uids_that_need_escaping(fsm):
    uid = 'dep-"1"\\é'
    fsm.apply(create("deployments", {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "metadata": {"name": "web", "namespace": "default", "uid": uid}, "spec": {}}))
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": uid, "controller": True}
    owned, mentions, later = pod("a"), pod("b", labels={"note": uid}), pod("c")
    owned["metadata"]["ownerReferences"] = [ref]
    for p in (owned, mentions, later):
        fsm.apply(create("pods", p))
    later["metadata"]["ownerReferences"] = [ref]     # given its reference in the same write as the delete
    command = update("pods", later)
    command["ops"] += delete("deployments", "web", "default")["ops"]
    command["ops"][-1]["propagationPolicy"] = "Orphan"
    result, changes = fsm.apply_with_changes(command)
    assert result["ok"], result
    assert "ownerReferences" not in fsm.get("pods", "default", "a")["metadata"]
    assert "ownerReferences" not in fsm.get("pods", "default", "c")["metadata"]
    assert fsm.get("pods", "default", "b")["metadata"]["labels"] == {"note": uid}       # named, not owned


def test_list_by_namespace(fsm):
    fsm.apply(create("namespaces", ns("team")))
    fsm.apply(create("pods", pod("a")))
    fsm.apply(create("pods", pod("b", namespace="team")))
    assert [o["metadata"]["name"] for o in fsm.list("pods", "team")] == ["b"]
    assert len(fsm.list("pods")) == 2


def test_orphan_delete_strips_owner_references_atomically(fsm):
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default",
             "uid": "dep-1"}, "spec": {}}
    fsm.apply(create("deployments", owner))
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "dep-1", "controller": True}
    other = dict(ref, name="api", uid="dep-2")
    owned = pod("a")
    owned["metadata"]["ownerReferences"] = [ref]
    shared = pod("b")
    shared["metadata"]["ownerReferences"] = [ref, other]
    fsm.apply(create("pods", owned))
    fsm.apply(create("pods", shared))
    command = delete("deployments", "web", "default")
    command["ops"][0]["propagationPolicy"] = "Orphan"
    result, changes = fsm.apply_with_changes(command)
    assert result["ok"]
    assert "ownerReferences" not in fsm.get("pods", "default", "a")["metadata"]
    assert fsm.get("pods", "default", "b")["metadata"]["ownerReferences"] == [other]
    assert [(c.resource, c.type) for c in changes] == [("pods", "MODIFIED"), ("pods", "MODIFIED"),
                                                       ("deployments", "DELETED")]


def test_background_delete_leaves_dependents_for_the_garbage_collector(fsm):
    fsm.apply(create("deployments", {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "metadata": {"name": "web", "namespace": "default", "uid": "dep-1"}}))
    owned = pod("a")
    owned["metadata"]["ownerReferences"] = [{"kind": "Deployment", "name": "web", "uid": "dep-1"}]
    fsm.apply(create("pods", owned))
    fsm.apply(delete("deployments", "web", "default"))
    assert fsm.get("pods", "default", "a")["metadata"]["ownerReferences"][0]["uid"] == "dep-1"


def bound_pod(name, grace=None):
    p = pod(name)
    p["spec"]["nodeName"] = "n1"
    if grace is not None:
        p["spec"]["terminationGracePeriodSeconds"] = grace
    return p


def graceful_delete(name, seconds=None, uid=None):
    command = delete("pods", name, "default", uid=uid)
    command["ops"][0]["graceful"] = {"deletionTimestamp": "2026-01-01T00:00:00Z", "gracePeriodSeconds": seconds}
    return command


def test_graceful_delete_of_a_bound_pod_only_marks_it_terminating(fsm):
    # Commands without a version (format 1) stamp the request time; see test_fsm_grace_deadline.py
    fsm.apply(create("pods", bound_pod("a", grace=20)))
    result, changes = fsm.apply_with_changes(graceful_delete("a"))
    stored = fsm.get("pods", "default", "a")
    assert result["ok"] and result["results"][0].get("terminating")
    assert stored["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    assert stored["metadata"]["deletionGracePeriodSeconds"] == 20, "the pod's own grace period"
    assert [c.type for c in changes] == ["MODIFIED"]
    again = fsm.apply(graceful_delete("a", seconds=60))
    assert again["results"][0].get("unchanged"), "a longer grace period changes nothing"
    shorter = fsm.apply(graceful_delete("a", seconds=5))["results"][0]["object"]
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 5
    assert shorter["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    assert fsm.apply(delete("pods", "a", "default", uid="uid-a"))["ok"], "the agent's final delete"
    assert fsm.get("pods", "default", "a") is None


def test_graceful_delete_of_unbound_pod_or_zero_grace_deletes_at_once(fsm):
    fsm.apply(create("pods", pod("unbound")))
    fsm.apply(graceful_delete("unbound"))
    assert fsm.get("pods", "default", "unbound") is None
    fsm.apply(create("pods", bound_pod("zero", grace=0)))
    fsm.apply(graceful_delete("zero"))
    assert fsm.get("pods", "default", "zero") is None
    fsm.apply(create("pods", bound_pod("forced", grace=30)))
    fsm.apply(graceful_delete("forced", seconds=0))
    assert fsm.get("pods", "default", "forced") is None


def test_snapshot_from_before_a_kind_existed_accepts_that_kind(fsm):
    # A replica restored from a snapshot taken before configmaps existed has no bucket for it.
    del fsm.objects["configmaps"]
    restored = pickle.loads(pickle.dumps(fsm))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
          "data": {"k": "v"}}
    assert restored.apply(create("configmaps", cm))["ok"]
    assert restored.get("configmaps", "default", "c")["data"] == {"k": "v"}
    assert restored.apply(delete("namespaces", "default"))["ok"]


# ---- finalizers ----

def _with_finalizers(name, finalizers):
    body = pod(name)
    body["metadata"]["finalizers"] = finalizers
    return body


def test_delete_of_object_with_finalizers_only_marks_it(fsm):
    created = fsm.apply(create("pods", _with_finalizers("f", ["example.com/a", "example.com/b"])))["results"][0]["object"]
    op = delete("pods", "f", "default")
    op["ops"][0]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    result = fsm.apply(op)
    assert result["ok"]
    kept = fsm.get("pods", "default", "f")
    assert kept["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    assert int(kept["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    # A repeated delete changes nothing.
    assert fsm.apply(op)["results"][0].get("unchanged")
    # Finalizers cannot be added any more ...
    more = dict(kept, metadata=dict(kept["metadata"], finalizers=["example.com/a", "example.com/b", "example.com/c"]))
    refused = fsm.apply(update("pods", more))
    assert not refused["ok"] and refused["code"] == 422 and "example.com/c cannot be added" in refused["message"]
    # ... removing one keeps the object, removing the last deletes it.
    one = dict(kept, metadata=dict(kept["metadata"], finalizers=["example.com/b"]))
    assert fsm.apply(update("pods", one))["ok"] and fsm.get("pods", "default", "f") is not None
    now = fsm.get("pods", "default", "f")
    assert fsm.apply(update("pods", dict(now, metadata=dict(now["metadata"], finalizers=[]))))["ok"]
    assert fsm.get("pods", "default", "f") is None


def test_finalizers_do_not_block_updates_or_deletes_before_deletion(fsm):
    fsm.apply(create("pods", _with_finalizers("g", ["example.com/a"])))
    current = fsm.get("pods", "default", "g")
    assert fsm.apply(update("pods", dict(current, metadata=dict(current["metadata"], finalizers=[]))))["ok"]
    assert fsm.get("pods", "default", "g") is not None, "dropping finalizers of a live object deletes nothing"
    assert fsm.apply(delete("pods", "g", "default"))["ok"] and fsm.get("pods", "default", "g") is None


def test_foreground_delete_adds_its_finalizer_and_orphan_ignores_it(fsm):
    fsm.apply(create("pods", pod("h")))
    op = delete("pods", "h", "default")
    op["ops"][0]["propagationPolicy"] = "Foreground"
    assert fsm.apply(op)["ok"]
    assert fsm.get("pods", "default", "h")["metadata"]["finalizers"] == ["foregroundDeletion"]
    fsm.apply(create("pods", pod("i")))
    op = delete("pods", "i", "default")
    op["ops"][0]["propagationPolicy"] = "Orphan"
    assert fsm.apply(op)["ok"] and fsm.get("pods", "default", "i") is None


def test_no_finalizer_may_be_added_to_a_terminating_pod(fsm):
    body = pod("t")
    body["spec"]["nodeName"] = "n1"
    fsm.apply(create("pods", body))
    op = delete("pods", "t", "default")
    op["ops"][0]["graceful"] = {"deletionTimestamp": "2026-01-01T00:00:00Z", "gracePeriodSeconds": 30}
    assert fsm.apply(op)["ok"]
    terminating = fsm.get("pods", "default", "t")
    assert terminating["metadata"]["deletionTimestamp"]
    more = dict(terminating, metadata=dict(terminating["metadata"], finalizers=["example.com/late"]))
    refused = fsm.apply(update("pods", more))
    assert not refused["ok"] and refused["code"] == 422
    # an update that adds nothing still goes through, and does not delete the pod
    labels = dict(terminating, metadata=dict(terminating["metadata"], labels={"x": "y"}))
    assert fsm.apply(update("pods", labels))["ok"] and fsm.get("pods", "default", "t") is not None


def test_a_key_remembered_with_a_digest_refuses_another_request(fsm):
    first = create("pods", pod("a"), key="k1")
    first["digest"] = "d1"
    assert fsm.apply(first)["ok"]
    retry = dict(create("pods", pod("a"), key="k1"), digest="d1")
    assert fsm.apply(retry).get("duplicate")                  # the same request: the first answer
    revision = fsm.revision
    other = dict(create("pods", pod("b"), key="k1"), digest="d2")
    refused = fsm.apply(other)
    assert refused["code"] == 422 and "Idempotency-Key" in refused["message"]
    assert fsm.get("pods", "default", "b") is None and fsm.revision == revision
    assert fsm.recall("k1")["digest"] == "d1"                  # for the API's recall of an earlier try


def test_stored_bytes_take_their_length_not_the_encoders_buffer():
    """orjson's bytes keep the buffer they were grown in (3-10x the JSON); the store keeps
    exact copies, or a replica's store would take several times its objects' size."""
    objects = [pod("p%d" % i, labels={"app": "web-%d" % i, "tier": "x" * 200}) for i in range(200)]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        # Pods go compressed; a list is kept as plain JSON (the path that copies orjson's bytes).
        kept = [encode(obj) for obj in objects] + [encode([obj]) for obj in objects]
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    # What the store's code allocated and still holds, not the process's whole count: other
    # threads of the test process (left by earlier tests) allocate meanwhile too.
    store_code = [tracemalloc.Filter(True, "*shepherd_ha/store/*")]
    allocated = sum(stat.size_diff for stat in after.filter_traces(store_code).compare_to(
        before.filter_traces(store_code), "filename"))
    assert allocated < 1.3 * sum(sys.getsizeof(b) for b in kept) + 4096, allocated
