"""Events written inside the scheduler's batched writes, the EventRecorder's way.

EventRecorder.emit writes one event per Raft round trip; a pass binding 500 pods
cannot wait for 500 of those. So the scheduler puts each pod's event op in the
same atomic write as the pod's binding (or condition): the event exists exactly
when the binding does, if the recorder's budget admits it (a binding never waits for
one: an event over the budget is dropped and counted). The op is the recorder's own (`events.event_op`: same object,
reason, message and type -> same event, `count` + 1).
"""
from shepherd_ha.controllers import events
from shepherd_ha.model.times import now_rfc3339


def event_op(store, recorder, obj, reason, message, type_="Normal", now=None):
    """The create (or count-increment update) op for this event, read against the store now;
    None when the recorder's budget drops it. `now`: the event time (default: the recorder's clock)."""
    if recorder is not None and hasattr(recorder, "admits") and not recorder.admits():
        return None
    if now is None:
        now = recorder.now() if recorder is not None and getattr(recorder, "now", None) else now_rfc3339()
    component = getattr(recorder, "component", None) or "shepherd-scheduler"
    return events.event_op(store, obj, reason, message, type_, now, component)
