"""Watch streams: newline-delimited JSON events from a replica's watch log.

A stream carries events only, as Kubernetes' do (a typed client parses every line
as an event): its headers go out at once (an empty write), keep-alive is a BOOKMARK
every BOOKMARK_INTERVAL idle seconds when the client allows bookmarks, else nothing.
A watch holds one server thread while it lasts (started as watches open:
api/thread_budget.py); it wakes on every applied change of its resource (a watch of
pods on one node, spec.nodeName=N, what every kubelet runs: only on changes of pods on
that node; store/watch_interests.py) or every second, and checks that its reader is
still there (waitress' client_disconnected), so a client that went away frees its
thread within a second.
With a Table in the Accept header each event carries a one-row Table (api/tables.py).
"""
import time

from flask import Response, request

from shepherd_ha.model.selectors import EQUALS
from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.store.selector_index import INDEXED_FIELDS
from shepherd_ha.store.watch_log import WatchExpired

from shepherd_ha.streaming import WRITE_KEY

from . import params, tables
from .bodies import dumps, flag
from .errors import ApiError, status_body, unavailable

BOOKMARK_INTERVAL = 5.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
DEFAULT_TIMEOUT = 1800


def stream(replica, target):
    from .objects import selectors  # shared parsing; imported here to avoid a cycle
    label_sel, field_sel = selectors(target)
    bookmarks = flag("allowWatchBookmarks")
    table = tables.requested()
    environ = request.environ
    gone = environ.get("waitress.client_disconnected") or (lambda: False)
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

    send_initial = _send_initial_events(bookmarks, rv)
    initial = []
    if send_initial is False and rv is None:
        start = replica.watch_log.last_revision          # from now on, no initial state
    elif send_initial or rv in (None, 0):
        try:
            # NotOlderThan rv: this replica's state when it is that new, else a consistent read.
            consistent = rv is None or (send_initial and rv > replica.revision())
            items, start = replica.list(info.plural, target.namespace, consistent=consistent,
                                        selection=(label_sel, field_sel))
        except Unavailable as exc:
            raise unavailable(exc)
        # Serialized here, while the request holds its flow-control seat (the seat goes
        # back once the stream starts): a 30,000-pod initial list is the costly part.
        initial = [{"type": "ADDED", "object": o} for o in items if matches(o)]
        if table is not None:
            initial = [table.watch_event(info, e, i == 0) for i, e in enumerate(initial)]
        initial = _serialized(initial)
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

    sent = [bool(initial)]      # whether an event went out yet (a Table's columns go with the first)

    def line(event):
        if table is not None:
            event = table.watch_event(info, event, not sent[0])
        sent[0] = True
        return dumps(event) + "\n"

    def generate():
        # waitress sends the headers with the first non-empty chunk: send them now,
        # so the client knows at once that its watch is established.
        write = environ.get(WRITE_KEY)
        if write is not None:
            write(b"")
        yield b""       # waitress skips an empty chunk; a WSGI caller waiting for the first one gets it
        yield from initial
        if send_initial:
            # client-go's watch-list: the initial state is complete once this arrives.
            end = bookmark(start)
            end["object"]["metadata"]["annotations"] = {INITIAL_EVENTS_END: "true"}
            yield dumps(end) + "\n"
        elif not initial and bookmarks:
            yield dumps(bookmark(start)) + "\n"
        yield from follow(start)

    def follow(last):
        log = replica.watch_log
        interest = _interest(log, info.plural, field_sel)
        try:
            deadline = time.monotonic() + timeout
            quiet_since = time.monotonic()
            while time.monotonic() < deadline and not gone():
                try:
                    # Nothing this watch cares about up to `covered` that is not in `changes`.
                    changes, covered = log.since_for(last, interest)
                except WatchExpired as exc:
                    yield dumps({"type": "ERROR", "object": status_body(410, str(exc), "Expired")}) + "\n"
                    return
                out = []
                for change in changes:
                    event = events_of(change)
                    if event is not None:
                        out.append(line(event))
                last = max(last, covered)
                if out:
                    quiet_since = time.monotonic()
                    yield "".join(out)
                elif bookmarks and time.monotonic() - quiet_since >= BOOKMARK_INTERVAL:
                    quiet_since = time.monotonic()
                    yield dumps(bookmark(last)) + "\n"
                log.wait_interest(interest, 1.0)
        finally:
            log.unregister(interest)

    return Response(generate(), mimetype="application/json",
                    headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _interest(log, plural, field_sel):
    """The watch's Interest in the watch log: in the changes of a value of an indexed
    field it names (spec.nodeName=N), else in every change of its resource
    (store/watch_interests.py)."""
    for req in field_sel.requirements:
        if req.operator == EQUALS and req.field in INDEXED_FIELDS.get(plural, ()):
            return log.register(plural, req.field, req.value)
    return log.register(plural)


def _send_initial_events(bookmarks, rv):
    """sendInitialEvents as True/False/None (absent), checked as Kubernetes does: it needs
    resourceVersionMatch=NotOlderThan and allowWatchBookmarks (the end of the initial
    events is a bookmark)."""
    value = request.args.get("sendInitialEvents")
    if value in (None, ""):
        if request.args.get("resourceVersionMatch"):
            raise ApiError(400, "resourceVersionMatch is for lists, or for a watch with sendInitialEvents")
        return None
    if value.lower() not in ("true", "false", "1", "0"):
        raise ApiError(400, "sendInitialEvents must be true or false, got %s" % params.shown(value))
    if request.args.get("resourceVersionMatch") != "NotOlderThan":
        raise ApiError(400, "sendInitialEvents needs resourceVersionMatch=NotOlderThan")
    if not bookmarks:
        raise ApiError(400, "sendInitialEvents needs allowWatchBookmarks=true: the end of the initial events "
                       "is a bookmark")
    send = value.lower() in ("true", "1")
    if not send and rv is not None:
        return None     # a plain watch from rv
    return send


def _serialized(events, chunk=100):
    """Newline-delimited JSON in chunks of `chunk` events: one json.dumps per event, so
    other threads (the Raft tick) get the GIL between them."""
    return ["".join(dumps(e) + "\n" for e in events[i:i + chunk]) for i in range(0, len(events), chunk)]


def _timeout():
    return params.query_int("timeoutSeconds", 1, params.INT32_MAX, DEFAULT_TIMEOUT, " of seconds")
