"""Replica rotation, backoff and Retry-After for one logical call of the client, and
how transport failures are described (shepherd_ha/client/http_client.py uses them)."""
import logging
import ssl
import time

import requests
import urllib3

from ..backoff import Backoff
from .errors import NoReplicaReachable

log = logging.getLogger("shepherd_ha.client.http_client")

BACKOFF_START = 0.05
BACKOFF_MAX = 0.5
RETRY_AFTER_DEFAULT = 1.0    # a 429 without a usable Retry-After
RETRY_AFTER_MAX = 10.0       # never wait longer than this on one 429, whatever the server says
RETURN_HOME_SECONDS = 300.0  # a client spread by key, away from its first replica, tries it again after this


def _exception_chain(exc):
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        nxt = getattr(exc, "reason", None)
        if nxt is None and exc.args and isinstance(exc.args[0], BaseException):
            nxt = exc.args[0]
        if nxt is None or not isinstance(nxt, BaseException):
            nxt = exc.__cause__ or exc.__context__
        exc = nxt
    return seen


TLS_REFUSED = "TLS: the server's certificate"      # how describe_failure starts a verification failure


def _never_sent(exc):
    """True when the request certainly did not reach the server (a certificate that does
    not verify ends the handshake before any byte of the request leaves)."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    return any(isinstance(e, (urllib3.exceptions.NewConnectionError, ConnectionRefusedError,
                              ssl.SSLCertVerificationError))
               for e in _exception_chain(exc))


def _describe_tls(exc):
    """A TLS failure in words a person can act on, or None when it is not one."""
    chain = _exception_chain(exc)
    for e in chain:
        if isinstance(e, ssl.SSLCertVerificationError):
            why = getattr(e, "verify_message", None) or str(e)
            return ("%s does not verify (%s): is the cluster's CA file the right one (the config's "
                    "certificate-authority, sheepctl --certificate-authority)?" % (TLS_REFUSED, why))
    text = " ".join(str(e) for e in chain)
    if "WRONG_VERSION_NUMBER" in text or "wrong version number" in text:
        return "TLS handshake failed: the server does not speak TLS (an http:// server given as https://?)"
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS handshake failed (%s)" % text[:200]
    return None


def _is_read_timeout(exc):
    return any(isinstance(e, (requests.exceptions.ReadTimeout, urllib3.exceptions.ReadTimeoutError))
               for e in _exception_chain(exc))


def describe_failure(exc):
    """A short human description of a transport failure."""
    tls = _describe_tls(exc)
    if tls:
        return tls
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return "connect timed out"
    if isinstance(exc, (requests.exceptions.ReadTimeout, urllib3.exceptions.ReadTimeoutError)):
        return "read timed out"
    text = " ".join(str(e) for e in _exception_chain(exc))
    low = text.lower()
    if "refused" in low or "errno 111" in low or "errno 61" in low:
        return "connection refused"
    if "timed out" in low:
        return "timed out"
    if "name or service not known" in low or "nodename nor servname" in low \
            or "getaddrinfo" in low or "name resolution" in low:
        return "name resolution failed"
    if "no route to host" in low or "unreachable" in low:
        return "no route to host"
    if "reset" in low or "aborted" in low or "remotedisconnected" in low \
            or "closed" in low or "incomplete" in low or "broken" in low:
        return "connection closed by the server"
    return "connection failed (%s)" % type(exc).__name__


def retry_after_seconds(value):
    """Seconds to wait from a Retry-After header (whole seconds, as our replicas send;
    an HTTP date or garbage counts as the default), within [0, RETRY_AFTER_MAX]."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return RETRY_AFTER_DEFAULT
    if seconds != seconds:       # NaN
        return RETRY_AFTER_DEFAULT
    return min(max(seconds, 0.0), RETRY_AFTER_MAX)


def _summarize(failures):
    reasons = []
    for reason in failures.values():
        if reason not in reasons:
            reasons.append(reason)
    return ", ".join(reasons) or "no answer"


