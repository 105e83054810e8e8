"""What an Event is called and what it holds: one shape for every component that
records one (the controllers, the scheduler's batches, the node agent).

An event's name is derived from what it says (the involved object, reason,
message, type), so the same thing happening again is the same event: its writer
raises `count` and `lastTimestamp` instead of adding one. Events about
cluster-scoped objects (nodes) live in the `default` namespace, as Kubernetes'.
"""
import hashlib

EVENT_NAMESPACE_FOR_CLUSTER_OBJECTS = "default"


def event_name(ref, reason, message, type_):
    """<object name>.<digest of what the event says about it>."""
    text = "|".join(str(x) for x in (ref.get("kind") or "", ref.get("uid") or "", ref.get("fieldPath") or "",
                                     reason, message, type_))
    return "%s.%s" % ((ref.get("name") or "object")[:200], hashlib.sha1(text.encode()).hexdigest()[:12])


def event_namespace(ref):
    return ref.get("namespace") or EVENT_NAMESPACE_FOR_CLUSTER_OBJECTS


def new_event(ref, reason, message, type_, first, last=None, count=1, component="", host=None):
    """The v1 Event saying `reason: message` about the object `ref` (an involvedObject)."""
    event = {"apiVersion": "v1", "kind": "Event",
             "metadata": {"name": event_name(ref, reason, message, type_), "namespace": event_namespace(ref)},
             "involvedObject": ref, "reason": reason, "message": message, "type": type_, "count": count,
             "firstTimestamp": first, "lastTimestamp": last or first, "source": {"component": component}}
    if host:        # a node's component (the agent), as the kubelet reports itself
        event["source"]["host"] = host
        event.update(reportingComponent=component, reportingInstance=host)
    return event
