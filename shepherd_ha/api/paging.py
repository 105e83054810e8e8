"""Paged lists (limit, continue) and resourceVersionMatch, from a consistent snapshot.

Kubernetes serves every page of a list from etcd's MVCC snapshot at the first
page's revision. Our store keeps only the current state, but each replica keeps a
log of the changes it applied (store/watch_log.py), each with the object before
the change. So the state at an older revision R is the current state with the
changes after R undone, newest first: every page is cut from exactly the state at
R, as in Kubernetes. That works while the watch log still reaches back to R; once
it does not, the continue token has expired: 410 Expired with a fresh token in the
Status' metadata.continue that lists the rest from the current state (the result
is then inconsistent, as a client using Kubernetes' fresh token gets too).

The continue token is base64url of JSON {"rv": R, "start": [namespace, name], "in":
"plural/namespace"}: the snapshot's revision, the last key returned and the list it
pages (as Kubernetes binds a token to its key prefix, a token of one list is refused by
another; tokens without "in", from before it, are taken by any). Items are ordered by
(namespace, name), the order of every list.

resourceVersionMatch: NotOlderThan (a state at least as new as resourceVersion,
the default meaning of a resourceVersion) and Exact (the state at exactly that
revision, rebuilt as above; 410 when the log no longer reaches it).
"""
import base64
import json

from flask import request

from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.store.watch_log import WatchExpired

from . import params
from .errors import ApiError, unavailable

MATCHES = ("NotOlderThan", "Exact")
MAX_TOKEN = 4096


def list_scope(plural, namespace):
    """What a continue token is bound to: the collection and namespace of its list."""
    return "%s/%s" % (plural, namespace or "")


def encode_token(revision, start, scope):
    raw = json.dumps({"rv": revision, "start": list(start), "in": scope}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token, scope):
    """(revision, (namespace, name)); ApiError 400 for a token this server did not make,
    or made for another list than `scope`."""
    try:
        if len(token) > MAX_TOKEN:
            raise ValueError("too long")
        body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        revision, start, made_for = body["rv"], body["start"], body.get("in", scope)
        if type(revision) is not int or revision < 0 or not (isinstance(start, list) and len(start) == 2
                                                               and all(isinstance(s, str) for s in start)):
            raise ValueError("bad fields")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, AttributeError):
        raise ApiError(400, "continue token %s is not one this server gave: pass the metadata.continue of the "
                       "previous page unchanged, or list again without continue" % params.shown(token))
    if made_for != scope:
        raise ApiError(400, "continue token %s is of another list (%s), not of this one (%s): pass a token only "
                       "to the list that gave it, or list again without continue"
                       % (params.shown(token), params.shown(str(made_for)), scope))
    return revision, tuple(start)


class ListRequest:
    """The paging and consistency parameters of a list."""

    def __init__(self, scope):
        self.scope = scope          # list_scope() of the list: continue tokens are bound to it
        self.limit = params.query_int("limit", 0, params.INT64_MAX, 0) or None
        token = request.args.get("continue") or None
        self.rv = params.resource_version()
        self.match = request.args.get("resourceVersionMatch") or None
        if self.match is not None and self.match not in MATCHES:
            raise ApiError(400, "resourceVersionMatch %s is not one of %s" % (params.shown(self.match),
                                                                             ", ".join(MATCHES)))
        if self.match is not None and self.rv is None:
            raise ApiError(400, "resourceVersionMatch needs a resourceVersion to match")
        self.revision, self.start = (None, None)
        if token is not None:
            if self.rv is not None or self.match is not None:
                raise ApiError(400, "resourceVersion and resourceVersionMatch cannot be given with continue: "
                               "the token already names the list's revision")
            self.revision, self.start = decode_token(token, scope)
        elif self.match == "Exact":
            self.revision = self.rv


def _key(obj):
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def _state_at(items, changes, plural, namespace, upto):
    """`items` (the state at revision `upto`) with the changes after R undone."""
    state = {_key(o): o for o in items}
    for change in reversed(changes):
        if change.revision > upto or change.resource != plural:
            continue
        shown = change.object if change.object is not None else change.previous
        key = _key(shown)
        if namespace is not None and key[0] != namespace:
            continue
        if change.previous is None:
            state.pop(key, None)
        else:
            state[key] = change.previous
    return list(state.values())


def snapshot(replica, plural, namespace, wanted, consistent, selection=None):
    """(items, revision): the current state (wanted.revision None) or the state at wanted.revision.
    `selection` (label selector, field selector) may narrow the current state's items to a
    superset of its matches; an earlier state is rebuilt from all of them."""
    try:
        items, revision = replica.list(plural, namespace, consistent and wanted.revision is None,
                                       selection if wanted.revision is None else None)
        if wanted.revision is None or wanted.revision == revision:
            return items, revision
        if wanted.revision > revision:        # this replica is behind: read the newest state
            items, revision = replica.list(plural, namespace, True)
            if wanted.revision > revision:
                raise ApiError(504, "resourceVersion %d is newer than the cluster's revision %d"
                               % (wanted.revision, revision), "Timeout")
        changes = replica.watch_log.since(wanted.revision)
    except Unavailable as exc:
        raise unavailable(exc)
    except WatchExpired as exc:
        if wanted.start is None:
            raise ApiError(410, "resourceVersion %d is too old to list exactly: %s" % (wanted.revision, exc),
                           "Expired")
        raise ApiError(410, "the continue token is too old to list the rest of a consistent snapshot (revision "
                       "%d: %s). List again without continue, or use the continue token in this Status' "
                       "metadata to get the rest from the current state, which may then show changes made "
                       "since the first page" % (wanted.revision, exc), "Expired",
                       metadata={"continue": encode_token(revision, wanted.start, wanted.scope)})
    return _state_at(items, changes, plural, namespace, revision), wanted.revision


def page(items, wanted, revision):
    """(the page's items, metadata additions): `items` must be sorted by (namespace, name)."""
    if wanted.start is not None:
        items = [o for o in items if _key(o) > wanted.start]
    if wanted.limit is None or len(items) <= wanted.limit:
        return items, {}
    shown = items[:wanted.limit]
    return shown, {"continue": encode_token(revision, _key(shown[-1]), wanted.scope),
                   "remainingItemCount": len(items) - wanted.limit}
