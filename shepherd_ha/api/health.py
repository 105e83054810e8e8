"""Health, readiness, metrics, version and the cluster view."""
import concurrent.futures

import requests
from flask import Response, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

import shepherd_ha
from shepherd_ha.tls.outbound import PLAIN

from .bodies import dumps

PEER_TIMEOUT = 0.5


def register(app, replica, metrics, peer_token=None, outbound=None):
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

    @app.get("/shepherd/v1/cluster")
    def cluster():
        return Response(dumps(cluster_view(replica, peer_token, outbound)), mimetype="application/json")


def _ask(peer, token=None, outbound=PLAIN):
    base = {"id": peer.id, "api": peer.api, "raft": peer.raft, "reachable": False, "role": "unknown",
            "term": None, "commitIndex": None, "appliedIndex": None, "revision": None}
    if not peer.api:
        return dict(base, error="no API address configured for this peer")
    try:
        headers = {"Authorization": "Bearer " + token} if token else {}
        with outbound.session() as session:    # the cluster CA; no proxy or ~/.netrc from the environment
            reply = session.get(peer.api.rstrip("/") + "/shepherd/v1/replica", headers=headers, timeout=PEER_TIMEOUT)
        reply.raise_for_status()
        return dict(reply.json(), reachable=True)
    except requests.exceptions.SSLError as exc:
        return dict(base, error="TLS: %s" % _tls_reason(exc))
    except (requests.RequestException, ValueError) as exc:
        return dict(base, error=type(exc).__name__)


def _tls_reason(exc):
    text = str(exc)
    for marker in ("certificate verify failed: ", "doesn't match", "WRONG_VERSION_NUMBER"):
        if marker in text:
            return text[text.index(marker):].split("(_ssl")[0].split("')")[0].strip()[:200]
    return "handshake failed"


def cluster_view(replica, peer_token=None, outbound=None):
    """Every replica's own report (or unreachable), and who leads."""
    me = replica.status()
    peers = replica.peers
    if peers:
        with concurrent.futures.ThreadPoolExecutor(len(peers)) as pool:
            others = list(pool.map(lambda peer: _ask(peer, peer_token, outbound or PLAIN), peers))
    else:
        others = []
    replicas = sorted([me] + others, key=lambda r: r["id"])
    leaders = [r for r in replicas if r.get("role") == "leader" and r.get("reachable")]
    # Two replicas may both believe they lead for a moment: the higher term wins.
    leader = max(leaders, key=lambda r: r["term"])["id"] if leaders else me.get("leader")
    return {"leader": leader, "self": replica.id, "replicas": replicas}
