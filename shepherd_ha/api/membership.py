"""/shepherd/v1/members: the control plane's membership, and changes to it (admins only).

GET lists the members (id, Raft address, API URL) and, from the leader, each one's
catch-up progress. POST {"id", "raft", "api", "force"?} adds a replica, DELETE
/shepherd/v1/members/ID removes one. A change runs on the leader's store process
(store/membership.py): a follower forwards the request to the leader's API once, with
the caller's own Authorization header, so the leader authenticates the caller itself.
"""
import requests
from flask import Response, request

from shepherd_ha.tls.outbound import PLAIN, tls_reason

from shepherd_ha.store.membership import NotLeader, Refused
from shepherd_ha.store.raft_node import Unavailable

from .auth import GROUP_ADMIN
from .bodies import dumps
from .errors import ApiError, unavailable

FORWARDED = "Shepherd-Forwarded-By"
MAX_HOPS = 2
FORWARD_TIMEOUT = 40.0        # a change may wait for a catch-up check, a commit and a hand-over


def register(app, replica, outbound=None):
    """`outbound`: how the leader and a new replica are reached (tls/outbound.py: HTTPS
    verified against the cluster CA unless --insecure-http)."""
    outbound = outbound or PLAIN

    @app.get("/shepherd/v1/members")
    def list_members():
        """As the leader sees them (only it knows the catch-up progress); this replica's view
        when the leader is not reachable, with progressKnown false."""
        try:
            mine = replica.membership()
        except Unavailable as exc:
            raise unavailable(exc)
        if mine.get("progressKnown") or request.headers.get(FORWARDED) or request.args.get("local"):
            return _json(mine)
        try:
            answer = _forward(NotLeader(mine.get("leader"), replica.api_of(mine.get("leader"))), timeout=2.0)
        except ApiError:
            return _json(mine)
        return answer if answer.status_code == 200 else _json(mine)

    @app.post("/shepherd/v1/members")
    def add_member():
        _require_admin()
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            raise ApiError(400, 'the body is a JSON object {"id": "r4", "raft": "HOST:PORT", "api": "http://HOST:PORT"}')
        force = body.get("force", False)
        if not isinstance(force, bool):
            raise ApiError(422, "force is true or false, not %r" % (force,))
        if outbound.tls and isinstance(body.get("api"), str) and body["api"].startswith("http://"):
            raise ApiError(422, "this cluster serves HTTPS: api must be the new replica's https:// URL, not %r"
                           % body["api"])
        if not force:
            _require_running(body.get("id"), body.get("api"), outbound)
        return _change(lambda: replica.add_member(body.get("id"), body.get("raft"), body.get("api"), force))

    @app.delete("/shepherd/v1/members/<ident>")
    def remove_member(ident):
        _require_admin()
        return _change(lambda: replica.remove_member(ident))

    def _change(run):
        try:
            return _json(run())
        except Refused as exc:
            raise ApiError(exc.code, str(exc))
        except Unavailable as exc:
            raise unavailable(exc)
        except NotLeader as exc:
            return _forward(exc)

    def _forward(exc, timeout=FORWARD_TIMEOUT):
        # At most two hops: a follower to the leader, and a removed leader to its successor.
        hops = [h for h in request.headers.get(FORWARDED, "").split(",") if h]
        if len(hops) >= MAX_HOPS or replica.id in hops or exc.leader in hops:
            raise ApiError(503, "leadership moved while the request was forwarded (%s -> %s): retry"
                           % (" -> ".join(hops), replica.id), headers={"Retry-After": "1"})
        if not exc.leader_api:
            raise ApiError(503, "no leader known%s: a membership change needs one; retry once the cluster has a "
                           "quorum" % (" (leader %s has no API URL in the member table)" % exc.leader
                                       if exc.leader else ""), headers={"Retry-After": "1"})
        headers = {FORWARDED: ",".join(hops + [replica.id]), "Content-Type": "application/json"}
        if request.headers.get("Authorization"):
            headers["Authorization"] = request.headers["Authorization"]
        try:
            with outbound.session() as session:   # the cluster CA; the caller's token goes to the leader only
                reply = session.request(request.method, exc.leader_api.rstrip("/") + request.path,
                                        data=request.get_data(), headers=headers, timeout=timeout)
        except requests.RequestException as err:
            raise ApiError(503, "could not forward to the leader %s at %s (%s): retry, or send the request "
                           "there" % (exc.leader, exc.leader_api, type(err).__name__), headers={"Retry-After": "1"})
        return Response(reply.content, status=reply.status_code,
                        mimetype=reply.headers.get("Content-Type", "application/json").split(";")[0])


def _require_running(ident, api, outbound=PLAIN):
    """A replica is added only once it answers at its API URL as itself: with no learners in
    PySyncObj it is a voter the moment it is added, and one that is not running yet is a
    voter that never answers."""
    if not isinstance(api, str) or not api.startswith(("http://", "https://")):
        raise ApiError(422, "api must be the new replica's API URL (http://HOST:PORT), not %r" % (api,))
    try:
        with outbound.session() as session:
            answer = session.get(api.rstrip("/") + "/version", timeout=2.0).json()
    except requests.exceptions.SSLError as exc:
        raise ApiError(409, "replica %s at %s fails TLS verification against the cluster CA (%s): give it a "
                       "certificate from the cluster CA naming that address (`shepherd-ha local add-replica` "
                       "makes one)" % (ident, api, tls_reason(exc)))
    except (requests.RequestException, ValueError) as exc:
        raise ApiError(409, "replica %s does not answer at %s (%s): start it first with `shepherd-ha server "
                       "--join URL ...` (or pass force)" % (ident, api, type(exc).__name__))
    if not isinstance(answer, dict) or answer.get("replica") != ident:
        raise ApiError(409, "the replica at %s is %r, not %s: check --api and the new replica's --id"
                       % (api, answer.get("replica") if isinstance(answer, dict) else answer, ident))


def _require_admin():
    groups = request.environ.get("shepherd.groups")
    if groups is not None and GROUP_ADMIN not in groups:
        raise ApiError(403, "user %s may not change the control plane's membership: that needs the group %s"
                       % (request.environ.get("shepherd.user"), GROUP_ADMIN), "Forbidden")


def _json(body):
    return Response(dumps(body), mimetype="application/json")
