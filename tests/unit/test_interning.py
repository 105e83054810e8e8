"""store/interning.py: an interned object equals the original (values, types, key order),
equal parts are one instance, and nothing the table alone holds outlives a sweep."""
import builtins
import copy
import gc
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd_ha.store import commands, interning
from shepherd_ha.store.fsm import StoreFSM
from shepherd_ha.store.interning import Interner
from shepherd_ha.store.mirror import Mirror

scalars = st.one_of(st.none(), st.booleans(), st.integers(-300, 300), st.floats(allow_nan=False),
                    st.sampled_from(["", "a", "True", "1", "2026-12-02T11:29:56Z", "x" * 40]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["a", "b", "c", "1"]), inner, max_size=4)),
    max_leaves=20)


def pod(name, labels, node):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": dict(labels), "resourceVersion": "7"},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                     "resources": {"requests": {"cpu": "10m"}}}], "nodeName": node},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def typed(value):
    """The value with every scalar's type made visible (1, True and 1.0 differ)."""
    if isinstance(value, dict):
        return [(k, typed(v)) for k, v in value.items()]
    if isinstance(value, list):
        return ["list"] + [typed(v) for v in value]
    return (type(value).__name__, repr(value))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["metadata", "spec", "status", "x"]), values, max_size=4),
                min_size=1, max_size=6))
def test_interned_objects_are_equal_to_the_originals_with_their_types_and_key_order(objects):
    interner = Interner()
    originals = copy.deepcopy(objects)
    interned = [interner.intern_object(o) for o in objects]
    for before, after in zip(originals, interned):
        assert typed(after) == typed(before)
        assert json.dumps(after) == json.dumps(before)
    assert objects == originals          # the input is not changed either
    assert interner.corrupted() == []


def test_equal_parts_of_different_objects_are_one_instance():
    interner = Interner()
    a = interner.intern_object(pod("a", {"app": "web"}, "n1"))
    b = interner.intern_object(pod("b", {"app": "web"}, "n2"))
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    assert a["spec"]["containers"] is b["spec"]["containers"]
    assert a["status"] is b["status"]
    assert a["spec"] is not b["spec"]                  # nodeName differs
    assert a["metadata"] is not b["metadata"]          # an object's own metadata is never shared
    assert a["metadata"]["name"] == "a" and b["spec"]["nodeName"] == "n2"


def test_true_one_and_one_point_zero_stay_apart():
    interner = Interner()
    objs = [interner.intern_object({"metadata": {}, "spec": {"v": v}}) for v in (1, True, 1.0, "1")]
    assert [typed(o["spec"]["v"]) for o in objs] == [("int", "1"), ("bool", "True"), ("float", "1.0"),
                                                     ("str", "'1'")]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["metadata", "spec", "status", "x"]), values, max_size=4),
                min_size=1, max_size=6))
def test_shapes_whose_hashes_collide_are_never_shared_for_each_other(objects):
    # The table is keyed by a shape's hash; every shape hashing alike must still give
    # equal objects (1, True and 1.0 apart, key order kept), never another shape's instance.
    # Four slots only, yet shapes still told apart, so corrupted() still checks something.
    interning.hash = lambda shape: builtins.hash(shape) & 3     # (module globals come before builtins)
    interner = Interner()
    try:
        originals = copy.deepcopy(objects)
        interned = [interner.intern_object(o) for o in objects]
        assert interner.corrupted() == []
    finally:
        del interning.hash
        interning.LIVE.discard(interner)   # conftest's check would rehash its keys with the real hash
    for before, after in zip(originals, interned):
        assert typed(after) == typed(before)


def test_a_collision_leaves_the_newcomer_unshared_and_is_counted(monkeypatch):
    monkeypatch.setattr(interning, "hash", lambda shape: 7, raising=False)
    interner = Interner()
    interning.LIVE.discard(interner)       # its keys mean nothing under the real hash
    one, true, again = (interner.intern_object({"metadata": {}, "spec": {"v": v}}) for v in (1, True, 1))
    assert typed(true["spec"]["v"]) == ("bool", "True")
    assert one["spec"] is again["spec"]             # the shape in the slot is still shared
    assert true["spec"] is not one["spec"]
    assert interner.collisions >= 1


