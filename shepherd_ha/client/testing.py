"""An in-memory fake of the Shepherd HA HTTP API, for unit tests.

It mimics docs/api.md closely enough to test clients (sheepctl, the node
agent): objects in a dict, revisions, 404/409/410/415/429/503 answers,
Idempotency-Key replay, merge patch, the status and scale subresources, and
newline-delimited JSON watches with bookmarks.  It is NOT the real server: no
Raft, no validation beyond a name.

    store = FakeStore()                      # shared by "replicas"
    a, b = FakeApiServer(store, "r1").start(), FakeApiServer(store, "r2").start()
    client = Client([a.url, b.url])
    a.fail_next(2)                           # the next 2 requests on a get 503
    a.stop()                                 # the replica dies (connections reset)

Flask app served by waitress on 127.0.0.1 with a free port, in a thread.
"""
import copy
import json
import re
import socket
import threading
import time
import uuid
from datetime import datetime, timezone

import flask
import waitress

from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.model.merge_patch import merge_patch
from shepherd_ha.streaming import WRITE_KEY, expose_write, stop_waitress_server


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def now_rfc3339():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code, reason, message, details=None):
    body = {"apiVersion": "v1", "kind": "Status", "status": "Failure",
            "code": code, "reason": reason, "message": message}
    if details:
        body["details"] = details
    return body


def _split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def label_matcher(selector):
    """Parse a label selector; returns fn(labels) -> bool. ValueError when bad."""
    reqs = []
    for term in _split_top(selector or ""):
        m = re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", term)
        if m:
            vals = {v.strip() for v in m.group(3).split(",") if v.strip()}
            reqs.append((m.group(1), m.group(2), vals))
            continue
        m = re.fullmatch(r"([\w./-]+)\s*(==|!=|=)\s*([\w.-]*)", term)
        if m:
            reqs.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
            continue
        m = re.fullmatch(r"(!?)([\w./-]+)", term)
        if m:
            reqs.append((m.group(2), "!exists" if m.group(1) else "exists", None))
            continue
        raise ValueError("unable to parse requirement: %r" % term)

    def match(labels):
        labels = labels or {}
        for key, op, val in reqs:
            have = key in labels
            if op == "=" and labels.get(key) != val:
                return False
            if op == "!=" and have and labels.get(key) == val:
                return False
            if op == "in" and labels.get(key) not in val:
                return False
            if op == "notin" and have and labels.get(key) in val:
                return False
            if op == "exists" and not have:
                return False
            if op == "!exists" and have:
                return False
        return True
    return match


def field_matcher(selector):
    reqs = []
    for term in _split_top(selector or ""):
        m = re.fullmatch(r"([\w.]+)\s*(==|!=|=)\s*(.*)", term)
        if not m:
            raise ValueError("invalid field selector: %r" % term)
        reqs.append((m.group(1), m.group(2) == "!=", m.group(3).strip()))

    def get(obj, path):
        for part in path.split("."):
            if not isinstance(obj, dict):
                return None
            obj = obj.get(part)
        return obj

    def match(obj):
        for path, negate, val in reqs:
            have = get(obj, path)
            have = "" if have is None else str(have)
            if (have == val) == negate:
                return False
        return True
    return match


class FakeStore:
    """Objects and revision history shared by one or more FakeApiServers."""

    def __init__(self, start_revision=1):
        self.cond = threading.Condition()
        self.objects = {}          # (plural, namespace or "", name) -> object
        self.revision = start_revision
        self.log = []              # (revision, type, plural, object)
        self.oldest = 0            # watches from a resourceVersion below this get 410
        self.idempotency = {}      # key -> (code, body)
        self.applied = []          # (method, path) of every applied write

    # helpers for tests ----------------------------------------------------
    def put(self, plural, obj):
        """Insert or overwrite an object directly (as a controller would)."""
        r = RESOURCES[plural]
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if r.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        obj.setdefault("apiVersion", r.api_version)
        obj.setdefault("kind", r.kind)
        with self.cond:
            key = (plural, meta.get("namespace", ""), meta["name"])
            old = self.objects.get(key)
            meta.setdefault("uid", old["metadata"]["uid"] if old else str(uuid.uuid4()))
            meta.setdefault("creationTimestamp",
                            old["metadata"]["creationTimestamp"] if old else now_rfc3339())
            meta.setdefault("generation", 1)
            self.revision += 1
            meta["resourceVersion"] = str(self.revision)
            self.objects[key] = obj
            self._record("MODIFIED" if old else "ADDED", plural, obj)
        return copy.deepcopy(obj)

    def remove(self, plural, name, namespace="default"):
        r = RESOURCES[plural]
        with self.cond:
            obj = self.objects.pop((plural, namespace if r.namespaced else "", name))
            self.revision += 1
            obj["metadata"]["resourceVersion"] = str(self.revision)
            self._record("DELETED", plural, obj)
        return obj

    def compact(self):
        """Forget the watch history: watching from an older revision gives 410."""
        with self.cond:
            self.log = []
            self.oldest = self.revision

    def get_obj(self, plural, name, namespace="default"):
        r = RESOURCES[plural]
        with self.cond:
            obj = self.objects.get((plural, namespace if r.namespaced else "", name))
            return copy.deepcopy(obj)

    def _record(self, etype, plural, obj):
        self.log.append((self.revision, etype, plural, copy.deepcopy(obj)))
        self.cond.notify_all()


