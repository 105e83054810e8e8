"""Who may read container logs from this agent, when the API wants tokens.

A replica asking for `pods/{name}/log` shows a log grant (shepherd_ha/api/
replica_credentials.py): an Ed25519 signature over this node's name, the namespace,
pod and container, the pod's uid and an expiry a minute ahead. The agent verifies it
with the replicas' public keys (one; two while the Raft secret is rotated), which it
fetches from the API with its own token (GET /shepherd/v1/log-grant-key) and keeps; a grant that does not verify makes it fetch the
key again, at most every KEY_REFRESH_SECONDS (the key changes with the Raft secret).
The agent holds no secret and asks the API nothing per request, so logs stay readable
while the control plane is down, and what a replica shows it is worth nothing to the
API: no token ever goes to an address read from a Node object (issue 14, finding 5).
"""
import threading
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from shepherd_ha import log_grants
from shepherd_ha.client import Client, ClientError
from shepherd_ha.log_grants import GRANT_SCHEME, KEY_PATH, LOG_GRANT_SECONDS, METRICS_USE, unb64
KEY_REFRESH_SECONDS = 30.0
CLOCK_SKEW_SECONDS = 60.0       # between a replica's clock and this node's


class CannotCheck(Exception):
    """No replica answered: the agent has no key to verify grants with."""


class LogAccess:
    def __init__(self, servers, node_name, token, clock=time.time, monotonic=time.monotonic, fetch_key=None,
                 cluster_id=None, ca_file=None):
        self.node_name = node_name
        self._clock, self._monotonic = clock, monotonic
        # cluster_id: the key comes only from replicas of this agent's cluster (a 421 otherwise)
        self._fetch_key = fetch_key or (lambda: _fetch_key(servers, token, cluster_id, ca_file))
        self._lock = threading.Lock()
        self._keys = None               # the replicas' public keys (several while the secret is rotated)
        self._fetched_at = None

    def _public_keys(self, refresh=False):
        with self._lock:
            stale = self._fetched_at is None or self._monotonic() - self._fetched_at >= KEY_REFRESH_SECONDS
            if self._keys is None or (refresh and stale):
                try:
                    fetched = self._fetch_key()
                    keys = [Ed25519PublicKey.from_public_bytes(unb64(k))
                            for k in ([fetched] if isinstance(fetched, str) else fetched)]
                except (ClientError, ValueError, TypeError) as exc:
                    if self._keys is None:
                        raise CannotCheck("cannot fetch the replicas' log grant key: %s" % exc)
                else:
                    self._keys = keys
                self._fetched_at = self._monotonic()
            return self._keys

    def may_read(self, authorization, namespace, pod, container):
        """None when the Authorization header grants this container's logs, else why not
        (a sentence); CannotCheck when no key could be fetched."""
        decoded = log_grants.decode(authorization)
        if decoded is None:
            if (authorization or "").strip().lower().startswith(GRANT_SCHEME.lower()):
                return "a malformed log grant"
            return "no log grant (%s ...) from a replica" % GRANT_SCHEME
        # use None: a metrics grant (use "pod-metrics") opens no logs
        return self._check(decoded, {"use": None, "node": self.node_name, "namespace": namespace, "pod": pod,
                                     "container": container})

    def may_read_metrics(self, authorization, namespace="", pod=""):
        """None when the header grants the usage of the pods of `namespace` ("": all
        namespaces), only `pod` when given, on this node; else why not."""
        decoded = log_grants.decode(authorization)
        if decoded is None:
            return "no metrics grant (%s ...) from a replica" % GRANT_SCHEME
        return self._check(decoded, {"use": METRICS_USE, "node": self.node_name, "namespace": namespace or "",
                                     "pod": pod or ""})

    def _check(self, decoded, wanted):
        signed, signature, claims = decoded
        if not self._verifies(signed, signature):
            return "a log grant not signed by this cluster's replicas"
        for field, value in wanted.items():
            if claims.get(field) != value:
                return "a grant for %s %r, not %r" % (field, claims.get(field), value)
        expiry, now = claims.get("exp"), self._clock()
        if not isinstance(expiry, int) or expiry < now - CLOCK_SKEW_SECONDS:
            return "an expired log grant"
        if expiry > now + LOG_GRANT_SECONDS + CLOCK_SKEW_SECONDS:
            return "a log grant that expires too far ahead"
        return None

    def pod_uid(self, authorization):
        """The pod uid a (verified) grant names, or None."""
        decoded = log_grants.decode(authorization)
        return (decoded[2].get("uid") or None) if decoded else None

    def _verifies(self, signed, signature):
        for refresh in (False, True):
            for key in self._public_keys(refresh):
                try:
                    key.verify(signature, signed)
                    return True
                except InvalidSignature:
                    continue
        return False


def _fetch_key(servers, token, cluster_id=None, ca_file=None):
    # ca_file: the replicas' certificates are verified against the cluster CA (https servers)
    client = Client(servers, timeout=2.0, retry_deadline=4.0, token=token, cluster_id=cluster_id, ca_file=ca_file)
    try:
        answer = client.request("GET", KEY_PATH)
    finally:
        client.close()
    keys = answer.get("keys") if isinstance(answer, dict) and answer.get("algorithm") == "Ed25519" else None
    if not (isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys)):
        raise ValueError("the API's %s answer is not a list of Ed25519 keys" % KEY_PATH)
    return keys