def test_a_part_that_is_not_shared_is_still_copied_whole():
    # A float is never shared; the dict holding it must still have every key.
    interner = Interner()
    out = interner.intern_object({"metadata": {}, "usage": {"cpu": 12.5, "load": {"a": 1}, "n": 3}})
    assert out == {"metadata": {}, "usage": {"cpu": 12.5, "load": {"a": 1}, "n": 3}}


def test_a_sweep_drops_what_only_the_table_holds():
    interner = Interner()
    kept = interner.intern_object(pod("kept", {"app": "a"}, "n1"))
    gone = [interner.intern_object(pod("p%d" % i, {"app": "b", "i": str(i)}, "n%d" % i)) for i in range(50)]
    before = len(interner)
    del gone
    gc.collect()
    interner.sweep()
    assert len(interner) < before
    again = interner.intern_object(pod("again", {"app": "a"}, "n1"))
    assert again["spec"] is kept["spec"]           # what is still held stays shared
    assert interner.corrupted() == []


def test_a_shared_part_mutated_in_place_is_reported(monkeypatch):
    monkeypatch.setattr(interning, "MUTATED", [])
    monkeypatch.setattr(interning, "VERIFY", True)
    interner = Interner()
    a = interner.intern_object(pod("a", {"app": "web"}, "n1"))
    a["metadata"]["labels"]["app"] = "changed"        # the bug VERIFY is there to catch
    interner.intern_object(a)
    assert interning.MUTATED and interning.MUTATED[0][1] == {"app": "changed"}
    assert interner.corrupted() == [{"app": "changed"}]
    interning.LIVE.discard(interner)                 # broken on purpose: conftest's check skips it


NAMESPACE = {"metadata": {"name": "default"}, "spec": {}}


def create(fsm, resource, obj):
    return fsm.apply_with_changes(commands.write([commands.create(resource, obj)]))


def test_the_fsm_stores_json_bytes_shares_nothing_with_readers_and_dumps_them():
    fsm = StoreFSM()
    create(fsm, "namespaces", NAMESPACE)
    results = [create(fsm, "pods", pod(n, {"app": "web"}, "n1"))[0] for n in ("a", "b")]
    a = fsm.get("pods", "default", "a")
    assert isinstance(fsm.objects["pods"].raw(("default", "a")), bytes)     # store/encoded_objects.py
    assert results[0]["results"][0]["object"] == a
    a["spec"]["nodeName"] = "elsewhere"           # a reader's copy: the store keeps its bytes
    assert fsm.get("pods", "default", "a")["spec"]["nodeName"] == "n1"
    state = fsm.__getstate__()
    assert "_shared" not in state and state["objects"]["pods"][("default", "b")] == \
        fsm.objects["pods"].raw(("default", "b"))


def test_the_mirror_keeps_its_own_previous_version_and_shares_parts():
    fsm, mirror = StoreFSM(), Mirror()
    status = commands.write([commands.update("pods", "default", "a", dict(pod("a", {"app": "web"}, "n1"),
                                                                          status={"phase": "Failed"}),
                                             subresource="status")])
    for _, changes in (create(fsm, "namespaces", NAMESPACE), create(fsm, "pods", pod("a", {"app": "web"}, "n1")),
                       create(fsm, "pods", pod("b", {"app": "web"}, "n1")), fsm.apply_with_changes(status)):
        mirror.apply_changes(copy.deepcopy(changes))       # the stream delivers its own copies
    a, b = mirror.get("pods", "default", "a"), mirror.get("pods", "default", "b")
    assert a == fsm.get("pods", "default", "a") and a["status"] == {"phase": "Failed"}
    assert a["spec"] is b["spec"]
    last = mirror.watch_log.since(mirror.revision - 1)[0]
    assert last.object is a and last.previous["status"] == {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}
    assert last.previous["spec"] is a["spec"]             # the mirror's own version, sharing its parts


def _container_ids(value, out):
    if isinstance(value, (dict, list)):
        out.append(id(value))
        for part in (value.values() if isinstance(value, dict) else value):
            _container_ids(part, out)
    return out


