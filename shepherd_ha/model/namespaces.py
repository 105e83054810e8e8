"""What every part agrees on about namespaces: the ones every cluster has, the ones
that may not be deleted, the namespace controller's finalizer and Kubernetes' refusal
of new content in a Terminating namespace (the store gives it, a dry run mirrors it)."""
from .node_lease import LEASE_NAMESPACE

BOOTSTRAP_NAMESPACES = ("default", LEASE_NAMESPACE)      # made by a new leader when missing
# A delete is refused for these (403), as Kubernetes' NamespaceLifecycle refuses its three;
# the node leases' too, since every agent's heartbeat lives there.
IMMORTAL_NAMESPACES = BOOTSTRAP_NAMESPACES + ("kube-system", "kube-public")
NAMESPACE_FINALIZER = "kubernetes"        # spec.finalizers: the namespace controller's, removed once it is empty
NAMESPACE_TERMINATING = "NamespaceTerminating"     # the cause Kubernetes' clients look for in a 403


def spec_finalizers(namespace):
    """A namespace's spec.finalizers as a new list (what is not a list of strings counts as none)."""
    spec = namespace.get("spec") if isinstance(namespace, dict) else None
    finalizers = spec.get("finalizers") if isinstance(spec, dict) else None
    return [f for f in finalizers if isinstance(f, str)] if isinstance(finalizers, list) else []


def immortal_message(name):
    return 'namespaces "%s" is forbidden: this namespace may not be deleted' % name


def terminating_refusal(resource, name, namespace):
    """(message, details) of Kubernetes' 403 for new content in a Terminating namespace."""
    why = "unable to create new content in namespace %s because it is being terminated" % namespace
    return ('%s "%s" is forbidden: %s' % (resource, name, why),
            {"name": name, "kind": resource,
             "causes": [{"reason": NAMESPACE_TERMINATING, "message": why, "field": "metadata.namespace"}]})
