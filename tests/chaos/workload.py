"""The chaos workload: N logical client processes (threads) doing register operations on
ConfigMaps k00..kNN in namespace "chaos" through shepherd_ha.client.Client, each over the
replica URLs in its own random order, every operation recorded (tests/chaos/recorder.py).

Outcome of a write (the history format's rules):
  2xx -> ok; 409/404/422 and other 4xx -> fail (the server decided, nothing applied);
  503 with Shepherd-Outcome: not-applied -> fail, but only when no earlier attempt of the
  same operation was ambiguous; timeouts, lost connections, OutcomeUnknown, 503 unknown,
  an exceeded deadline -> unknown.
The Client retries a write on another replica with the same Idempotency-Key; a
RecordingSession sees every attempt, so an ambiguous first attempt makes the operation
unknown even when the last attempt was a clean "not-applied".
"""
import random
import threading
import time

import requests

from shepherd_ha.client import ApiError, Client, NoReplicaReachable, OutcomeUnknown
from shepherd_ha.client.http_client import _never_sent

from . import credentials

NAMESPACE = "chaos"
GENERATED_LABEL = "chaos-op"
# op -> weight; a cas also records the linearizable read it starts with
DEFAULT_MIX = (("create", 20), ("cas", 30), ("delete", 10), ("read", 15), ("read_local", 10),
               ("create_generated", 15))
REQUEST_TIMEOUT = 2.5        # s per HTTP attempt: above the server's 2 s write timeout, so it answers 503
OP_DEADLINE = 8.0            # s per operation, all attempts included


def key_names(n):
    width = max(2, len(str(n - 1)))
    return ["k%0*d" % (width, i) for i in range(n)]


def configmap(name, value=None, generate=None, labels=None):
    meta = {"namespace": NAMESPACE}
    if name:
        meta["name"] = name
    if generate:
        meta["generateName"] = generate
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"value": value or ""}}


def value_of(obj):
    return ((obj or {}).get("data") or {}).get("value")


class RecordingSession(requests.Session):
    """A requests.Session that notes whether any attempt of the current operation may have
    reached the server without a clean answer (so it may have been applied)."""

    def __init__(self):
        super().__init__()
        self.trust_env = False
        self.ambiguous = False
        self.last_url = None

    def begin(self):
        self.ambiguous = False
        self.last_url = None

    def request(self, method, url, *args, **kwargs):
        self.last_url = url
        try:
            resp = super().request(method, url, *args, **kwargs)
        except requests.RequestException as exc:
            if not _never_sent(exc):
                self.ambiguous = True
            raise
        if resp.status_code == 503 and resp.headers.get("Shepherd-Outcome") != "not-applied":
            self.ambiguous = True
        return resp


def classify(exc, session):
    """(outcome, short reason) of a write that raised `exc`."""
    if isinstance(exc, ApiError):
        if exc.code == 503:
            if exc.outcome == "not-applied" and not session.ambiguous:
                return "fail", "503 not-applied"
            return "unknown", "503 %s" % (exc.outcome or "no outcome")
        if 400 <= exc.code < 500:
            # The server decided: with the same Idempotency-Key a retry of an applied write
            # must replay its first answer, so this is "not applied" even after an ambiguous
            # attempt (said in the reason, for the checker's evidence).
            return "fail", "%d %s%s" % (exc.code, exc.reason,
                                        ", answered to a retry after an ambiguous attempt" if session.ambiguous else "")
        return "unknown", "%d %s" % (exc.code, exc.reason)
    if isinstance(exc, OutcomeUnknown):
        return "unknown", "outcome unknown"
    if isinstance(exc, NoReplicaReachable):
        return "unknown", "no replica reachable: %s" % exc.cause[:80]
    return "unknown", "%s: %s" % (type(exc).__name__, str(exc)[:80])


