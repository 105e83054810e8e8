"""Refuse callers configured for another cluster (cluster_identity.py).

Clients, agents and the other replicas send the cluster id of their config in the
`Shepherd-Cluster-Id` header; one that names another cluster gets 421 with a sentence
naming both ids, before authentication (its token would be another cluster's too, and
"wrong cluster" is the message a person can act on). /healthz, /readyz and /version
answer anyone: /version tells a caller which cluster this is.
"""
from flask import request

from shepherd_ha import cluster_identity

from .errors import ApiError

OPEN_PATHS = frozenset(("/healthz", "/readyz", "/version", "/version/"))


def install(app, cluster_id):
    if not cluster_id:
        return

    @app.before_request
    def same_cluster():
        theirs = request.headers.get(cluster_identity.HEADER)
        if not theirs or theirs == cluster_id or request.path in OPEN_PATHS:
            return
        raise ApiError(421, cluster_identity.mismatch(cluster_id, theirs[:64], "the caller's config"),
                       "WrongCluster")
