"""What a replica shows others: the peer token (replica status) and log grants (agents).

Both come from the Raft password and the cluster's salt through scrypt (N=2^15, r=8:
~90 ms and 32 MiB per try, once per process), then HKDF. Before, the peer token was an
HMAC of the Raft password, 5.4 us per guess: an offline oracle for the password for
anyone who saw it (issue 14, finding 5). Now a guess costs what scrypt costs, on top of
a password that is generated (32 random bytes) or at least ~128 bits (raft_secrets).

- The peer token goes only to the other replicas' API URLs from --peers (never to an
  address read from the store), and lets them read replica status and single pods.
- A log grant is what a replica shows an agent for `pods/{name}/log`, instead of any
  token: an Ed25519 signature over (node, namespace, pod, container, pod uid, expiry
  LOG_GRANT_SECONDS ahead). The agent verifies it with the public key it fetched from
  the API (GET /shepherd/v1/log-grant-key, with its own token) and serves exactly that
  container of that pod on that node until the expiry. A grant is worth nothing to the
  API, so a Node whose address points somewhere else collects nothing it can use there,
  and the agent holds no secret: it cannot mint grants for other nodes.
"""
import hashlib
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from shepherd_ha import log_grants
from shepherd_ha.log_grants import LOG_GRANT_SECONDS, b64  # noqa: F401  (LOG_GRANT_SECONDS: for callers)
from shepherd_ha.store.raft_secrets import salt_bytes

SCRYPT = dict(n=2 ** 15, r=8, p=1, maxmem=64 * 1024 * 1024)
_CONTEXT = b"shepherd-ha/replica-credentials/v1/"


def _expand(master, purpose):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_CONTEXT + purpose).derive(master)


def _derive(password, salt):
    master = hashlib.scrypt(password.encode(), salt=_CONTEXT + salt_bytes(salt), dklen=32, **SCRYPT)
    signer = Ed25519PrivateKey.from_private_bytes(_expand(master, b"log-grant-key"))
    public = b64(signer.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))
    return _expand(master, b"peer-token").hex(), signer, public


class ReplicaCredentials:
    """From the Raft password (what this replica shows) and the passwords it also
    accepts while the secret is rotated (what it recognises from the others)."""

    def __init__(self, password, salt, also_accepted=()):
        self.peer_token, self._signer, self.log_grant_key = _derive(password, salt)
        others = [_derive(p, salt) for p in dict.fromkeys(also_accepted) if p != password]
        self.accepted_peer_tokens = [self.peer_token] + [token for token, _, _ in others]
        self.log_grant_keys = [self.log_grant_key] + [key for _, _, key in others]

    def log_grant(self, node, namespace, pod, container, pod_uid, now=None):
        """The Authorization header value for one log request to `node`'s agent."""
        claims = {"node": node, "namespace": namespace, "pod": pod, "container": container, "uid": pod_uid or "",
                  "exp": int(now if now is not None else time.time()) + LOG_GRANT_SECONDS}
        return log_grants.encode(claims, self._signer.sign)

    def metrics_grant(self, node, namespace="", pod="", now=None):
        """The Authorization header value for one usage read (GET /stats/pods) from `node`'s
        agent: the pods of `namespace` ("" all), only `pod` when given."""
        claims = {"use": log_grants.METRICS_USE, "node": node, "namespace": namespace or "", "pod": pod or "",
                  "exp": int(now if now is not None else time.time()) + LOG_GRANT_SECONDS}
        return log_grants.encode(claims, self._signer.sign)
