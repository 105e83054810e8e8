"""Figures measured during faults, through the HTTP API.

GapProbe: one writer that merge-patches one ConfigMap as fast as --gap-rate allows, over
  a keep-alive connection with a short timeout, moving to the next replica on any failure;
  it keeps the time of every acknowledged write. The write gap of a leader kill is the
  first ack after the kill minus the last ack before it (as bench/bench_failover.py).
ControllerProbe: before a leader kill, a deployment is scaled down; right after the kill
  it is scaled up (the request lands on the new leader); pod watches on the survivors (open from before the kill) timestamp events on
  arrival. The new leader's controllers are active when a survivor reports role leader
  with its controllers active in a newer epoch; their first write is the first pod event
  after the kill that only a controller makes (a pod the deployment created, or a pod
  newly bound to a node); see bench/bench_controller_failover.py.
"""
import bisect
import http.client
import json
import ssl
import threading
import time
import urllib.parse
import uuid

import requests

from . import credentials

PROBE_NAMESPACE = "chaos-probe"
PROBE_NAME = "gap-probe"
CTL_NAMESPACE = "chaos-ctl"
CTL_DEPLOYMENT = "ctl-probe"
CTL_LOW, CTL_HIGH = 1, 3
CTL_BURST = 12          # pods asked for right before a pause


class GapProbe(threading.Thread):
    def __init__(self, urls, rate=50.0, timeout=0.5, ca_file=None):
        super().__init__(name="gap-probe", daemon=True)
        self.urls = list(urls)
        self.ca_file = ca_file
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.timeout = timeout
        self.acks = []
        self.failures = 0
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def run(self):
        conns = {}
        current = 0
        path = "/api/v1/namespaces/%s/configmaps/%s" % (PROBE_NAMESPACE, PROBE_NAME)
        n = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            n += 1
            body = json.dumps({"data": {"n": str(n)}}).encode()
            headers = dict(credentials.HEADERS, **{"Content-Type": "application/merge-patch+json",
                                                   "Idempotency-Key": uuid.uuid4().hex})
            url = self.urls[current]
            conn = conns.get(url)
            if conn is None:
                parts = urllib.parse.urlsplit(url)
                if parts.scheme == "https":
                    conn = conns[url] = http.client.HTTPSConnection(
                        parts.hostname, parts.port, timeout=self.timeout,
                        context=ssl.create_default_context(cafile=self.ca_file))
                else:
                    conn = conns[url] = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout)
            try:
                conn.request("PATCH", path, body, headers)
                resp = conn.getresponse()
                resp.read()
                ok = 200 <= resp.status < 300
                if resp.will_close:
                    conn.close()
                    conns.pop(url, None)
            except (OSError, http.client.HTTPException):
                conn.close()
                conns.pop(url, None)
                ok = False
            if ok:
                with self._lock:
                    self.acks.append(time.monotonic())
            else:
                self.failures += 1
                current = (current + 1) % len(self.urls)
                self.stop.wait(0.01)
                continue
            if self.interval:
                next_at = max(next_at + self.interval, time.monotonic() - 1.0)
                self.stop.wait(max(0.0, next_at - time.monotonic()))
        for conn in conns.values():
            conn.close()

    def wait_flowing(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                last = self.acks[-1] if self.acks else None
            if last is not None and time.monotonic() - last < 0.3:
                return True
            time.sleep(0.05)
        return False

    def gap_around(self, t, wait=20.0):
        """Seconds between the last ack before t and the first after it (waiting up to
        `wait` s for that one); None when no ack came."""
        deadline = time.monotonic() + wait
        while True:
            with self._lock:
                i = bisect.bisect_right(self.acks, t)
                before = self.acks[i - 1] if i else None
                after = self.acks[i] if i < len(self.acks) else None
            if after is not None or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        if before is None or after is None:
            return None
        return after - before


def deployment_body(name, replicas, app):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}},
                                  "spec": {"containers": [{"name": "app", "image": "registry.example/chaos:1.0",
                                                           "resources": {"requests": {"cpu": "10m",
                                                                                      "memory": "8Mi"}}}]}}}}


def live_pods(client, namespace, app):
    items = (client.list("pods", namespace=namespace, label_selector="app=" + app) or {}).get("items") or []
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


class PodWatch(threading.Thread):
    """Pod events of one namespace on one replica from `revision`, timestamped on arrival."""

    def __init__(self, url, namespace, revision, verify=True):
        super().__init__(name="ctl-watch", daemon=True)
        self.url, self.namespace, self.revision = url, namespace, revision
        self.verify = verify
        self.events = []
        self.resp = None

    def run(self):
        try:
            self.resp = requests.get("%s/api/v1/namespaces/%s/pods" % (self.url, self.namespace), stream=True,
                                     verify=self.verify,
                                     timeout=(2, 70), params={"watch": "1", "resourceVersion": str(self.revision),
                                                              "timeoutSeconds": "60"},
                                     headers=credentials.HEADERS)
            for line in self.resp.iter_lines():
                if line.strip():
                    self.events.append((time.monotonic(), json.loads(line)))
        except Exception:  # noqa: BLE001 - the stream ends when we close it or the replica dies
            pass

    def close(self):
        """Stop the stream without waiting: closing a response another thread is reading can
        block for seconds, so shut its socket down first and close in the background."""
        resp = self.resp
        if resp is None:
            return
        try:
            resp.raw.shutdown()          # urllib3 >= 2.3: wakes the blocked read
        except Exception:  # noqa: BLE001 - older urllib3: the background close does it
            pass
        threading.Thread(target=resp.close, name="ctl-watch-close", daemon=True).start()


