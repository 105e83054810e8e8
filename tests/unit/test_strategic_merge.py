"""Strategic merge patch (shepherd_ha/model/strategic_merge.py) against Kubernetes'
documented behaviour (docs "Update API Objects in Place Using kubectl patch" and
the strategic-merge-patch design): lists merge by their merge keys, directives
replace, delete, order and retain, and never reach the result."""
import pytest

from shepherd_ha.model.strategic_merge import PatchError, strategic_merge


def deployment(containers, **spec):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": dict({"template": {"spec": {"containers": containers}}}, **spec)}


def containers_of(obj):
    return obj["spec"]["template"]["spec"]["containers"]


def patch_containers(items, **extra):
    return {"spec": {"template": {"spec": dict({"containers": items}, **extra)}}}


WEB = {"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80, "protocol": "TCP"}],
       "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
       "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
SIDE = {"name": "side", "image": "busybox", "command": ["sleep", "1000"]}


def test_containers_merge_by_name_and_keep_the_others():
    out = strategic_merge("deployments", deployment([WEB, SIDE]), patch_containers([{"name": "web", "image": "nginx:1.26"}]))
    web, side = containers_of(out)
    assert web == dict(WEB, image="nginx:1.26")
    assert side == SIDE


def test_a_new_container_is_appended():
    out = strategic_merge("deployments", deployment([WEB]), patch_containers([{"name": "log", "image": "fluentd"}]))
    assert [c["name"] for c in containers_of(out)] == ["web", "log"]


def test_env_merges_by_name_and_null_deletes_a_key():
    patch = patch_containers([{"name": "web", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
                               "volumeMounts": None}])
    web = containers_of(strategic_merge("deployments", deployment([WEB]), patch))[0]
    assert web["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]
    assert "volumeMounts" not in web


def test_ports_merge_by_container_port():
    patch = patch_containers([{"name": "web", "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]}])
    web = containers_of(strategic_merge("deployments", deployment([WEB]), patch))[0]
    assert web["ports"] == [{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 443}]


def test_volume_mounts_merge_by_mount_path():
    patch = patch_containers([{"name": "web", "volumeMounts": [{"mountPath": "/data", "readOnly": True}]}])
    web = containers_of(strategic_merge("deployments", deployment([WEB]), patch))[0]
    assert web["volumeMounts"] == [{"name": "data", "mountPath": "/data", "readOnly": True}]


def test_a_list_without_a_strategy_is_replaced():
    patch = patch_containers([{"name": "side", "command": ["sleep", "5"]}])
    side = containers_of(strategic_merge("deployments", deployment([SIDE]), patch))[0]
    assert side["command"] == ["sleep", "5"]


def test_patch_delete_removes_the_list_item_with_that_key():
    patch = patch_containers([{"name": "side", "$patch": "delete"}])
    assert [c["name"] for c in containers_of(strategic_merge("deployments", deployment([WEB, SIDE]), patch))] == ["web"]


def test_patch_replace_as_a_list_item_replaces_the_whole_list():
    patch = patch_containers([{"name": "new", "image": "x"}, {"$patch": "replace"}])
    assert containers_of(strategic_merge("deployments", deployment([WEB, SIDE]), patch)) == [{"name": "new", "image": "x"}]


def test_patch_replace_in_a_map_replaces_the_map():
    original = {"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}}
    out = strategic_merge("pods", original, {"metadata": {"labels": {"z": "3", "$patch": "replace"}}})
    assert out["metadata"]["labels"] == {"z": "3"}
    assert out["metadata"]["name"] == "a"


def test_patch_delete_in_a_map_deletes_it():
    original = {"metadata": {"name": "a", "labels": {"x": "1"}}}
    out = strategic_merge("pods", original, {"metadata": {"labels": {"$patch": "delete"}}})
    assert out["metadata"] == {"name": "a"}


def test_set_element_order_orders_the_merged_list():
    patch = patch_containers([{"name": "web", "image": "nginx:2"}],
                             **{"$setElementOrder/containers": [{"name": "side"}, {"name": "web"}]})
    out = strategic_merge("deployments", deployment([WEB, SIDE]), patch)
    assert [c["name"] for c in containers_of(out)] == ["side", "web"]
    assert containers_of(out)[1]["image"] == "nginx:2"
    assert "$setElementOrder/containers" not in out["spec"]["template"]["spec"]


def test_finalizers_are_a_set_and_delete_from_primitive_list_removes():
    original = {"metadata": {"name": "a", "finalizers": ["a/x", "b/y"]}}
    out = strategic_merge("pods", original, {"metadata": {"finalizers": ["b/y", "c/z"]}})
    assert out["metadata"]["finalizers"] == ["a/x", "b/y", "c/z"]
    out = strategic_merge("pods", original, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a/x"]}})
    assert out["metadata"]["finalizers"] == ["b/y"]


def test_retain_keys_clears_the_other_member_of_a_union():
    original = deployment([WEB], strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}})
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    assert strategic_merge("deployments", original, patch)["spec"]["strategy"] == {"type": "Recreate"}


def test_conditions_merge_by_type_and_owner_references_by_uid():
    pod = {"metadata": {"name": "p", "ownerReferences": [{"uid": "1", "name": "a", "kind": "X"}]},
           "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}}
    out = strategic_merge("pods", pod, {"status": {"conditions": [{"type": "Ready", "status": "True"}]},
                                        "metadata": {"ownerReferences": [{"uid": "2", "name": "b", "kind": "X"}]}})
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]
    assert [r["uid"] for r in out["metadata"]["ownerReferences"]] == ["1", "2"]


def test_service_ports_merge_by_port():
    svc = {"spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "https", "port": 443}]}}
    out = strategic_merge("services", svc, {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}})
    assert out["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 9090}, {"name": "https", "port": 443}]


def test_inputs_are_not_modified():
    original, patch = deployment([WEB, SIDE]), patch_containers([{"name": "web", "image": "x"}])
    before = repr(original), repr(patch)
    strategic_merge("deployments", original, patch)
    assert (repr(original), repr(patch)) == before


@pytest.mark.parametrize("patch, words", [
    (patch_containers([{"image": "x"}]), "merge key 'name'"),
    ({"spec": {"$patch": "explode"}}, "not one of replace, delete, merge"),
    ({"spec": {"$bogus": 1}}, "unknown patch directive"),
    ({"$patch": "delete"}, "use DELETE"),
    ({"metadata": {"finalizers": [{"a": 1}]}}, "holds values"),
])
def test_bad_patches_are_refused_with_a_reason(patch, words):
    with pytest.raises(PatchError, match=words.replace("(", ".").replace(")", ".")):
        strategic_merge("deployments", deployment([WEB]), patch)


def test_directives_never_reach_the_result_even_inside_replaced_lists():
    patch = {"spec": {"template": {"spec": {"volumes": [{"$patch": "replace"}, {"name": "v", "emptyDir": {"$x": 1}}]}}}}
    out = strategic_merge("deployments", deployment([WEB]), patch)
    assert out["spec"]["template"]["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]


from hypothesis import HealthCheck, given, settings, strategies as st   # noqa: E402

from shepherd_ha.model.merge_patch import merge_patch   # noqa: E402

_KEYS = st.sampled_from(["a", "b", "c", "spec", "data"])
_SCALARS = st.one_of(st.none(), st.integers(), st.text(max_size=3), st.booleans())
_MAPS = st.recursive(_SCALARS, lambda inner: st.dictionaries(_KEYS, inner, max_size=3), max_leaves=8)


# A noisy shared machine makes generation slow at times: that is no failure of the property.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_KEYS, _MAPS, max_size=3), st.dictionaries(_KEYS, _MAPS, max_size=3))
def test_without_lists_or_directives_it_is_a_json_merge_patch(original, patch):
    original = {k: v for k, v in original.items() if v is not None}
    assert strategic_merge("configmaps", original, patch) == merge_patch(original, patch)