class FakeApiServer:
    def __init__(self, store=None, name="r1", bookmark_interval=0.2, version="0.1.0"):
        self.store = store if store is not None else FakeStore()
        self.name = name
        self.version = version
        self.bookmark_interval = bookmark_interval
        self.requests = []         # dicts: method, path, query, key, content_type, body
        self.faults = []           # pending injected failures
        self.cluster_info = None   # body of /shepherd/v1/cluster (default: built)
        self.hooks = []            # callables(request dict) run before each request is handled
        self.frozen = False        # True: running watch streams go silent (a hung replica)
        self.port = None
        self._down = False
        self._expire_epoch = 0
        self._server = None
        self._thread = None
        self._life_lock = threading.Lock()
        self.app = self._make_app()

    # -- life cycle ---------------------------------------------------------

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def start(self):
        self._down = False
        # Port 0 on the first start: the kernel picks a free port at bind time (picking one
        # first and binding later races with any other process's outgoing connections).
        self._server = waitress.create_server(expose_write(self.app), host="127.0.0.1", port=self.port or 0,
                                              threads=16, channel_timeout=30,
                                              connection_limit=200, clear_untrusted_proxy_headers=True)
        self.port = int(self._server.effective_port)
        self._thread = threading.Thread(target=self._server.run, name="fake-api-%s" % self.name,
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Die: close the listening socket and every connection (watch streams
        break mid-stream); later connections are refused.  start() again
        revives it on the same port."""
        with self._life_lock:
            server, self._server = self._server, None
            if server is None:
                return
            self._down = True
            with self.store.cond:
                self.store.cond.notify_all()
            stop_waitress_server(server, 5)
            self._thread.join(5)

    def __enter__(self):
        return self.start() if self._server is None else self

    def __exit__(self, *exc):
        self.stop()

    # -- fault injection ----------------------------------------------------

    def fail_next(self, count=1, code=503, outcome="not-applied", apply=False, methods=None,
                  message=None, reason=None, retry_after="1"):
        """The next `count` requests (of `methods`, default any) fail with
        `code`.  apply=True applies the write first, then answers 503 with
        Shepherd-Outcome: unknown (a write that committed but whose answer was
        lost).  A 503 or 429 carries `Retry-After: retry_after` (None: none)."""
        for _ in range(count):
            self.faults.append({"code": code, "outcome": "unknown" if apply else outcome,
                                "apply": apply, "methods": methods, "message": message,
                                "reason": reason, "retry_after": retry_after})

    def expire_watches(self):
        """Running watch streams get an ERROR 410 event (snapshot installed)
        and the history is compacted."""
        self.store.compact()
        with self.store.cond:
            self._expire_epoch += 1
            self.store.cond.notify_all()

    def keys_seen(self, method=None):
        return [r["key"] for r in self.requests if method is None or r["method"] == method]

    # -- HTTP ---------------------------------------------------------------

    def _make_app(self):
        app = flask.Flask("fake-shepherd-%s" % self.name)
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        app.add_url_rule("/", "root", lambda: self._handle(""), methods=methods)
        app.add_url_rule("/<path:path>", "any", self._handle, methods=methods)
        return app

    def _respond(self, code, body, headers=None):
        return flask.Response(json.dumps(body), status=code, mimetype="application/json",
                              headers=headers or {})

    def _take_fault(self, method):
        for i, f in enumerate(self.faults):
            if f["methods"] is None or method in f["methods"]:
                return self.faults.pop(i)
        return None

    def _handle(self, path):
        req = flask.request
        raw = req.get_data()
        info = {"method": req.method, "path": "/" + path, "query": req.args.to_dict(),
                "key": req.headers.get("Idempotency-Key"),
                "content_type": req.headers.get("Content-Type"),
                "body": raw.decode("utf-8", "replace")}
        self.requests.append(info)
        for hook in list(self.hooks):
            hook(info)
        fault = self._take_fault(req.method)
        if fault and not fault["apply"]:
            code = fault["code"]
            reason = fault["reason"] or {503: "ServiceUnavailable", 500: "InternalError", 409: "Conflict",
                                         422: "Invalid", 429: "TooManyRequests"}.get(code, "Unknown")
            headers = {"Shepherd-Outcome": fault["outcome"]} if code in (503, 429) else {}
            if code in (503, 429) and fault["retry_after"] is not None:
                headers["Retry-After"] = fault["retry_after"]
            return self._respond(code, status(code, reason, fault["message"] or "no leader"),
                                 headers)
        resp = self._dispatch("/" + path, req, raw)
        if fault:
            return self._respond(503, status(503, "ServiceUnavailable",
                                             fault["message"] or "lost leadership"),
                                 {"Retry-After": "1", "Shepherd-Outcome": "unknown"})
        return resp

    def _dispatch(self, path, req, raw):
        if path == "/healthz":
            return flask.Response("ok", mimetype="text/plain")
        if path == "/version":
            return self._respond(200, {"version": self.version, "replica": self.name})
        if path == "/shepherd/v1/cluster":
            return self._respond(200, self.cluster_info or self._default_cluster())
        if path == "/shepherd/v1/replica":
            return self._respond(200, self._default_cluster()["replicas"][0])
        parsed = self._parse_path(path)
        if parsed is None:
            return self._respond(404, status(404, "NotFound", "the server could not find the "
                                                              "requested resource (%s)" % path))
        r, ns, name, sub = parsed
        if sub and sub not in r.subresources:
            return self._respond(404, status(404, "NotFound", "%s has no subresource %r"
                                             % (r.plural, sub)))
        m = req.method
        if name is None:
            if m == "GET":
                if req.args.get("watch") in ("1", "true"):
                    return self._watch(r, ns, req.args)
                return self._list(r, ns, req.args)
            if m == "POST":
                if r.namespaced and not ns:
                    return self._respond(405, status(405, "MethodNotAllowed", "create needs a namespace"))
                return self._write(req, lambda body: self._create(r, ns, body), raw)
            return self._respond(405, status(405, "MethodNotAllowed", "%s not allowed on a collection" % m))
        if m == "GET":
            return self._read(r, ns, name, sub)
        if m == "PUT":
            return self._write(req, lambda body: self._update(r, ns, name, sub, body, precondition=True), raw)
        if m == "PATCH":
            ctype = (req.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype not in ("application/merge-patch+json", "application/json"):
                return self._respond(415, status(415, "UnsupportedMediaType",
                                                 "unsupported patch content type %r" % ctype))
            return self._write(req, lambda body: self._patch(r, ns, name, sub, body), raw)
        if m == "DELETE":
            if sub:
                return self._respond(405, status(405, "MethodNotAllowed", "cannot delete a subresource"))
            return self._write(req, lambda body: self._delete(r, ns, name, body or {}, req.args),
                               raw, body_optional=True)
        return self._respond(405, status(405, "MethodNotAllowed", m))

    @staticmethod
    def _parse_path(path):
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            api_version, rest = "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            api_version, rest = "/".join(parts[1:3]), parts[3:]
        else:
            return None
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return None
        r = RESOURCES.get(rest[0])
        if r is None or r.api_version != api_version or (ns and not r.namespaced):
            return None
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if r.namespaced and name is not None and ns is None:
            return None
        return r, ns, name, sub

    def _key(self, r, ns, name):
        return (r.plural, ns if r.namespaced else "", name)

    def _write(self, req, op, raw, body_optional=False):
        body = None
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError as exc:
                return self._respond(400, status(400, "BadRequest", "malformed JSON: %s" % exc))
        elif not body_optional:
            return self._respond(400, status(400, "BadRequest", "empty body"))
        key = req.headers.get("Idempotency-Key")
        store = self.store
        with store.cond:
            if key and key in store.idempotency:
                code, out = store.idempotency[key]
                return self._respond(code, out)
            code, out = op(body)
            if key:
                store.idempotency[key] = (code, out)
            if code < 300:
                store.applied.append((req.method, req.path))
        return self._respond(code, out)

    def _not_found(self, r, name):
        return 404, status(404, "NotFound", '%s "%s" not found' % (r.plural, name),
                           {"name": name, "kind": r.plural})

    def _create(self, r, ns, body):
        store = self.store
        if not isinstance(body, dict):
            return 400, status(400, "BadRequest", "the body must be an object")
        meta = body.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            return 422, status(422, "Invalid", "%s: metadata.name: Required value" % r.kind,
                               {"causes": [{"field": "metadata.name", "message": "Required value"}]})
        if r.namespaced:
            if meta.get("namespace") not in (None, ns):
                return 400, status(400, "BadRequest", "the namespace of the object (%s) does not "
                                   "match the namespace of the request (%s)" % (meta["namespace"], ns))
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        key = self._key(r, ns, name)
        if key in store.objects:
            return 409, status(409, "AlreadyExists", '%s "%s" already exists' % (r.plural, name),
                               {"name": name, "kind": r.plural})
        store.revision += 1
        for k in ("resourceVersion", "uid", "creationTimestamp", "generation"):
            meta.pop(k, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339(),
                    resourceVersion=str(store.revision), generation=1)
        body["apiVersion"], body["kind"] = r.api_version, r.kind
        if r.plural == "namespaces":
            body.setdefault("status", {"phase": "Active"})
        store.objects[key] = body
        store._record("ADDED", r.plural, body)
        return 201, body

    def _read(self, r, ns, name, sub):
        with self.store.cond:
            obj = self.store.objects.get(self._key(r, ns, name))
            if obj is None:
                return self._respond(*self._not_found(r, name))
            if sub == "scale":
                return self._respond(200, self._scale_of(obj))
            return self._respond(200, obj)

    @staticmethod
    def _scale_of(obj):
        meta = obj["metadata"]
        return {"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": meta["name"], "namespace": meta.get("namespace"),
                             "resourceVersion": meta["resourceVersion"]},
                "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
                "status": {"replicas": (obj.get("status") or {}).get("replicas", 0)}}

    def _store_update(self, r, key, old, new):
        store = self.store
        meta = new.setdefault("metadata", {})
        for k in ("uid", "creationTimestamp", "name", "namespace"):
            if k in old["metadata"]:
                meta[k] = old["metadata"][k]
        gen = old["metadata"].get("generation", 1)
        if new.get("spec") != old.get("spec"):
            gen += 1
        meta["generation"] = gen
        store.revision += 1
        meta["resourceVersion"] = str(store.revision)
        new["apiVersion"], new["kind"] = r.api_version, r.kind
        store.objects[key] = new
        store._record("MODIFIED", r.plural, new)
        return 200, new

    def _update(self, r, ns, name, sub, body, precondition):
        store = self.store
        key = self._key(r, ns, name)
        old = store.objects.get(key)
        if old is None:
            return self._not_found(r, name)
        if not isinstance(body, dict):
            return 400, status(400, "BadRequest", "the body must be an object")
        if sub == "scale":
            new = copy.deepcopy(old)
            new.setdefault("spec", {})["replicas"] = int((body.get("spec") or {}).get("replicas", 0))
            code, out = self._store_update(r, key, old, new)
            return code, self._scale_of(out)
        sent_rv = (body.get("metadata") or {}).get("resourceVersion")
        if precondition and sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            return 409, status(409, "Conflict", '%s "%s" was modified (resourceVersion %s, you sent '
                               '%s); read it again and re-apply your change'
                               % (r.plural, name, old["metadata"]["resourceVersion"], sent_rv),
                               {"name": name, "kind": r.plural})
        if sub == "status":
            new = copy.deepcopy(old)
            new["status"] = body.get("status")
        else:
            new = copy.deepcopy(body)
            if r.has_status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
        return self._store_update(r, key, old, new)

    def _patch(self, r, ns, name, sub, patch):
        old = self.store.objects.get(self._key(r, ns, name))
        if old is None:
            return self._not_found(r, name)
        if not isinstance(patch, dict):
            return 400, status(400, "BadRequest", "a merge patch must be an object")
        if sub == "scale":
            return self._update(r, ns, name, sub, merge_patch(self._scale_of(old), patch), False)
        if sub == "status":
            return self._update(r, ns, name, sub, {"status": merge_patch(old.get("status"),
                                                                         patch.get("status"))}, False)
        return self._update(r, ns, name, sub, merge_patch(old, patch), False)

    def _delete(self, r, ns, name, body, args):
        store = self.store
        key = self._key(r, ns, name)
        old = store.objects.get(key)
        if old is None:
            return self._not_found(r, name)
        pre = dict(body.get("preconditions") or {}) if isinstance(body, dict) else {}
        for p in ("resourceVersion", "uid"):
            if args.get("preconditions." + p):
                pre[p] = args["preconditions." + p]
        for p, v in pre.items():
            if v and str(old["metadata"].get(p)) != str(v):
                return 409, status(409, "Conflict", 'precondition failed for %s "%s": %s is %s, '
                                   'you sent %s' % (r.plural, name, p, old["metadata"].get(p), v))
        del store.objects[key]
        store.revision += 1
        old["metadata"]["resourceVersion"] = str(store.revision)
        old["metadata"]["propagationPolicy"] = (body.get("propagationPolicy") if isinstance(body, dict)
                                                else None) or args.get("propagationPolicy") or "Background"
        store._record("DELETED", r.plural, old)
        return 200, old

    def _filters(self, r, ns, args):
        lm = label_matcher(args.get("labelSelector"))
        fm = field_matcher(args.get("fieldSelector"))

        def match(plural, obj):
            meta = obj.get("metadata") or {}
            if plural != r.plural:
                return False
            if ns and r.namespaced and meta.get("namespace") != ns:
                return False
            return lm(meta.get("labels")) and fm(obj)
        return match

    def _list(self, r, ns, args):
        try:
            match = self._filters(r, ns, args)
        except ValueError as exc:
            return self._respond(400, status(400, "BadRequest", str(exc)))
        with self.store.cond:
            items = [copy.deepcopy(o) for (plural, _, _), o in sorted(self.store.objects.items())
                     if match(plural, o)]
            rev = self.store.revision
        for o in items:
            o.pop("apiVersion", None)
            o.pop("kind", None)
        return self._respond(200, {"apiVersion": r.api_version, "kind": r.list_kind,
                                   "metadata": {"resourceVersion": str(rev)}, "items": items})

    def _watch(self, r, ns, args):
        try:
            match = self._filters(r, ns, args)
        except ValueError as exc:
            return self._respond(400, status(400, "BadRequest", str(exc)))
        store = self.store
        try:
            rv = int(args.get("resourceVersion") or 0)
        except ValueError:
            return self._respond(400, status(400, "BadRequest", "bad resourceVersion"))
        bookmarks = args.get("allowWatchBookmarks") == "true"
        timeout = float(args.get("timeoutSeconds") or 1800)
        with store.cond:
            if rv and rv < store.oldest:
                return self._respond(410, status(410, "Gone", "too old resource version: %d (%d)"
                                                 % (rv, store.oldest)))
            initial = []
            if not rv:
                initial = [{"type": "ADDED", "object": copy.deepcopy(o)}
                           for (plural, _, _), o in sorted(store.objects.items()) if match(plural, o)]
                rv = store.revision
            epoch = self._expire_epoch

        def line(event):
            return (json.dumps(event) + "\n").encode()

        environ = flask.request.environ

        def gen():
            cursor = rv
            # Events only, as the real server: waitress sends the status line and
            # headers with the first non-empty chunk, an empty write sends them now.
            write = environ.get(WRITE_KEY)
            if write is not None:
                write(b"")
            for e in initial:
                yield line(e)
            end = time.monotonic() + timeout
            next_bookmark = time.monotonic() + self.bookmark_interval
            while time.monotonic() < end:
                if self.frozen:
                    if self._down:
                        return
                    time.sleep(0.05)
                    continue
                with store.cond:
                    if self._down:
                        return
                    if self._expire_epoch != epoch:
                        expired = True
                    else:
                        expired = False
                        events = [(rev, t, o) for rev, t, plural, o in store.log
                                  if rev > cursor and match(plural, o)]
                        cursor = store.revision
                        if not events and not (bookmarks and time.monotonic() >= next_bookmark):
                            store.cond.wait(0.05)
                            continue
                if expired:
                    yield line({"type": "ERROR", "object": status(
                        410, "Gone", "the watch history was compacted; list again")})
                    return
                for _rev, t, o in events:
                    yield line({"type": t, "object": o})
                if bookmarks and time.monotonic() >= next_bookmark:
                    next_bookmark = time.monotonic() + self.bookmark_interval
                    yield line({"type": "BOOKMARK", "object": {
                        "kind": r.kind, "apiVersion": r.api_version,
                        "metadata": {"resourceVersion": str(cursor)}}})

        return flask.Response(gen(), mimetype="application/json")

    def _default_cluster(self):
        rev = self.store.revision
        return {"leader": self.name, "self": self.name, "replicas": [
            {"id": self.name, "api": self.url, "raft": "127.0.0.1:7001", "role": "leader",
             "term": 1, "commitIndex": rev, "appliedIndex": rev, "revision": rev,
             "reachable": True}]}