def deployment(name):
    labels = {"app": "web"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "resourceVersion": "3"},
            "spec": {"selector": {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": dict(labels)}, "spec": {"containers": [
                         {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
                          "livenessProbe": {"tcpSocket": {"port": 80}}, "readinessProbe": {"tcpSocket": {"port": 80}}},
                         {"name": "b", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]}}}}


def test_an_interned_object_is_a_tree_so_a_copy_can_be_edited_at_one_place():
    """Equal parts of one object (selector and template labels, requests and limits, two
    probes, two containers' resources) were one instance: a deepcopy kept that, and a JSON
    patch of limits.cpu changed requests.cpu too (a reviewer's find)."""
    interner = Interner()
    first = interner.intern_object(deployment("one"))
    again = interner.intern_object(deployment("two"))      # everything found in the table now
    for obj in (first, again):
        ids = _container_ids(obj, [])
        assert len(ids) == len(set(ids)), "a container appears twice in one object"
        edited = copy.deepcopy(obj)
        edited["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "2"
        edited["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
        assert edited["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
        assert edited["spec"]["template"]["spec"]["containers"][1]["resources"]["limits"] == {"cpu": "1"}
        assert edited["spec"]["selector"]["matchLabels"] == {"app": "web"}
        assert obj == deployment(obj["metadata"]["name"])
    # different objects still share: the second's first container is the first's
    assert again["spec"]["template"]["spec"]["containers"][0] is first["spec"]["template"]["spec"]["containers"][0]
    assert interner.corrupted() == []


def test_a_sweep_goes_in_slices_and_still_drops_what_only_the_table_holds(monkeypatch):
    """At 30,000 pods one whole sweep took 0.3-0.8 s on the Raft tick thread: interning an
    object now looks at SWEEP_SLICE entries at most, and a sweep spans many objects."""
    monkeypatch.setattr(interning, "MIN_SWEEP", 64)
    monkeypatch.setattr(interning, "SWEEP_SLICE", 16)
    interner = Interner()
    interner._next_sweep = 64
    looked = []
    real_slice = interner._sweep_slice
    monkeypatch.setattr(interner, "_sweep_slice", lambda count: (looked.append(count), real_slice(count)))
    for i in range(400):
        interner.intern_object(pod("p%d" % i, {"app": "b", "i": str(i)}, "n%d" % i))   # each replaced at once
    assert looked and max(looked) == 16
    assert interner.sweeps >= 2
    assert len(interner) < 400 * 4, "what only the table held was not dropped"
    kept = interner.intern_object(pod("kept", {"app": "a"}, "n1"))
    for i in range(400):
        interner.intern_object(pod("q%d" % i, {"app": "c", "i": str(i)}, "m%d" % i))
    again = interner.intern_object(pod("again", {"app": "a"}, "n1"))
    assert again["spec"] is kept["spec"]            # what is still held stays shared
    assert interner.corrupted() == []


@settings(max_examples=150, deadline=None)
@given(values, values)
def test_any_object_with_equal_parts_is_interned_as_an_equal_tree(a, b):
    interner = Interner()
    for name in ("one", "two", "three"):      # later ones find the table's entries, duplicates too
        obj = {"metadata": {"name": name}, "spec": {"a": copy.deepcopy(a), "b": copy.deepcopy(a),
                                                    "c": [copy.deepcopy(b), {"x": copy.deepcopy(a)}]},
               "status": {"b": copy.deepcopy(b)}}
        stored = interner.intern_object(copy.deepcopy(obj))
        ids = _container_ids(stored, [])
        assert len(ids) == len(set(ids)), "a container appears twice in one object"
        assert typed(stored) == typed(obj)
    assert interner.corrupted() == []


def test_verify_reports_an_object_interned_with_one_container_at_two_places(monkeypatch):
    """What caught run L's defect at once: every interned object is checked to be a tree."""
    monkeypatch.setattr(interning, "MUTATED", [])
    monkeypatch.setattr(interning, "VERIFY", True)
    interner = Interner()
    monkeypatch.setattr(interner, "_make_tree", lambda obj: None)       # the step that keeps it a tree
    interner.intern_object(deployment("d"))
    assert interning.MUTATED and interning.MUTATED[0][0] == "not a tree"


# ---- a prior object: its equal parts are taken after one comparison ----

@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["metadata", "spec", "status"]), values, max_size=3),
       st.dictionaries(st.sampled_from(["metadata", "spec", "status"]), values, max_size=3), values)
