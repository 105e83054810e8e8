"""sheepctl drain NODE against the real API app over the in-memory store (real_api.py):
cordon, refuse un-owned pods, evict owned ones."""
import pytest

from real_api import ApiStore

OWNER = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-1", "controller": True}]


pytestmark = pytest.mark.usefixtures("ctl_isolated")      # conftest.py


@pytest.fixture
def store():
    s = ApiStore()
    for name in ("n1", "n2"):
        s.put("nodes", {"metadata": {"name": name}, "spec": {"unschedulable": False}, "status": {}})
    return s


def put_pod(store, name, node, owned=True, namespace="default", phase="Running"):
    meta = {"name": name, "namespace": namespace}
    if owned:
        meta["ownerReferences"] = OWNER
    store.put("pods", {"metadata": meta, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
                       "status": {"phase": phase}})


def pods_left(store):
    return sorted("%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"]) for p in store.list("pods")
                  if not p["metadata"].get("deletionTimestamp"))   # the real API deletes a bound pod gracefully


def test_drain_cordons_and_evicts_owned_pods(ctl, store):
    put_pod(store, "web-1", "n1")
    put_pod(store, "web-2", "n1", namespace="other")
    put_pod(store, "web-3", "n2")
    rc, out, err = ctl("drain", "n1")
    assert rc == 0, err
    assert out.splitlines() == ["node/n1 cordoned", "evicting pod default/web-1", "pod/web-1 evicted",
                                "evicting pod other/web-2", "pod/web-2 evicted", "node/n1 drained"]
    assert store.get_obj("nodes", "n1")["spec"]["unschedulable"] is True
    assert store.get_obj("nodes", "n2")["spec"]["unschedulable"] is False
    assert pods_left(store) == ["default/web-3"], "pods on other nodes stay"


def test_drain_refuses_pods_without_owner_but_keeps_the_node_cordoned(ctl, store):
    put_pod(store, "web-1", "n1")
    put_pod(store, "bare", "n1", owned=False)
    put_pod(store, "finished", "n1", owned=False, phase="Succeeded")
    rc, out, err = ctl("drain", "n1")
    assert rc == 1
    assert "cannot delete pods that have no owner (use --force to override): default/bare" in err
    assert "finished" not in err, "finished pods are not worth refusing for"
    assert out.splitlines() == ["node/n1 cordoned"]
    assert pods_left(store) == ["default/bare", "default/finished", "default/web-1"]
    assert store.get_obj("nodes", "n1")["spec"]["unschedulable"] is True


def test_drain_force_deletes_pods_without_owner_too(ctl, store):
    put_pod(store, "web-1", "n1")
    put_pod(store, "bare", "n1", owned=False)
    rc, out, err = ctl("drain", "n1", "--force")
    assert rc == 0, err
    assert "deleting pods that have no owner (they will not be re-created): default/bare" in err
    assert "node/n1 drained" in out
    assert pods_left(store) == []


def test_drain_of_an_already_cordoned_empty_node(ctl, store):
    store.put("nodes", {"metadata": {"name": "n2"}, "spec": {"unschedulable": True}, "status": {}})
    rc, out, err = ctl("drain", "n2")
    assert rc == 0, err
    assert out.splitlines() == ["node/n2 already cordoned", "node/n2 drained"]


def test_drain_of_a_missing_node_fails_without_side_effects(ctl, store):
    put_pod(store, "web-1", "nope")
    rc, out, err = ctl("drain", "nope")
    assert rc == 1 and "NotFound" in err
    assert pods_left(store) == ["default/web-1"]
