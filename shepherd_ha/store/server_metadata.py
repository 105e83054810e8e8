"""The metadata the store owns, which no client write sets: for the FSM's updates and for
dry runs, which answer as the FSM would."""

SERVER_METADATA = ("uid", "creationTimestamp", "deletionTimestamp", "generation", "resourceVersion")


def as_mapping(value):
    """`value` when it is a mapping, else an empty one (stored objects may hold anything
    that predates validation)."""
    return value if isinstance(value, dict) else {}


def with_server_metadata(incoming, current, name, namespace):
    """`incoming` (an update's object) with the metadata the store owns taken from `current`."""
    obj = dict(incoming)
    meta = dict(obj.get("metadata") or {})
    for field in SERVER_METADATA:
        meta.pop(field, None)
        if field in current["metadata"]:
            meta[field] = current["metadata"][field]
    meta["name"] = name
    if namespace:
        meta["namespace"] = namespace
    obj["metadata"] = meta
    return obj
