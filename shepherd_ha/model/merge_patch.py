"""RFC 7386 JSON merge patch, as used by PATCH with application/merge-patch+json."""
import copy


def merge_patch(target, patch):
    """Apply patch to target and return the result; neither input is modified.

    An object patch merges key by key (null deletes a key); any other patch value,
    including a list, replaces the target outright.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    result = {}
    for key, value in target.items():
        if key not in patch:
            result[key] = copy.deepcopy(value)
        elif patch[key] is not None:
            result[key] = merge_patch(value, patch[key])
    for key, value in patch.items():
        if key not in target and value is not None:
            result[key] = merge_patch(None, value)
    return result