class Failover:
    """Replica rotation and backoff for one logical call."""

    def __init__(self, client, deadline_seconds=None, prefer=True):
        """prefer=False (a spread client's watch): the replica that answers does not become
        the one the client's other calls start on; four watches that failed over would
        otherwise pull an agent's heartbeats away from home with them."""
        self.client = client
        self.prefer = prefer
        self.order = client.order        # the servers' indexes in the order this client tries them
        self.n = len(self.order)
        self.pos = self.order.index(client._preferred % self.n)
        self._away_since = client._left_home_at if self.pos else None
        self.maybe_return_home()
        self.deadline_seconds = client.retry_deadline if deadline_seconds is None else deadline_seconds
        self.reset()

    def maybe_return_home(self):
        """(A spread client.) Away from its first replica for RETURN_HOME_SECONDS: try it
        first again (and in as long again if it still fails), so a fleet spreads back once
        a replica returns. A call asks as it starts, a watch also before it reconnects."""
        if self.pos and self.client._spread and \
                time.monotonic() - (self._away_since or 0) >= RETURN_HOME_SECONDS:
            self.pos, self._away_since = 0, time.monotonic()
            if self.prefer:
                self.client._left_home_at = self._away_since

    @property
    def idx(self):
        """The index (in client.servers) of the replica to try now."""
        return self.order[self.pos]

    def _next(self):
        self.pos = (self.pos + 1) % self.n

    def reset(self):
        self.deadline = time.monotonic() + self.deadline_seconds
        self.backoff = Backoff(BACKOFF_START, BACKOFF_MAX)
        self.failures = {}
        self.tried = set()
        self.last_refusal = None
        self.busy_until = {}      # replica index -> when its 429's Retry-After ends

    @property
    def server(self):
        return self.client.servers[self.idx]

    def remaining(self):
        return self.deadline - time.monotonic()

    def answered(self):
        if not self.pos:
            self._away_since = None
        elif self._away_since is None:
            self._away_since = time.monotonic()         # it just left home
        self.client.last_server = self.server
        if self.prefer:
            if self.pos and self.client._preferred == self.order[0]:
                self.client._left_home_at = time.monotonic()
            self.client._preferred = self.idx

    def rotate(self):
        """Move to the next replica without counting a failure."""
        self._next()

    def failed(self, reason, error_503=None):
        """Record a failure of the current replica; sleep and move to the
        next one, or raise when the deadline has passed (every replica having
        been tried at least once)."""
        self.failures[self.server] = reason
        self.tried.add(self.idx)
        if error_503 is not None:
            self.last_refusal = error_503
        log.debug("replica %s failed: %s", self.server, reason)
        wrong_ca = len(self.tried) >= self.n and all(str(r).startswith(TLS_REFUSED)
                                                      for r in self.failures.values())
        # waiting does not make a certificate verify: say so at once
        if wrong_ca or (len(self.tried) >= self.n and time.monotonic() + self.backoff.peek() >= self.deadline):
            if self.last_refusal is not None:
                raise self.last_refusal
            raise NoReplicaReachable(self.client.servers, _summarize(self.failures))
        time.sleep(self.backoff.next())
        self._next()

    def throttled(self, err):
        """A 429 from the current replica: it is overloaded and was not given the
        request. Move on to a replica that has not asked us to wait; when all have,
        wait until the first one's Retry-After ends (bounded), or raise the 429 when
        that would pass the deadline."""
        now = time.monotonic()
        self.busy_until[self.idx] = now + retry_after_seconds(err.retry_after)
        self.failures[self.server] = "429 %s" % err.message
        self.tried.add(self.idx)
        self.last_refusal = err
        log.debug("replica %s is overloaded (429): %s", self.server, err.message)
        if now >= self.deadline:
            raise err
        for step in range(1, self.n + 1):
            pos = (self.pos + step) % self.n
            if self.busy_until.get(self.order[pos], 0) <= now:
                self.pos = pos
                return
        idx = min(self.busy_until, key=self.busy_until.get)
        wait = self.busy_until[idx] - now
        if now + wait >= self.deadline:
            raise err
        time.sleep(wait)
        self.pos = self.order.index(idx)