class ClientProcess(threading.Thread):
    """One logical process: one operation at a time until stopped."""

    def __init__(self, pid, urls, keys, recorder, stop, seed, mix=DEFAULT_MIX, pace=0.0, ca_file=None):
        """urls: {replica id: API URL}; ca_file: the cluster CA (https)."""
        super().__init__(name="chaos-client-%d" % pid, daemon=True)
        self.pid = pid
        self.rng = random.Random(seed)
        order = sorted(urls.values())
        self.rng.shuffle(order)
        self.replica_of = {u.rstrip("/"): ident for ident, u in urls.items()}
        self.session = RecordingSession()
        self.session.verify = ca_file or True
        self.client = Client(order, timeout=REQUEST_TIMEOUT, retry_deadline=OP_DEADLINE, session=self.session,
                             user_agent="shepherd-chaos/p%d" % pid, token=credentials.token())
        self.keys = keys
        self.recorder = recorder
        self.stop = stop
        self.ops, self.weights = zip(*mix)
        self.pace = pace
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                op = self.rng.choices(self.ops, self.weights)[0]
                getattr(self, "do_" + op)()
                if self.pace:
                    self.stop.wait(self.rng.uniform(0, 2 * self.pace))
        except Exception as exc:  # noqa: BLE001 - reported by the harness, never silently lost
            self.error = "%s: %s" % (type(exc).__name__, exc)
            raise
        finally:
            self.client.close()

    # ---- recording ----

    def _start(self, op, key, **fields):
        self.session.begin()
        ident = self.recorder.next_id()
        return dict(fields, id=ident, process=self.pid, op=op, key=key, invoke=self.recorder.now())

    def _finish(self, rec, outcome, error=None):
        rec["outcome"] = outcome
        rec["complete"] = None if outcome == "unknown" else self.recorder.now()
        url = self.session.last_url or ""
        base = url.split("/api/", 1)[0].rstrip("/")
        rec["replica"] = self.replica_of.get(base)
        if error:
            rec["error"] = error
        self.recorder.op(rec)
        return rec

    def _value(self, rec):
        return "p%d-%d" % (self.pid, rec["id"])

    # ---- operations ----

    def _read(self, op, key):
        rec = self._start(op, key, value=None)
        try:
            obj = self.client.get("configmaps", key, namespace=NAMESPACE, consistent=(op == "read"))
        except ApiError as exc:
            if exc.code == 404:
                return self._finish(rec, "ok"), None
            return self._finish(rec, "fail", "%d %s" % (exc.code, exc.reason)), None
        except Exception as exc:  # noqa: BLE001 - a read that got no answer changed nothing
            return self._finish(rec, "fail", classify(exc, self.session)[1]), None
        rec["value"] = value_of(obj)
        return self._finish(rec, "ok"), obj

    def do_read(self):
        self._read("read", self.rng.choice(self.keys))

    def do_read_local(self):
        self._read("read_local", self.rng.choice(self.keys))

    def do_create(self):
        key = self.rng.choice(self.keys)
        rec = self._start("create", key)
        rec["value"] = self._value(rec)
        try:
            self.client.create("configmaps", configmap(key, rec["value"]), namespace=NAMESPACE)
        except Exception as exc:  # noqa: BLE001 - every failure has an outcome
            return self._finish(rec, *classify(exc, self.session))
        return self._finish(rec, "ok")

    def do_cas(self):
        key = self.rng.choice(self.keys)
        read, obj = self._read("read", key)
        if read["outcome"] != "ok" or obj is None or self.stop.is_set():
            return
        rec = self._start("cas", key, expected=read["value"])
        rec["value"] = self._value(rec)
        new = dict(obj, data=dict(obj.get("data") or {}, value=rec["value"]))
        try:
            self.client.replace("configmaps", new)   # metadata.resourceVersion is the precondition
        except Exception as exc:  # noqa: BLE001
            return self._finish(rec, *classify(exc, self.session))
        return self._finish(rec, "ok")

    def do_delete(self):
        key = self.rng.choice(self.keys)
        rec = self._start("delete", key, value=None)
        try:
            self.client.delete("configmaps", key, namespace=NAMESPACE)
        except ApiError as exc:
            if exc.code == 404:
                rec["deleted"] = False
                return self._finish(rec, "ok")
            return self._finish(rec, *classify(exc, self.session))
        except Exception as exc:  # noqa: BLE001
            return self._finish(rec, *classify(exc, self.session))
        rec["deleted"] = True
        return self._finish(rec, "ok")

    def do_create_generated(self):
        rec = self._start("create_generated", None)
        rec["value"] = str(rec["id"])
        body = configmap(None, "gen-%d" % rec["id"], generate="g-", labels={GENERATED_LABEL: str(rec["id"])})
        try:
            self.client.create("configmaps", body, namespace=NAMESPACE)
        except Exception as exc:  # noqa: BLE001
            return self._finish(rec, *classify(exc, self.session))
        return self._finish(rec, "ok")


class Workload:
    """Starts and stops the client processes."""

    def __init__(self, urls, recorder, clients=4, keys=8, seed=0, pace=0.0, ca_file=None):
        self.stop = threading.Event()
        self.keys = key_names(keys)
        self.processes = [ClientProcess(i, urls, self.keys, recorder, self.stop, seed * 1000 + i, pace=pace,
                                        ca_file=ca_file)
                          for i in range(clients)]

    def start(self):
        for p in self.processes:
            p.start()

    def finish(self, timeout=OP_DEADLINE + REQUEST_TIMEOUT + 5):
        """Stop after the operations in flight; returns the errors of crashed processes."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for p in self.processes:
            p.join(max(0.1, deadline - time.monotonic()))
        stuck = [p.name for p in self.processes if p.is_alive()]
        errors = ["%s crashed: %s" % (p.name, p.error) for p in self.processes if p.error]
        if stuck:
            errors.append("client thread(s) still running after %.0f s: %s" % (timeout, ", ".join(stuck)))
        return errors
