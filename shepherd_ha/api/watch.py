"""Watch streams: newline-delimited JSON events from a replica's watch log.

A watch holds one server thread while it lasts; it wakes on every applied change
(or every second) and writes a bookmark or a bare newline when idle, so a client
that went away is noticed and its thread freed.
"""
import time

from flask import Response, request

from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.store.watch_log import WatchExpired

from .bodies import dumps, flag
from . import params
from .errors import ApiError, status_body, unavailable

BOOKMARK_INTERVAL = 5.0
DEFAULT_TIMEOUT = 1800


def stream(replica, target):
    from .objects import selectors  # shared parsing; imported here to avoid a cycle
    label_sel, field_sel = selectors(target)
    bookmarks = flag("allowWatchBookmarks")
    timeout = _timeout()
    rv = params.resource_version()
    info = target.info

    def matches(obj):
        if obj is None:
            return False
        meta = obj.get("metadata", {})
        if target.namespace is not None and meta.get("namespace") != target.namespace:
            return False
        return label_sel.matches(meta.get("labels")) and field_sel.matches(obj)

    initial = []
    if rv in (None, 0):
        try:
            items, start = replica.list(info.plural, target.namespace, consistent=rv is None)
        except Unavailable as exc:
            raise unavailable(exc)
        # Serialized here, while the request holds its flow-control seat (the seat goes
        # back once the stream starts): a 30,000-pod initial list is the costly part.
        initial = _serialized([{"type": "ADDED", "object": o} for o in items if matches(o)])
    else:
        start = rv
        try:
            replica.watch_log.since(start)
        except WatchExpired as exc:
            raise ApiError(410, str(exc), "Expired")

    def events_of(change):
        if change.resource != info.plural:
            return None
        now, before = matches(change.object), matches(change.previous)
        if change.type == "DELETED":
            return {"type": "DELETED", "object": change.previous} if before else None
        if now and before:
            return {"type": "MODIFIED", "object": change.object}
        if now:
            return {"type": "ADDED", "object": change.object}
        if before:  # stopped matching the selector: gone from this watcher's view
            return {"type": "DELETED", "object": change.object}
        return None

    def bookmark(revision):
        return {"type": "BOOKMARK", "object": {"kind": info.kind, "apiVersion": info.api_version,
                                               "metadata": {"resourceVersion": str(revision)}}}

    def generate():
        yield from initial
        if not initial:
            # waitress sends the headers with the first bytes: open the stream now,
            # so the client knows its watch is established.
            yield dumps(bookmark(start)) + "\n" if bookmarks else "\n"
        last = start
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            try:
                changes = replica.watch_log.since(last)
            except WatchExpired as exc:
                yield dumps({"type": "ERROR", "object": status_body(410, str(exc), "Expired")}) + "\n"
                return
            out = []
            for change in changes:
                last = change.revision
                event = events_of(change)
                if event is not None:
                    out.append(dumps(event) + "\n")
            if out:
                quiet_since = time.monotonic()
                yield "".join(out)
            elif time.monotonic() - quiet_since >= BOOKMARK_INTERVAL:
                quiet_since = time.monotonic()
                yield dumps(bookmark(last)) + "\n" if bookmarks else "\n"
            replica.watch_log.wait_beyond(last, 1.0)

    return Response(generate(), mimetype="application/json",
                    headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _serialized(events, chunk=100):
    """Newline-delimited JSON in chunks of `chunk` events: one json.dumps per event, so
    other threads (the Raft tick) get the GIL between them."""
    return ["".join(dumps(e) + "\n" for e in events[i:i + chunk]) for i in range(0, len(events), chunk)]


def _timeout():
    return params.query_int("timeoutSeconds", 1, params.INT32_MAX, DEFAULT_TIMEOUT, " of seconds")
