"""The log grant's format, shared by the replicas that sign it (api/replica_credentials.py)
and the agents that verify it (agent/log_access.py).

    Authorization: Shepherd-Log-Grant v1.<base64url JSON claims>.<base64url Ed25519 signature>

The claims: node, namespace, pod, container, uid (the pod's), exp (Unix seconds). The
signature covers "v1.<claims>".

A metrics grant (`kubectl top pods`, GET /stats/pods on the agent) has the claims use
("pod-metrics"), node, namespace and pod ("" for all of them: the scope RBAC allowed
the caller) and exp; it has no container, so it opens no logs, and a log grant has no
use, so it opens no metrics.
"""
import base64
import json

GRANT_SCHEME = "Shepherd-Log-Grant"
GRANT_VERSION = "v1"
LOG_GRANT_SECONDS = 60
KEY_PATH = "/shepherd/v1/log-grant-key"
METRICS_USE = "pod-metrics"


def b64(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encode(claims, sign):
    """The header value for `claims`, signed with `sign(bytes) -> signature`."""
    signed = "%s.%s" % (GRANT_VERSION, b64(json.dumps(claims, sort_keys=True, separators=(",", ":")).encode()))
    return "%s %s.%s" % (GRANT_SCHEME, signed, b64(sign(signed.encode())))


def decode(header):
    """(signed bytes, signature, claims) of a header value, or None when it is no grant."""
    scheme, _, grant = (header or "").strip().partition(" ")
    if scheme.lower() != GRANT_SCHEME.lower():
        return None
    parts = grant.strip().split(".")
    if len(parts) != 3 or parts[0] != GRANT_VERSION:
        return None
    try:
        claims = json.loads(unb64(parts[1]))
        signature = unb64(parts[2])
    except ValueError:
        return None
    if not isinstance(claims, dict):
        return None
    return ("%s.%s" % (parts[0], parts[1])).encode(), signature, claims
