"""The owner index: the mirror's indexed answer equals a scan of its objects, through
any sequence of creates, owner changes, unreadable owners, deletes and snapshots."""
from hypothesis import given, settings, strategies as st

from shepherd_ha.store.fsm import ADDED, DELETED, MODIFIED, Change
from shepherd_ha.store.mirror import Mirror
from shepherd_ha.store.owner_index import UnreadableOwner, controller_uid, scan_owned

UIDS = ["u1", "u2", "u3"]
OWNERS = st.one_of(
    st.just(None),                                                    # no ownerReferences
    st.sampled_from(UIDS).map(lambda u: [{"kind": "ReplicaSet", "uid": u, "controller": True}]),
    st.sampled_from(UIDS).map(lambda u: [{"kind": "ReplicaSet", "uid": u}]),     # not the controller
    st.sampled_from(UIDS).map(lambda u: [{"kind": "X", "uid": "other"}, {"kind": "Deployment", "uid": u,
                                                                          "controller": True}]),
    st.sampled_from([1, "x", [{"uid": ["u1"], "controller": True}]]),  # unreadable, as planted past validation
)
STEPS = st.lists(st.tuples(st.sampled_from(["put", "delete", "snapshot", "ask"]),
                           st.sampled_from(["default", "other"]), st.sampled_from(["a", "b", "c", "d"]), OWNERS),
                 max_size=40)


def pod(namespace, name, refs):
    meta = {"name": name, "namespace": namespace}
    if refs is not None:
        meta["ownerReferences"] = refs
    return {"metadata": meta}


def names(objects, ordered=False):
    listed = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects]
    return listed if ordered else sorted(listed)


def check(mirror, ordered=False):
    for uid in UIDS + ["other", None]:
        for namespace in ("default", "other", None):
            indexed = mirror.owned("pods", namespace, uid)
            scanned = scan_owned(mirror.objects.get("pods", {}), namespace, uid)
            assert [names(part, ordered) for part in indexed] == [names(part, ordered) for part in scanned], \
                (uid, namespace)


@settings(max_examples=300, deadline=None)
@given(STEPS)
def test_the_index_answers_as_a_scan_does(steps):
    mirror = Mirror()
    revision = 0
    for action, namespace, name, refs in steps:
        current = mirror.get("pods", namespace, name)
        if action == "ask":
            check(mirror)                       # builds the index on the first ask, then keeps it
        elif action == "snapshot":
            revision += 1
            mirror.replace({"pods": dict(mirror.objects.get("pods", {}))}, revision)
        elif action == "delete" and current is not None:
            revision += 1
            mirror.apply_changes([Change(revision, DELETED, "pods", None, current)])
        elif action == "put":
            revision += 1
            kind = MODIFIED if current is not None else ADDED
            mirror.apply_changes([Change(revision, kind, "pods", pod(namespace, name, refs), current)])
    check(mirror)


def test_updates_that_keep_the_owner_keep_the_scan_order():
    """A scan lists in creation order; so does the index while owners stay put (status
    updates), and deletion_order's ties then fall the same way on every leader."""
    mirror = Mirror()
    refs = [{"kind": "ReplicaSet", "uid": "u1", "controller": True}]
    revision = 0
    for name in ("c", "a", "d", "b"):
        revision += 1
        mirror.apply_changes([Change(revision, ADDED, "pods", pod("default", name, refs), None)])
    check(mirror, ordered=True)
    for name in ("a", "c", "b"):
        revision += 1
        current = mirror.get("pods", "default", name)
        updated = dict(current, status={"phase": "Running"})
        mirror.apply_changes([Change(revision, MODIFIED, "pods", updated, current)])
    check(mirror, ordered=True)
    assert names(mirror.owned("pods", "default", "u1")[0], ordered=True) == [
        ("default", n) for n in ("c", "a", "d", "b")]


def test_controller_uid_reads_as_the_deployment_controller_does():
    assert controller_uid(pod("d", "p", None)) is None
    assert controller_uid(pod("d", "p", [{"uid": "a"}, {"uid": "b", "controller": True}])) == "b"
    assert controller_uid(pod("d", "p", ["junk", {"uid": "b", "controller": True}])) == "b"
    for bad in (1, "x", [{"uid": ["b"], "controller": True}]):
        try:
            controller_uid(pod("d", "p", bad))
        except UnreadableOwner:
            continue
        raise AssertionError("%r was read" % (bad,))


def test_an_object_whose_owner_cannot_be_read_is_reported_by_its_namespace_only():
    mirror = Mirror()
    mirror.apply_changes([Change(1, ADDED, "pods", pod("default", "junk", 1), None),
                          Change(2, ADDED, "pods", pod("default", "mine", [{"uid": "u1", "controller": True}]), None)])
    owned, unreadable = mirror.owned("pods", "default", "u1")
    assert names(owned) == [("default", "mine")] and names(unreadable) == [("default", "junk")]
    assert mirror.owned("pods", "other", "u1") == ([], [])
