"""The FSM's idempotency table keeps no object, only what answers a retry; entries in
the form dumps written before hold are still answered."""
import collections
import pickle

import pytest

from shepherd_ha.store.fsm import StoreFSM
from tests.unit.test_fsm import create, delete, ns, pod, update


@pytest.fixture
def fsm():
    f = StoreFSM()
    f.apply(create("namespaces", ns("default")))
    return f


def _dicts_in(value):
    if isinstance(value, dict):
        return 1 + sum(_dicts_in(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return sum(_dicts_in(v) for v in value)
    return 0


def test_a_success_is_remembered_without_any_object(fsm):
    fsm.apply(dict(create("pods", pod("a"), key="k1"), digest="d1"))
    entry = fsm.remembered("k1")
    assert _dicts_in(entry) == 0, entry
    assert len(pickle.dumps(entry)) < 300


def test_a_retry_gets_the_object_as_it_is_now_then_a_stub_once_it_is_gone(fsm):
    first = fsm.apply(create("pods", pod("a"), key="k1"))
    written = first["results"][0]["object"]
    changed = dict(written, spec={"containers": [{"name": "c", "image": "busybox:2"}]})
    assert fsm.apply(update("pods", changed))["ok"]
    again = fsm.apply(create("pods", pod("a"), key="k1"))
    assert again["ok"] and again["duplicate"] and again["revision"] == first["revision"]
    assert again["results"][0]["object"] == fsm.get("pods", "default", "a")
    assert again["results"][0]["code"] == 201
    assert fsm.apply(delete("pods", "a", namespace="default"))["ok"]
    fsm.apply(create("pods", pod("a", uid="another-uid")))      # re-created: not the object the write made
    stub = fsm.recall("k1")["results"][0]["object"]
    assert stub == {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "a", "namespace": "default", "uid": "uid-a",
                                 "resourceVersion": written["metadata"]["resourceVersion"]}}


def test_a_failure_is_answered_as_it_was_with_its_digest(fsm):
    fsm.apply(create("pods", pod("a")))
    failed = fsm.apply(dict(update("pods", pod("a"), rv="999", key="k2"), digest="d2"))
    assert failed["code"] == 409
    recalled = fsm.recall("k2")
    assert recalled["code"] == 409 and recalled["message"] == failed["message"] and recalled["digest"] == "d2"
    assert fsm.apply(dict(update("pods", pod("a"), rv="999", key="k2"), digest="d3"))["code"] == 422


def test_entries_in_the_older_form_are_still_answered(fsm):
    # What a dump written before this form held: a dict with per-op 6-tuples and a stub.
    first = fsm.apply(create("pods", pod("a")))
    obj = first["results"][0]["object"]
    stub = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gone", "namespace": "default",
                                                            "uid": "uid-gone", "resourceVersion": "1"}}
    fsm.dedup = collections.OrderedDict([
        ("old-ok", {"ok": True, "revision": first["revision"], "digest": "d-old",
                    "results": [(201, "pods", "default", "a", "uid-a", {"metadata": {"name": "a"}}),
                                (201, "pods", "default", "gone", "uid-gone", stub)]}),
        ("old-failed", {"ok": False, "code": 409, "reason": "Conflict", "message": "m", "index": 0})])
    recalled = fsm.recall("old-ok")
    assert recalled["duplicate"] and recalled["digest"] == "d-old" and recalled["revision"] == first["revision"]
    assert recalled["results"][0]["object"] == obj and recalled["results"][1]["object"] == stub
    assert fsm.apply(dict(create("pods", pod("a"), key="old-ok"), digest="d-other"))["code"] == 422
    assert fsm.apply(create("pods", pod("x"), key="old-failed"))["code"] == 409
    assert fsm.get("pods", "default", "x") is None
