import copy

import pytest

from shepherd_ha.model.merge_patch import merge_patch

# The test cases from RFC 7386 Appendix A.
RFC_CASES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize("target, patch, expected", RFC_CASES)
def test_rfc7386_examples(target, patch, expected):
    assert merge_patch(target, patch) == expected


@pytest.mark.parametrize("target, patch, expected", RFC_CASES)
def test_inputs_are_not_mutated(target, patch, expected):
    target_before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)
    merge_patch(target, patch)
    assert target == target_before and patch == patch_before


def test_result_shares_nothing_with_inputs():
    target = {"keep": {"deep": [1, 2]}, "change": {"x": 1}}
    patch = {"change": {"y": [3]}, "new": {"z": {"w": 1}}}
    result = merge_patch(target, patch)
    result["keep"]["deep"].append(99)
    result["change"]["y"].append(99)
    result["new"]["z"]["w"] = 2
    assert target == {"keep": {"deep": [1, 2]}, "change": {"x": 1}}
    assert patch == {"change": {"y": [3]}, "new": {"z": {"w": 1}}}


def test_typical_deployment_patches():
    dep = {"metadata": {"name": "web", "labels": {"app": "web", "old": "x"}},
           "spec": {"replicas": 1, "template": {"spec": {"containers": [
               {"name": "web", "image": "nginx:1.24"}]}}}}
    scaled = merge_patch(dep, {"spec": {"replicas": 5}})
    assert scaled["spec"]["replicas"] == 5
    assert scaled["spec"]["template"] == dep["spec"]["template"]
    relabeled = merge_patch(dep, {"metadata": {"labels": {"old": None, "new": "y"}}})
    assert relabeled["metadata"]["labels"] == {"app": "web", "new": "y"}
    # Lists are replaced whole, which is why merge patches resend every container.
    new_image = merge_patch(dep, {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:1.25"}]}}}})
    assert new_image["spec"]["template"]["spec"]["containers"] == [
        {"name": "web", "image": "nginx:1.25"}]


@pytest.mark.parametrize("target", [None, 1, "s", True, [1], {"a": 1}])
def test_empty_object_patch_keeps_objects(target):
    result = merge_patch(target, {})
    assert result == (target if isinstance(target, dict) else {})


def test_scalar_values_and_falsy_values_are_kept():
    assert merge_patch({"a": 1}, {"a": 0, "b": False, "c": "", "d": []}) == {
        "a": 0, "b": False, "c": "", "d": []}


def test_null_for_missing_key_is_a_no_op():
    assert merge_patch({"a": 1}, {"b": None}) == {"a": 1}
