"""Deployment controller helpers: template hash, names, bounds, deletion order, plans."""
import random
import re

import pytest

from shepherd_ha.controllers.deployment_plan import Scale, plan_recreate, plan_rolling, plan_scale
from shepherd_ha.controllers.deployment_util import (HASH_LABEL, availability, deletion_order,
                                                     pod_name, pod_prototype, resolve_bound, revision_name,
                                                     rolling_bounds, template_hash)
from shepherd_ha.model.times import format_time
from shepherd_ha.model.validation import validate_object

TEMPLATE = {"metadata": {"labels": {"app": "web", "tier": "fe"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}}
SAFE = "[bcdfghjklmnpqrstvwxz2456789]"


def test_template_hash_is_stable_short_and_safe():
    h = template_hash(TEMPLATE)
    assert re.fullmatch(SAFE + "{10}", h)
    reordered = {"spec": {"containers": [{"ports": [{"containerPort": 80}], "image": "nginx:1.25", "name": "c"}]},
                 "metadata": {"labels": {"tier": "fe", "app": "web"}}}
    assert template_hash(reordered) == h, "key order is not a change"


@pytest.mark.parametrize("change", [
    lambda t: t["spec"]["containers"][0].update(image="nginx:1.26"),
    lambda t: t["metadata"]["labels"].update(extra="x"),
    lambda t: t["metadata"].update(annotations={"restartedAt": "now"}),
    lambda t: t["spec"].update(nodeSelector={"disk": "ssd"}),
    lambda t: t["spec"]["containers"][0].update(env=[{"name": "A", "value": "1"}]),
])
def test_template_hash_changes_with_anything_that_should_roll(change):
    import copy
    changed = copy.deepcopy(TEMPLATE)
    change(changed)
    assert template_hash(changed) != template_hash(TEMPLATE)


def test_names():
    assert re.fullmatch("web-" + SAFE + "{10}-" + SAFE + "{5}", pod_name("web", template_hash(TEMPLATE)))
    assert revision_name("web", "abc") == "web-abc"
    long = "a" * 250 + ".b"
    name = pod_name(long, "hhhhhhhhhh")
    assert len(name) <= 253 and not name.startswith("-")
    assert validate_object("pods", {"metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "image": "i"}]}}) == []
    dotted = pod_name("x" * 235 + "." + "y" * 20, "hhhhhhhhhh")    # the cut lands right after a dot
    assert ".-" not in dotted and len(dotted) <= 253


def test_pod_prototype_is_a_valid_owned_pod():
    d = {"metadata": {"name": "web", "namespace": "team", "uid": "u1"},
         "spec": {"template": dict(TEMPLATE, metadata={"labels": {"app": "web"}, "annotations": {"a": "b"}})}}
    pod = pod_prototype(d, "hash123456")
    assert pod["metadata"]["labels"] == {"app": "web", HASH_LABEL: "hash123456"}
    assert pod["metadata"]["annotations"] == {"a": "b"}
    assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                                   "uid": "u1", "controller": True, "blockOwnerDeletion": True}]
    assert pod["status"] == {"phase": "Pending"} and pod["spec"]["restartPolicy"] == "Always"
    assert validate_object("pods", dict(pod, metadata=dict(pod["metadata"], name="p"))) == []


@pytest.mark.parametrize("value,replicas,up,expected", [
    (1, 10, True, 1), ("25%", 10, True, 3), ("25%", 10, False, 2), ("25%", 1, True, 1), ("25%", 1, False, 0),
    ("100%", 3, False, 3), ("0%", 5, True, 0), ("33%", 3, True, 1), ("34%", 3, False, 1)])
def test_resolve_bound_rounds_like_kubernetes(value, replicas, up, expected):
    assert resolve_bound(value, replicas, up) == expected


def test_rolling_bounds():
    spec = {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}
    assert rolling_bounds(spec, 10) == (3, 2)
    assert rolling_bounds(spec, 1) == (1, 0)
    zero = {"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "10%"}}}
    assert rolling_bounds(zero, 5) == (0, 1), "both zero: one may be unavailable, or nothing moves"
    assert rolling_bounds({"strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 9}}}, 3) == (1, 3)
    assert rolling_bounds({}, 4) == (1, 1), "defaults 25%/25%"


def _pod(name, created="2026-01-01T00:00:00Z", node=None, ready=False, hash_="h1"):
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"metadata": {"name": name, "uid": name, "creationTimestamp": created, "labels": {HASH_LABEL: hash_}},
            "spec": {"nodeName": node} if node else {}, "status": status}


def test_deletion_order_unscheduled_then_not_ready_then_newest():
    pods = [_pod("old-ready", "2026-01-01T00:00:01Z", "n1", True),
            _pod("new-ready", "2026-01-01T00:00:09Z", "n1", True),
            _pod("not-ready", "2026-01-01T00:00:00Z", "n1", False),
            _pod("unscheduled", "2026-01-01T00:00:00Z", None, False),
            _pod("mid-ready", "2026-01-01T00:00:05Z", "n2", True)]
    order = [p["metadata"]["name"] for p in deletion_order(pods)]
    assert order == ["unscheduled", "not-ready", "new-ready", "mid-ready", "old-ready"]
    revs = {"h1": 2, "h0": 1}
    pods.append(_pod("older-revision", "2026-01-01T00:00:00Z", "n1", True, hash_="h0"))
    order = [p["metadata"]["name"] for p in deletion_order(pods, lambda p: revs[p["metadata"]["labels"][HASH_LABEL]])]
    assert order[0] == "older-revision"


def test_availability_counts_min_ready_seconds_from_the_ready_transition():
    pod = _pod("p", ready=True)
    pod["status"]["conditions"][0]["lastTransitionTime"] = format_time(1000)
    assert availability(pod, 0, 1001) == (True, None)
    assert availability(pod, 10, 1004) == (False, 6)
    assert availability(pod, 10, 1010) == (True, None)
    assert availability(_pod("q"), 10, 5000) == (False, None)
    assert availability(pod, 10, 500) == (False, 10), "an agent clock ahead of ours: at most minReadySeconds"


def _rand_state(rng):
    """A rollout in some state: the new ReplicaSet and 0-2 old ones, each with as many pods
    as it asks for, some of them available."""
    replicas = rng.randint(0, 12)
    surge, unavailable = rng.randint(0, 4), rng.randint(0, 4)
    if surge == unavailable == 0:
        unavailable = 1
    unavailable = min(unavailable, replicas)

    def scale(revision):
        n = rng.randint(0, replicas + 2)
        return Scale(n, n, sum(rng.random() < 0.6 for _ in range(n)), revision)
    return replicas, surge, unavailable, scale(9), [scale(r) for r in range(rng.randint(0, 2))]


def _available_after(s, target):
    """Pods a ReplicaSet keeps available once scaled to `target` (it deletes not-ready pods first)."""
    return min(s.available, target)


def test_plan_rolling_never_exceeds_its_bounds():
    rng = random.Random(7)
    for _ in range(3000):
        replicas, surge, unavailable, new, olds = _rand_state(rng)
        target, old_targets = plan_rolling(new, olds, replicas, surge, unavailable)
        total_before = new.replicas + sum(o.replicas for o in olds)
        available_before = new.available + sum(o.available for o in olds)
        if target > new.replicas:
            assert total_before + target - new.replicas <= replicas + surge, "growth above replicas + maxSurge"
        assert target <= max(replicas, 0) and target >= 0
        assert all(0 <= t <= o.replicas for t, o in zip(old_targets, olds)), "old ReplicaSets only shrink"
        available_after = _available_after(new, target) + sum(
            _available_after(o, t) for o, t in zip(olds, old_targets))
        assert available_after >= min(available_before, replicas - unavailable), "shrunk below the minimum"


def test_plan_rolling_converges_when_pods_become_ready():
    """Simulated rollout: the ReplicaSets follow their targets, new pods turn ready after
    each pass; it ends with only the new ReplicaSet."""
    for replicas, surge, unavailable in ((4, 1, 1), (3, 1, 0), (5, 0, 2), (10, 3, 2), (1, 1, 0), (2, 0, 1)):
        new, old = Scale(0), Scale(replicas, replicas, replicas, 1)
        for step in range(100):
            target, [old_target] = plan_rolling(new, [old], replicas, surge, unavailable)
            old = Scale(old_target, old_target, min(old.available, old_target), 1)
            new = Scale(target, target, min(new.available, target), 2)      # created pods are not ready yet
            assert new.pods + old.pods <= replicas + surge
            assert new.available + old.available >= replicas - unavailable
            if old.replicas == 0 and new.available == replicas:
                break
            new.available = new.pods
        else:
            raise AssertionError("rollout %s did not converge" % ((replicas, surge, unavailable),))


def test_plan_recreate_and_scale():
    assert plan_recreate(Scale(0), [Scale(2, 2, 2)], 3) == (0, [0]), "old ones first"
    assert plan_recreate(Scale(0), [Scale(0, 1, 0)], 3) == (0, [0]), "until their last pod is gone"
    assert plan_recreate(Scale(1, 1), [Scale(0)], 3) == (3, [0])
    assert plan_recreate(Scale(2, 2), [], 1) == (1, [])
    assert plan_scale(Scale(1), [], 3) == (3, [])
    assert plan_scale(None, [Scale(1)], 3) == (None, [1]), "paused before any revision: nothing created"
    assert plan_scale(Scale(2), [Scale(1), Scale(2)], 3) == (2, [0, 1]), "older revisions shrink first"
    assert plan_scale(Scale(3), [Scale(1)], 1) == (1, [0])
