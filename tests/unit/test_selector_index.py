"""The mirror's selector index (store/selector_index.py): a selected list read through it
holds every object a scan would match, once, whatever changes and snapshots came before."""
import random

import pytest

from shepherd_ha.model.selectors import parse_field_selector, parse_label_selector
from shepherd_ha.store.fsm import ADDED, DELETED, MODIFIED, Change
from shepherd_ha.store.mirror import Mirror

NAMES = ["p%d" % i for i in range(12)]
NAMESPACES = ["default", "other"]
APPS = ["web", "db", "cache"]
NODES = ["node-1", "node-2", None]
LABEL_SELECTORS = ["app=web", "app in (web,db)", "app=web,tier=fe", "tier=fe,app!=db", "app=nothing",
                   "app notin (web)", "tier", "!tier", "app=web,!tier", ""]
FIELD_SELECTORS = ["spec.nodeName=node-1", "spec.nodeName=", "spec.nodeName!=node-2",
                   "spec.nodeName=node-2,status.phase=Running", "status.phase=Running", ""]


def random_pod(rng, ns, name, generation):
    labels = rng.choice([
        {"app": rng.choice(APPS)},
        {"app": rng.choice(APPS), "tier": rng.choice(["fe", "be"])},
        {},
        None,
        {"app": {"not": "a string"}},            # stored past validation: matches no value
        "not a dict",
    ])
    meta = {"name": name, "namespace": ns, "resourceVersion": str(generation)}
    if labels is not None:
        meta["labels"] = labels
    pod = {"metadata": meta, "spec": {"containers": [{"name": "c"}]}, "status": {"phase": rng.choice(["Pending", "Running"])}}
    node = rng.choice(NODES)
    if node is not None:
        pod["spec"]["nodeName"] = node
    if rng.random() < 0.05:
        pod["spec"] = "not an object"
    return pod


def scanned(mirror, namespace, labels, fields):
    return sorted(((o["metadata"]["namespace"], o["metadata"]["name"]) for o in mirror.list("pods", namespace)
                   if labels.matches(o["metadata"].get("labels")) and fields.matches(o)))


def selected(mirror, namespace, labels, fields):
    items = mirror.list("pods", namespace, (labels, fields))
    keys = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in items]
    assert len(set(keys)) == len(keys), "an object listed twice"
    return sorted(k for k, o in zip(keys, items)
                  if labels.matches(o["metadata"].get("labels")) and fields.matches(o))


@pytest.mark.parametrize("seed", range(8))
def test_selected_lists_match_a_scan_through_random_changes(seed):
    rng = random.Random(seed)
    mirror = Mirror()
    present = {}
    revision = 0
    for step in range(600):
        ns, name = rng.choice(NAMESPACES), rng.choice(NAMES)
        revision += 1
        old = present.get((ns, name))
        if old is not None and rng.random() < 0.25:
            mirror.apply_changes([Change(revision, DELETED, "pods", None, old)])
            del present[(ns, name)]
        else:
            new = random_pod(rng, ns, name, revision)
            mirror.apply_changes([Change(revision, MODIFIED if old else ADDED, "pods", new, old)])
            present[(ns, name)] = new
        if step % 7 == 0:     # the index is built on the first narrowed list, then kept
            labels = parse_label_selector(rng.choice(LABEL_SELECTORS))
            fields = parse_field_selector(rng.choice(FIELD_SELECTORS), "pods")
            namespace = rng.choice(NAMESPACES + [None])
            assert selected(mirror, namespace, labels, fields) == scanned(mirror, namespace, labels, fields), step


def test_a_snapshot_replaces_the_index_with_the_mirror():
    mirror = Mirror()
    web = parse_label_selector("app=web"), parse_field_selector(None, "pods")
    mirror.apply_changes([Change(1, ADDED, "pods", {"metadata": {"name": "a", "namespace": "default",
                                                                  "labels": {"app": "web"}}}, None)])
    assert [o["metadata"]["name"] for o in mirror.list("pods", None, web)] == ["a"]
    for frame in ({"kind": "snapshot-begin", "revision": 9},
                  {"kind": "snapshot-chunk", "resource": "pods",
                   "objects": [{"metadata": {"name": "b", "namespace": "default", "labels": {"app": "web"}}},
                               {"metadata": {"name": "c", "namespace": "default", "labels": {"app": "db"}}}]},
                  {"kind": "snapshot-end", "revision": 9}):
        mirror.apply_frame(frame)
    assert [o["metadata"]["name"] for o in mirror.list("pods", None, web)] == ["b"]
    mirror.apply_changes([Change(10, MODIFIED, "pods", {"metadata": {"name": "c", "namespace": "default",
                                                                     "labels": {"app": "web"}}}, None)])
    assert sorted(o["metadata"]["name"] for o in mirror.list("pods", None, web)) == ["b", "c"]


def test_a_status_write_keeps_its_place_and_a_relabel_moves_it():
    mirror = Mirror()
    sel = lambda text: (parse_label_selector(text), parse_field_selector(None, "pods"))  # noqa: E731
    pod = {"metadata": {"name": "a", "namespace": "default", "labels": {"app": "web"}}, "status": {"phase": "Pending"}}
    mirror.apply_changes([Change(1, ADDED, "pods", pod, None)])
    assert len(mirror.list("pods", None, sel("app=web"))) == 1
    running = dict(pod, status={"phase": "Running"})
    mirror.apply_changes([Change(2, MODIFIED, "pods", running, None)])
    [got] = mirror.list("pods", None, sel("app=web"))
    assert got["status"]["phase"] == "Running"          # the newest version, not the indexed one
    relabelled = dict(running, metadata=dict(running["metadata"], labels={"app": "api"}))
    mirror.apply_changes([Change(3, MODIFIED, "pods", relabelled, None)])
    assert mirror.list("pods", None, sel("app=web")) == []
    assert [o["metadata"]["labels"] for o in mirror.list("pods", None, sel("app=api"))] == [{"app": "api"}]
