"""RFC 6902 JSON patch (shepherd_ha/model/json_patch.py): applies in order, a failing
test or a missing path is 422, a malformed operation 400; the input is not modified."""
import pytest

from shepherd_ha.model.json_patch import JsonPatchError, apply_json_patch

DOC = {"metadata": {"name": "a", "labels": {"app": "web"}}, "spec": {"replicas": 1, "list": [1, 2]}}


def test_operations_apply_in_order():
    out = apply_json_patch(DOC, [
        {"op": "test", "path": "/spec/replicas", "value": 1},
        {"op": "replace", "path": "/spec/replicas", "value": 3},
        {"op": "add", "path": "/metadata/labels/tier", "value": "front"},
        {"op": "remove", "path": "/metadata/labels/app"},
        {"op": "add", "path": "/spec/list/-", "value": 3},
        {"op": "copy", "from": "/spec/replicas", "path": "/spec/copied"},
        {"op": "move", "from": "/spec/copied", "path": "/spec/moved"},
    ])
    assert out == {"metadata": {"name": "a", "labels": {"tier": "front"}},
                   "spec": {"replicas": 3, "list": [1, 2, 3], "moved": 3}}
    assert DOC["spec"]["replicas"] == 1


def test_path_escapes_work_for_label_keys_with_slashes():
    out = apply_json_patch(DOC, [{"op": "add", "path": "/metadata/labels/example.com~1tier", "value": "x"}])
    assert out["metadata"]["labels"]["example.com/tier"] == "x"


@pytest.mark.parametrize("patch, code", [
    ([{"op": "test", "path": "/spec/replicas", "value": 2}], 422),
    ([{"op": "remove", "path": "/spec/nothing"}], 422),
    ([{"op": "replace", "path": "/no/such/parent", "value": 1}], 422),
    ([{"op": "add", "path": "/spec/list/9", "value": 1}], 422),
    ([{"op": "replace", "path": "spec", "value": 1}], 422),
    ([{"op": "explode", "path": "/spec"}], 400),
    ([{"op": "add", "path": "/spec/x"}], 400),
    ([{"path": "/spec"}], 400),
    ({"op": "add"}, 400),
])
def test_bad_patches(patch, code):
    with pytest.raises(JsonPatchError) as err:
        apply_json_patch(DOC, patch)
    assert err.value.code == code
    assert str(err.value)


def test_a_missing_path_is_named_without_quoting_the_document():
    big = {"spec": {"replicas": 1, "template": {"x": "y" * 2000}}}
    with pytest.raises(JsonPatchError) as err:
        apply_json_patch(big, [{"op": "replace", "path": "/spec/nonexistent/x", "value": 3}])
    assert err.value.code == 422
    assert str(err.value) == ("operation 0 (replace /spec/nonexistent/x) does not apply: member 'nonexistent' "
                              "not found")