def test_an_object_interned_with_a_prior_equals_the_original_and_is_a_tree(prior, obj, common):
    for o in (prior, obj):               # one part in common, so some parts are taken from the prior
        o["common"] = copy.deepcopy(common)
        o["twice"] = [copy.deepcopy(common), copy.deepcopy(common)]
    interner = Interner()
    stored_prior = interner.intern_object(copy.deepcopy(prior))
    original = copy.deepcopy(obj)
    stored = interner.intern_object(obj, stored_prior)
    assert typed(stored) == typed(original)
    assert json.dumps(stored) == json.dumps(original)
    ids = _container_ids(stored, [])
    assert len(ids) == len(set(ids)), "a container appears twice in one object"
    assert typed(stored_prior) == typed(prior)          # the prior is not changed
    assert interner.corrupted() == []


def test_a_part_equal_to_the_priors_but_of_another_type_or_key_order_is_not_taken():
    interner = Interner()
    # Every part here is shared (no float), so each would be taken were == enough.
    prior = interner.intern_object({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}},
                                    "spec": {"flag": 1, "size": 2, "list": [0, 1]}})
    new = interner.intern_object({"metadata": {"name": "a", "labels": {"y": "2", "x": "1"}},
                                  "spec": {"flag": True, "size": 2, "list": [False, True]}}, prior)
    assert typed(new["spec"]) == [("flag", ("bool", "True")), ("size", ("int", "2")),
                                  ("list", ["list", ("bool", "False"), ("bool", "True")])]
    assert list(new["metadata"]["labels"]) == ["y", "x"]
    assert new["spec"] is not prior["spec"] and interner.reused == 0


def test_a_new_version_takes_its_unchanged_parts_from_the_previous_one():
    interner = Interner()
    first = interner.intern_object(pod("a", {"app": "web"}, "n1"))
    update = pod("a", {"app": "web"}, "n1")
    update["metadata"]["resourceVersion"] = "8"
    update["status"] = {"phase": "Running", "podIP": "10.64.0.5",
                        "conditions": [{"type": "Ready", "status": "True"}]}
    second = interner.intern_object(copy.deepcopy(update), first)
    assert second["spec"] is first["spec"]
    assert second["metadata"]["labels"] is first["metadata"]["labels"]
    assert second["status"]["conditions"] is first["status"]["conditions"]
    assert second == update and interner.reused >= 3
    # A new object of a kind takes what it shares with the last one interned of that kind.
    sibling = interner.intern_object(pod("b", {"app": "web"}, "n1"), kind="pods")
    nephew = interner.intern_object(pod("c", {"app": "web"}, "n1"), kind="pods")
    assert nephew["spec"] is sibling["spec"] and nephew == pod("c", {"app": "web"}, "n1")
    # A deleted object is not kept as the next prior (its data would stay in memory).
    interner.forget("pods", sibling)
    assert interner._last["pods"] is nephew
    interner.forget("pods", nephew)
    assert "pods" not in interner._last
    assert interner.corrupted() == []


def test_the_mirror_interns_a_change_against_the_version_before_it():
    fsm, mirror = StoreFSM(), Mirror()
    # A whole-object update: the change stream brings it as stored bytes, all fresh.
    update = commands.write([commands.update("pods", "default", "a", pod("a", {"app": "web", "tier": "x"}, "n1"))])
    for _, changes in (create(fsm, "namespaces", NAMESPACE), create(fsm, "pods", pod("a", {"app": "web"}, "n1"))):
        mirror.apply_changes(copy.deepcopy(changes))
    mirror_before = mirror._shared.reused
    _, changes = fsm.apply_with_changes(copy.deepcopy(update))
    assert isinstance(changes[0].object, bytes)
    mirror.apply_changes(copy.deepcopy(changes))
    # Its spec and status both came from the mirror's previous version.
    assert mirror._shared.reused >= mirror_before + 2
    assert mirror.get("pods", "default", "a") == fsm.get("pods", "default", "a")
    assert fsm.get("pods", "default", "a")["metadata"]["labels"] == {"app": "web", "tier": "x"}
