"""At start, refuse a config whose cluster id is not the cluster's the servers run.

The replicas answer their cluster id in /version (anonymous). One answer naming another
cluster stops the agent with a message saying so; when no replica answers yet, the
agent starts anyway: every request it sends carries its cluster id, and a replica of
another cluster answers 421 (shepherd_ha/api/cluster_check.py), so it never registers there.
"""
import requests

from shepherd_ha.cluster_identity import mismatch

TIMEOUT = 2.0


def other_cluster(settings):
    """A sentence when a replica in settings.servers belongs to another cluster, else None."""
    if not settings.cluster_id:
        return None
    with requests.Session() as session:
        session.trust_env = False
        session.verify = settings.ca_file or True     # https: the cluster CA
        for server in settings.servers:
            try:
                answer = session.get(server.rstrip("/") + "/version", timeout=TIMEOUT).json()
            except (requests.RequestException, ValueError):
                continue
            theirs = answer.get("clusterId") if isinstance(answer, dict) else None
            if theirs and theirs != settings.cluster_id:
                return "%s (the replica at %s)" % (mismatch(theirs, settings.cluster_id, "this agent's config"),
                                                   server)
    return None
