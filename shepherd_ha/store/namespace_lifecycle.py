"""Kubernetes' namespace lifecycle inside the FSM (a mixin of StoreFSM), pure like it.

From command format 3 a namespace delete only marks the namespace (deletionTimestamp,
phase Terminating, the `kubernetes` spec finalizer); new content in it is refused with
the NamespaceTerminating cause; the namespace controller deletes what is in it as single
deletes would, pods with their grace periods, then removes its finalizer
(controllers/namespaces.py), and the store deletes the namespace with whatever is left.
Updates keep a namespace's spec.finalizers (only `finalize` sets them) and its status.
Commands of formats 1 and 2 replay as they were answered: their deletes take the
namespace and its contents at once, a create in a namespace being deleted is a 409.
"""
from shepherd_ha.model.namespaces import (IMMORTAL_NAMESPACES, NAMESPACE_FINALIZER, immortal_message,
                                          spec_finalizers, terminating_refusal)
from shepherd_ha.model.resources import RESOURCES

from .commands import LIFECYCLE_FORMAT
from .server_metadata import as_mapping, with_server_metadata


class NamespaceLifecycle:
    def _content_refusal(self, namespace_obj, resource, name, version):
        """The refusal (code, reason, message, details) of a create in a namespace being
        deleted, or None."""
        if not namespace_obj["metadata"].get("deletionTimestamp"):
            return None
        namespace = namespace_obj["metadata"]["name"]
        if version < LIFECYCLE_FORMAT:      # as a log of an older format was answered
            return 409, "Conflict", 'namespace "%s" is being deleted' % namespace, None
        message, details = terminating_refusal(resource, name, namespace)
        return 403, "Forbidden", message, details

    def _terminate_namespace(self, current, op, staged, planned):
        """A namespace delete of format 3 on: an outcome, or a refusal tuple."""
        refusal, marked = terminated_namespace(current, op.get("deletionTimestamp"))
        if refusal:
            return refusal
        if marked is None:
            return {"code": 200, "resource": "namespaces", "object": current, "unchanged": True}
        obj = self._stage_modified("namespaces", current, marked, staged, planned)
        return {"code": 200, "resource": "namespaces", "object": obj, "terminating": True}

    def _delete_namespace_contents(self, namespace, staged, planned):
        """Everything in `namespace`, committed or staged by this write, deleted with it."""
        for plural, info in RESOURCES.items():
            if not info.namespaced:
                continue
            names = {key[1] for key in self.objects.get(plural, {}) if key[0] == namespace}
            names |= {k[1][1] for k, v in staged.items() if k[0] == plural and k[1][0] == namespace and v}
            for name in sorted(names):
                current = self._current(staged, plural, namespace, name)
                if current is not None:
                    self._plan_delete(plural, current, staged, planned)


def terminated_namespace(current, stamp):
    """A namespace delete (format 3 on), for the FSM and dry runs: (refusal, marked). A
    refusal is (code, reason, message); `marked` is the namespace marked Terminating
    (deletionTimestamp `stamp`, the `kubernetes` spec finalizer), or None when it stays
    as it is (already Terminating, nothing left to wait for)."""
    meta = current["metadata"]
    if meta["name"] in IMMORTAL_NAMESPACES:     # whoever asks: a person, or the garbage collector
        return (403, "Forbidden", immortal_message(meta["name"])), None
    if meta.get("deletionTimestamp"):
        if spec_finalizers(current):        # Kubernetes' answer while its content is being removed
            return (409, "Conflict", 'Operation cannot be fulfilled on namespaces "%s": The system is '
                    'ensuring all content is removed from this namespace.  Upon completion, this '
                    'namespace will automatically be purged by the system.' % meta["name"]), None
        return None, None
    finalizers = spec_finalizers(current)
    if NAMESPACE_FINALIZER not in finalizers:
        finalizers.append(NAMESPACE_FINALIZER)
    marked = dict(current, metadata=dict(meta, deletionTimestamp=stamp or meta.get("creationTimestamp")),
                  spec=dict(as_mapping(current.get("spec")), finalizers=finalizers),
                  status=dict(as_mapping(current.get("status")), phase="Terminating"))
    return None, marked


def namespace_update(incoming, current, name):
    """A namespace update (format 3 on): the incoming object with the stored server
    metadata, spec.finalizers and status."""
    obj = with_server_metadata(incoming, current, name, None)
    spec = dict(as_mapping(obj.get("spec")))
    spec.pop("finalizers", None)
    if "finalizers" in as_mapping(current.get("spec")):
        spec["finalizers"] = current["spec"]["finalizers"]
    if spec or "spec" in obj or "spec" in current:
        obj["spec"] = spec
    obj.pop("status", None)
    if "status" in current:
        obj["status"] = current["status"]
    return obj
