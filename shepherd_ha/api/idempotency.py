"""Idempotency-Key, scoped: the key a write is remembered under in the store is the
client's key within its user (another user's key is not theirs to replay), and the
write carries a digest of the request (method, path, query, body), so the FSM tells
a retry (same request: the first answer again) from a reuse (another request: 422)."""
import hashlib

from flask import request

from shepherd_ha.store.fsm import KEY_REUSED
from shepherd_ha.store.idempotency import CLIENT_KEY_PREFIX

from .errors import ApiError

MAX_IDEMPOTENCY_KEY = 128
ANONYMOUS = "system:anonymous"       # without --token-file every caller is this one user


def client_key():
    """The request's Idempotency-Key header, checked; None when absent."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not key or len(key) > MAX_IDEMPOTENCY_KEY:
        raise ApiError(400, "Idempotency-Key must be 1 to %d characters" % MAX_IDEMPOTENCY_KEY)
    return key


def store_key(attempt=0):
    """What the store remembers this request's outcome under (None: no key sent). A
    read-modify-write that lost `attempt` races tries again under a derived key."""
    key = client_key()
    if key is None:
        return None
    user = request.environ.get("shepherd.user") or ANONYMOUS
    scoped = CLIENT_KEY_PREFIX + hashlib.sha256(("%s\0%s" % (user, key)).encode("utf-8", "backslashreplace")).hexdigest()
    return scoped if not attempt else "%s#%d" % (scoped, attempt)


def request_digest():
    """Of what the client asked: the same for every retry of one request, whatever
    replica it lands on; the query in a fixed order (a client may reorder it)."""
    h = hashlib.sha256()
    query = sorted(request.args.items(multi=True))
    for part in (request.method, request.path, repr(query)):
        h.update(part.encode("utf-8", "backslashreplace") + b"\0")
    h.update(request.get_data(cache=True))
    return h.hexdigest()[:32]


def check_same_request(outcome):
    """A remembered outcome (FSM recall) belongs to this request, or ApiError 422."""
    remembered = outcome.get("digest")
    if remembered is not None and remembered != request_digest():
        raise ApiError(422, KEY_REUSED, "Invalid")