def controller_writes(events):
    """[(arrival, revision)] of events only a controller makes: a pod created with an owner
    (deployment controller) or a pod newly bound to a node (scheduler)."""
    bound = {}
    out = []
    for t, e in events:
        obj = e.get("object") or {}
        meta = obj.get("metadata") or {}
        if e.get("type") not in ("ADDED", "MODIFIED") or not meta.get("resourceVersion"):
            continue
        node = (obj.get("spec") or {}).get("nodeName")
        uid = meta.get("uid")
        rv = int(meta["resourceVersion"])
        if e["type"] == "ADDED" and meta.get("ownerReferences"):
            out.append((t, rv))
        elif e["type"] == "MODIFIED" and node and bound.get(uid) is False:
            out.append((t, rv))
        bound[uid] = bool(node)
    return out


class ControllerProbe:
    """Measures kill -> new leader's controllers active -> their first write."""

    def __init__(self, cluster, client, say=print):
        self.cluster = cluster
        self.client = client
        self.say = say

    def setup(self):
        self.client.create("deployments", deployment_body(CTL_DEPLOYMENT, CTL_LOW, CTL_DEPLOYMENT),
                           namespace=CTL_NAMESPACE)

    def arm(self, victim, wait_low=15.0):
        """Before killing `victim`: scale low, wait for it, open watches on the survivors.
        Returns a token for fire()."""
        self.client.scale("deployments", CTL_DEPLOYMENT, CTL_LOW, namespace=CTL_NAMESPACE)
        deadline = time.monotonic() + wait_low
        while time.monotonic() < deadline:
            try:
                if len(live_pods(self.client, CTL_NAMESPACE, CTL_DEPLOYMENT)) == CTL_LOW:
                    break
            except Exception:  # noqa: BLE001 - measured anyway
                pass
            time.sleep(0.2)
        urls = self.cluster.urls()
        survivors = {i: u for i, u in urls.items() if i != victim}
        revisions = [s["revision"] for i, s in self.cluster.states().items() if s and i != victim]
        revision = max(revisions) if revisions else 0
        watches = [PodWatch(u, CTL_NAMESPACE, revision, self.cluster.verify) for u in survivors.values()]
        for w in watches:
            w.start()
        time.sleep(0.2)
        return {"watches": watches, "survivors": list(survivors)}

    def fire(self):
        """Right after the kill: ask for more pods (the client retries until the new leader
        takes the request), so the new leader's controllers have work that the old one
        cannot have done already."""
        def scale():
            try:
                self.client.scale("deployments", CTL_DEPLOYMENT, CTL_HIGH, namespace=CTL_NAMESPACE)
            except Exception as exc:  # noqa: BLE001 - the figure is then missing, and says why
                self.say("    controller probe: scale-up failed: %s" % exc)
        threading.Thread(target=scale, name="ctl-probe-scale", daemon=True).start()

    def burst(self, replicas=CTL_BURST):
        """Give the leader's controllers work right now (a scale-up they must act on), so a
        pause that follows at once catches them mid-reconcile: when the paused leader
        resumes, deposed, their next write carries the old epoch and must be fenced."""
        for attempt in range(5):      # a scale races the controllers' own writes: 409, try again
            try:
                self.client.scale("deployments", CTL_DEPLOYMENT, replicas, namespace=CTL_NAMESPACE)
                return True
            except Exception as exc:  # noqa: BLE001 - the pause goes on; the record says so
                last = exc
        self.say("    controller burst before the pause failed: %s" % last)
        return False

    def measure(self, token, old_term, t_kill, timeout=15.0):
        """{"elected": s, "active": s, "first_write": s} from the kill (None when not seen)."""
        t_elected = t_active = None
        deadline = t_kill + timeout
        while time.monotonic() < deadline and t_active is None:
            for ident in token["survivors"]:
                st = self.cluster.state(ident, timeout=0.3)
                now = time.monotonic()
                if not st or st.get("role") != "leader" or st.get("term", 0) <= old_term:
                    continue
                t_elected = t_elected or now
                ctl = st.get("controllers") or {}
                if ctl.get("active") and (ctl.get("epoch") or [0])[0] > old_term:
                    t_active = now
                    break
            time.sleep(0.01)
        # The scale-up was sent after the kill, so the old leader cannot have acted on it:
        # every controller write in the watched namespace arriving after the kill is the
        # new leader's (the poll above only bounds "active" to within one round of polls).
        t_write = None
        end = time.monotonic() + 5.0
        while time.monotonic() < end and t_write is None:
            hits = [t for w in token["watches"] for t, _ in controller_writes(list(w.events)) if t > t_kill]
            t_write = min(hits) if hits else None
            time.sleep(0.02)
        for w in token["watches"]:
            w.close()
        return {"elected": None if t_elected is None else t_elected - t_kill,
                "active": None if t_active is None else t_active - t_kill,
                "first_write": None if t_write is None else t_write - t_kill}
