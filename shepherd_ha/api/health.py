"""Health, readiness, metrics, version and the cluster view."""
import concurrent.futures

import requests
from flask import Response, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from shepherd_ha import cluster_identity
from shepherd_ha.tls.outbound import PLAIN, tls_reason

from .bodies import dumps
from .version import version_info

PEER_TIMEOUT = 0.5


def register(app, replica, metrics, peer_token=None, log_grant_keys=None, outbound=None):
    @app.get("/healthz")
    def healthz():
        return Response("ok\n", mimetype="text/plain")

    @app.get("/readyz")
    def readyz():
        ready, reason = replica.ready()
        return Response(reason + "\n", status=200 if ready else 503, mimetype="text/plain")

    @app.get("/metrics")
    def metrics_endpoint():
        return Response(generate_latest(metrics.registry), mimetype=CONTENT_TYPE_LATEST)

    # "/version/" too: the typed Python client's VersionApi asks for it, as Kubernetes serves both
    @app.get("/version")
    @app.get("/version/")
    def version():
        info = dict(version_info(replica.id), clusterId=getattr(replica, "cluster_id", None))
        return Response(dumps(info), mimetype="application/json")

    @app.get("/shepherd/v1/replica")
    def replica_status():
        status = replica.status()
        if request.args.get("digest") in ("1", "true"):
            # Equal on replicas that applied the same log: how tests spot divergence.
            status["revision"], status["digest"] = replica.digest()
        return Response(dumps(status), mimetype="application/json")

    @app.get("/shepherd/v1/log-grant-key")
    def log_grant_key_endpoint():
        # What agents verify log grants with (api/replica_credentials.py); public, but asked for
        # with the agent's own token so that it comes from a replica the agent trusts.
        if not log_grant_keys:
            return Response(dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                                   "reason": "NotFound", "message": "this replica signs no log grants"}),
                            status=404, mimetype="application/json")
        # keys[0] signs this replica's grants; the others are accepted while the Raft secret is rotated
        return Response(dumps({"algorithm": "Ed25519", "keys": list(log_grant_keys)}), mimetype="application/json")

    @app.get("/shepherd/v1/cluster")
    def cluster():
        return Response(dumps(cluster_view(replica, peer_token, outbound)), mimetype="application/json")


def _ask(peer, token=None, outbound=PLAIN, cluster_id=None):
    base = {"id": peer.id, "api": peer.api, "raft": peer.raft, "reachable": False, "role": "unknown",
            "term": None, "commitIndex": None, "appliedIndex": None, "revision": None}
    if not peer.api:
        return dict(base, error="no API address configured for this peer")
    try:
        headers = {"Authorization": "Bearer " + token} if token else {}
        if cluster_id:
            headers[cluster_identity.HEADER] = cluster_id
        with outbound.session() as session:    # the cluster CA; no proxy or ~/.netrc from the environment
            reply = session.get(peer.api.rstrip("/") + "/shepherd/v1/replica", headers=headers, timeout=PEER_TIMEOUT)
        if reply.status_code == 421:
            return dict(base, error="another cluster: %s" % reply.json().get("message"))
        reply.raise_for_status()
        answer = reply.json()
        theirs = answer.get("clusterId")
        if cluster_id and theirs and theirs != cluster_id:     # a peer that checks nothing (an older one)
            return dict(base, error="another cluster: the replica at %s is of cluster %s, this one of %s"
                        % (peer.api, theirs, cluster_id))
        return dict(answer, reachable=True)
    except requests.exceptions.SSLError as exc:
        return dict(base, error="TLS: %s" % _tls_reason(exc))
    except (requests.RequestException, ValueError) as exc:
        return dict(base, error=type(exc).__name__)


_tls_reason = tls_reason


def cluster_view(replica, peer_token=None, outbound=None):
    """Every replica's own report (or unreachable), and who leads."""
    me = replica.status()
    peers = replica.peers
    if peers:
        with concurrent.futures.ThreadPoolExecutor(len(peers)) as pool:
            others = list(pool.map(lambda peer: _ask(peer, peer_token, outbound or PLAIN,
                                                     getattr(replica, "cluster_id", None)), peers))
    else:
        others = []
    replicas = sorted([me] + others, key=lambda r: r["id"])
    leaders = [r for r in replicas if r.get("role") == "leader" and r.get("reachable")]
    # Two replicas may both believe they lead for a moment: the higher term wins.
    leader = max(leaders, key=lambda r: r["term"])["id"] if leaders else me.get("leader")
    view = {"leader": leader, "self": replica.id, "replicas": replicas}
    membership = _leader_membership(next((r for r in others if r["id"] == leader), None), peer_token,
                                    outbound or PLAIN)
    try:
        view["membership"] = membership or replica.membership()
    except Exception:  # noqa: BLE001 - the view still shows every replica's own report
        pass
    return view


def _leader_membership(leader, token, outbound=PLAIN):
    """The members and their catch-up progress as the leader sees them (only it knows)."""
    if not leader or not leader.get("reachable") or not leader.get("api"):
        return None
    try:
        headers = {"Authorization": "Bearer " + token} if token else {}
        with outbound.session() as session:     # the cluster CA; the token goes to the leader only
            reply = session.get(leader["api"].rstrip("/") + "/shepherd/v1/members", params={"local": "1"},
                                headers=headers, timeout=PEER_TIMEOUT)
        reply.raise_for_status()
        return reply.json()
    except (requests.RequestException, ValueError):
        return None

