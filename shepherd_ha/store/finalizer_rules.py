"""What an update of an object being deleted may do with its finalizers, for the FSM and
for dry runs: pure. No finalizer may be added (Kubernetes' 422); removing the last one
completes the deletion (a namespace's spec.finalizers count from command format 3)."""
from shepherd_ha.model.namespaces import spec_finalizers

from .commands import LIFECYCLE_FORMAT


def finalizer_verdict(resource, what, current, updated, version):
    """(refusal, completes) for an update of `current` (`what`: how messages name it) into
    `updated`: refusal is the 422 message when the update adds a finalizer to an object
    being deleted; completes is
    True when it removes the last one, so the object goes. (None, False) for an object
    not being deleted."""
    if not current["metadata"].get("deletionTimestamp"):
        return None, False
    lists = [("metadata.finalizers", (current["metadata"].get("finalizers") or []),
              ((updated.get("metadata") or {}).get("finalizers") or []))]
    if resource == "namespaces" and version >= LIFECYCLE_FORMAT:
        lists.append(("spec.finalizers", spec_finalizers(current), spec_finalizers(updated)))
    for field, before, after in lists:
        added = sorted(set(after) - set(before))
        if added:
            return ("%s: %s cannot be added: %s is being deleted"
                    % (field, ", ".join(added), what)), False
    completes = any(before for _, before, _ in lists) and not any(after for _, _, after in lists)
    return None, completes
