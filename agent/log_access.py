"""Who may read container logs from this agent, when the API wants tokens.

A replica asking for `pods/{name}/log` shows its own token (derived from the Raft
password; shepherd_ha/api/auth.py). The agent holds no token table of its own: it asks
the API whether the token it was shown may read the pod (that token's own GET of the
pod, served from a replica's local state), as the kubelet asks the API server to review
tokens. A token found good is trusted for a short while, so a follower that reconnects
does not cost a request each time.
"""
import hashlib
import threading
import time

from shepherd_ha.client import ApiError, Client, ClientError

TRUST_SECONDS = 30.0
MAX_REMEMBERED = 1000


class CannotCheck(Exception):
    """No replica answered: the agent cannot tell whether the token is good."""


class LogAccess:
    def __init__(self, servers, clock=time.monotonic, client_factory=None, ca_file=None):
        self._clock = clock
        self._client_factory = client_factory or (lambda token: Client(servers, timeout=2.0, retry_deadline=4.0,
                                                                       token=token, ca_file=ca_file))
        self._lock = threading.Lock()
        self._good = {}      # (token digest, namespace, pod) -> trusted until

    def may_read(self, token, namespace, pod):
        """True when the token may read the pod, False when the API refuses it;
        CannotCheck when no replica could be asked."""
        key = (hashlib.sha256(token.encode()).digest(), namespace, pod)
        now = self._clock()
        with self._lock:
            if self._good.get(key, 0.0) > now:
                return True
        client = self._client_factory(token)
        try:
            client.get("pods", pod, namespace=namespace, consistent=False)
        except ApiError as exc:
            if exc.code in (401, 403):
                return False
            if exc.code != 404:         # 404: the token may read pods; the log lookup says "not found"
                raise CannotCheck("the API answered %d: %s" % (exc.code, exc))
        except ClientError as exc:
            raise CannotCheck(str(exc))
        finally:
            client.close()
        with self._lock:
            if len(self._good) >= MAX_REMEMBERED:
                self._good = {k: t for k, t in self._good.items() if t > now}
                if len(self._good) >= MAX_REMEMBERED:
                    self._good.clear()
            self._good[key] = now + TRUST_SECONDS
        return True
