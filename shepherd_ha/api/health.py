"""Health, readiness, metrics, version and the cluster view."""
import concurrent.futures

import requests
from flask import Response, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

import shepherd_ha

from .bodies import dumps

PEER_TIMEOUT = 0.5


def register(app, replica, metrics, peer_token=None, log_grant_keys=None):
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

    @app.get("/version")
    def version():
        return Response(dumps({"version": shepherd_ha.__version__, "replica": replica.id}),
                        mimetype="application/json")

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
        return Response(dumps(cluster_view(replica, peer_token)), mimetype="application/json")


def _ask(peer, token=None):
    base = {"id": peer.id, "api": peer.api, "raft": peer.raft, "reachable": False, "role": "unknown",
            "term": None, "commitIndex": None, "appliedIndex": None, "revision": None}
    if not peer.api:
        return dict(base, error="no API address configured for this peer")
    try:
        headers = {"Authorization": "Bearer " + token} if token else {}
        with requests.Session() as session:
            session.trust_env = False   # no proxy or ~/.netrc from the environment: the token goes to the peer only
            reply = session.get(peer.api.rstrip("/") + "/shepherd/v1/replica", headers=headers, timeout=PEER_TIMEOUT)
        reply.raise_for_status()
        return dict(reply.json(), reachable=True)
    except (requests.RequestException, ValueError) as exc:
        return dict(base, error=type(exc).__name__)


def cluster_view(replica, peer_token=None):
    """Every replica's own report (or unreachable), and who leads."""
    me = replica.status()
    peers = replica.peers
    if peers:
        with concurrent.futures.ThreadPoolExecutor(len(peers)) as pool:
            others = list(pool.map(lambda peer: _ask(peer, peer_token), peers))
    else:
        others = []
    replicas = sorted([me] + others, key=lambda r: r["id"])
    leaders = [r for r in replicas if r.get("role") == "leader" and r.get("reachable")]
    # Two replicas may both believe they lead for a moment: the higher term wins.
    leader = max(leaders, key=lambda r: r["term"])["id"] if leaders else me.get("leader")
    return {"leader": leader, "self": replica.id, "replicas": replicas}
