"""The real API (shepherd_ha/api/app.py) over an in-memory store, for unit tests.

One implementation of the API's semantics: clients (sheepctl, the node agent,
shepherd_ha.client) are tested against the server's own routes, selectors,
patches and watches, so no client test can pass against behaviour the server
does not have. The store is the controllers' in-memory twin
(controllers/store_access.py MemoryStore: the real StoreFSM and a watch log fed
by each apply), so a controller can run over the same store the API serves.

    store = ApiStore()                      # shared by "replicas"
    a, b = ApiServer(store, "r1").start(), ApiServer(store, "r2").start()
    client = Client([a.url, b.url])
    a.fail_next(2)                          # the next 2 requests on a get 503
    a.stop()                                # the replica dies (connections reset)

    client, replica = flask_client()        # no HTTP: the Flask test client

What is injected (never semantics): failures (fail_next), request hooks, a frozen
replica (streams go silent), a compacted watch log (compact, install_snapshot), and a canned
cluster view (cluster_info) for the sheepctl printer.
"""
import copy
import json
import socket
import threading
import time
import types
import uuid

import waitress

from shepherd_ha.api import auth
from shepherd_ha.api.app import create_app
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.store import commands, gc_tuning
from shepherd_ha.store.stamping import stamp_new
from shepherd_ha.store.tick_gaps import TickGapMeter
from shepherd_ha.streaming import stop_waitress_server

NAMESPACES = ("default", "kube-node-lease", "kube-system")


def free_port():
    """A port nothing listens on now (for a URL that refuses connections)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiStore(MemoryStore):
    """The in-memory twin plus what tests do to it directly (as a controller would)."""

    def __init__(self, namespaces=NAMESPACES):
        self._snapshotting = False
        super().__init__(namespaces=namespaces)
        self.servers = []         # ApiServers serving this store, in start order (the first leads)
        self.applied = []         # (method, path) of every HTTP write that changed the store
        self.api_writes = 0       # commands the API submitted (a dry run must add none)

    def put(self, plural, obj):
        """Create or overwrite an object, spec and status (a namespaced one defaults to "default");
        the stored object."""
        r = RESOURCES[plural]
        meta = dict(obj.get("metadata") or {})
        if r.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        obj = dict(obj, metadata=meta, apiVersion=obj.get("apiVersion", r.api_version),
                   kind=obj.get("kind", r.kind))
        ns = meta.get("namespace")
        if ns and self.get("namespaces", None, ns) is None:
            self.put("namespaces", {"metadata": {"name": ns}, "spec": {}, "status": {"phase": "Active"}})
        old = self.get(plural, ns, meta["name"])
        if old is None:
            new = stamp_new(obj)    # a uid or creationTimestamp the test gave is kept (owner references)
            new["metadata"].update({k: meta[k] for k in ("uid", "creationTimestamp") if meta.get(k)})
            ops = [commands.create(plural, new)]
        else:
            ops = [commands.update(plural, ns, meta["name"], obj)]
            if r.has_status and "status" in obj:    # as a controller writes it: through the subresource
                ops.append(commands.update(plural, ns, meta["name"], obj, subresource="status"))
        result = self.apply(commands.write(ops, uuid.uuid4().hex))
        assert result.get("ok"), result
        return result["results"][-1]["object"]

    def remove(self, plural, name, namespace="default"):
        ns = namespace if RESOURCES[plural].namespaced else None
        result = self.apply(commands.write([commands.delete(plural, ns, name)], uuid.uuid4().hex))
        assert result.get("ok"), result
        return result["results"][0].get("object")

    def delete_gracefully(self, name, seconds, namespace="default", timestamp="2026-11-29T10:00:00Z"):
        """A graceful delete of a pod on a node, as the API sends it: the pod as stored, marked
        with deletionTimestamp (the store's objects change only through commands)."""
        op = commands.delete("pods", namespace, name,
                             graceful={"gracePeriodSeconds": seconds, "deletionTimestamp": timestamp})
        result = self.apply(commands.write([op], uuid.uuid4().hex))
        assert result.get("ok") and result["results"][0].get("terminating"), result
        return result["results"][0]["object"]

    def get_obj(self, plural, name, namespace="default"):
        """A copy of the stored object (the FSM's own must not change behind its back), or None."""
        return copy.deepcopy(self.get(plural, namespace if RESOURCES[plural].namespaced else None, name))

    def compact(self):
        """Forget the watch history (as a snapshot install does): resuming from before now gives 410."""
        self.watch_log.reset(self.fsm.revision)

    def apply(self, command):
        if not self._snapshotting:
            return super().apply(command)
        with self._lock:    # a snapshot's writes: applied, never in the watch log (the owner mirror sees them)
            result, changes = self.fsm.apply_with_changes(command)
            self.mirror.apply_changes(changes)
            return result

    def install_snapshot(self, *objects):
        """What a replica that fell behind sees: the state jumps past the writes of `objects`
        ((plural, obj) pairs) with none of their changes in the watch log, so a running watch
        behind the new state gets an ERROR 410 event and resuming from before it gives 410."""
        with self._lock:
            self._snapshotting = True
            try:
                for plural, obj in objects:
                    self.put(plural, obj)
            finally:
                self._snapshotting = False
            self.watch_log.reset(self.fsm.revision)


class MemoryReplica:
    """What the API layer calls a replica (store/replica.py's surface) over an ApiStore:
    reads are local and linearizable at once (nothing to wait for), writes apply at once."""

    cluster_id = None

    def __init__(self, store, replica_id, server=None):
        self.store, self.id, self._server = store, replica_id, server
        self.watch_log = store.watch_log
        self.barrier = types.SimpleNamespace(barriers_sent=0)
        self._ticks = TickGapMeter()
        self.consistent_reads = 0   # reads that asked for linearizability (a barrier on a real replica)

    def put(self, resource, obj):
        return self.store.put(resource, obj)

    @property
    def fsm(self):
        return self.store.fsm

    @property
    def writes(self):
        return self.store.api_writes

    @property
    def api_url(self):
        return self._server.url if self._server else None

    def sync(self, consistent):
        if consistent:
            self.consistent_reads += 1

    def get(self, resource, namespace, name, consistent=True):
        self.sync(consistent)
        with self.store._lock:
            return self.store.fsm.get(resource, namespace, name), self.store.fsm.revision

    def list(self, resource, namespace=None, consistent=True, selection=None):
        self.sync(consistent)
        with self.store._lock:
            return self.store.fsm.list(resource, namespace, selection), self.store.fsm.revision

    def revision(self):
        return self.store.fsm.revision

    def digest(self):
        with self.store._lock:
            return self.store.fsm.revision, self.store.fsm.digest()

    def write(self, ops, key=None, epoch=None, timeout=None, digest=None):
        self.store.api_writes += 1
        return self.store.apply(commands.write(ops, key or uuid.uuid4().hex, epoch, digest))

    def recall(self, key):
        with self.store._lock:
            return self.store.fsm.recall(key)

    # ---- the cluster: every ApiServer of the store is a member; the first started leads ----

    def _servers(self):
        return [s for s in self.store.servers if s.port is not None]

    def leader_id(self):
        live = [s for s in self._servers() if s._server is not None]
        return live[0].name if live else self.id

    def members(self):
        return [{"id": s.name, "raft": "memory:%s" % s.name, "api": s.url} for s in self._servers()] or \
            [{"id": self.id, "raft": "memory:%s" % self.id, "api": self.api_url}]

    @property
    def peers(self):
        from shepherd_ha.store.replica import Peer
        return [Peer(m["id"], m["raft"], m["api"]) for m in self.members() if m["id"] != self.id]

    def api_of(self, ident):
        return next((m["api"] for m in self.members() if m["id"] == ident), None)

    def membership(self):
        rows = [dict(m, voter=True, self=m["id"] == self.id) for m in self.members()]
        return {"members": rows, "leader": self.leader_id(), "commitIndex": self.revision(),
                "quorum": len(rows) // 2 + 1, "changeInProgress": None, "seenBy": self.id,
                "progressKnown": True}

    def status(self):
        fsm, rev = self.store.fsm, self.revision()
        return {"id": self.id, "clusterId": None, "api": self.api_url, "raft": "memory:%s" % self.id,
                "role": "leader" if self.leader_id() == self.id else "follower", "term": 1,
                "leader": self.leader_id(), "commitIndex": rev, "appliedIndex": rev, "revision": rev,
                "objects": fsm.count(), "epoch": list(fsm.epoch), "fencedRejections": fsm.fenced_rejections,
                "malformedCommands": fsm.malformed_commands, "groupCommit": {"groups": 0, "commands": 0},
                "controllers": None, "connectedPeers": [p.id for p in self.peers],
                "voters": [m["id"] for m in self.members()], "tickGap": None, "gc": gc_tuning.status(),
                "reachable": True}

    def tick_gaps(self):
        return self._ticks.snapshot()

    def ready(self):
        return True, "ok"


def status_body(code, reason, message):
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code, "reason": reason,
            "message": message}


class ApiServer:
    """The real app for one replica of `store`, on waitress at 127.0.0.1 (a free port), in a thread."""

    def __init__(self, store=None, name="r1", tokens=None):
        self.store = store if store is not None else ApiStore()
        self.name = name
        self.requests = []         # dicts: method, path, query, key, content_type, body
        self.faults = []           # pending injected failures
        self.cluster_info = None   # a canned body for /shepherd/v1/cluster (None: the real view)
        self.hooks = []            # callables(request dict) run before each request is handled
        self.frozen = False        # True: running streams go silent (a hung replica)
        self.port = None
        self._server = None
        self._thread = None
        self._life_lock = threading.Lock()
        self.replica = MemoryReplica(self.store, name, self)
        self.app = create_app(self.replica, tokens=tokens)
        self.store.servers.append(self)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def start(self):
        # Port 0 on the first start: the kernel picks a free port at bind time.
        self._server = waitress.create_server(self._wsgi, host="127.0.0.1", port=self.port or 0, threads=16,
                                              channel_timeout=30, connection_limit=200,
                                              clear_untrusted_proxy_headers=True)
        self.port = int(self._server.effective_port)
        self._thread = threading.Thread(target=self._server.run, name="api-%s" % self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Die: close the listening socket and every connection (streams break mid-stream);
        later connections are refused. start() again revives it on the same port."""
        with self._life_lock:
            server, self._server = self._server, None
            if server is None:
                return
            self.store.watch_log.poke()
            stop_waitress_server(server, 5)
            self._thread.join(5)

    def __enter__(self):
        return self.start() if self._server is None else self

    def __exit__(self, *exc):
        self.stop()

    # -- fault injection ----------------------------------------------------

    def fail_next(self, count=1, code=503, outcome="not-applied", apply=False, methods=None,
                  message=None, reason=None, retry_after="1"):
        """The next `count` requests (of `methods`, default any) fail with `code`. apply=True
        lets the real app apply the write first, then answers 503 with Shepherd-Outcome:
        unknown (a write that committed but whose answer was lost). A 503 or 429 carries
        `Retry-After: retry_after` (None: none)."""
        for _ in range(count):
            self.faults.append({"code": code, "outcome": "unknown" if apply else outcome, "apply": apply,
                                "methods": methods, "message": message, "reason": reason,
                                "retry_after": retry_after})

    def keys_seen(self, method=None):
        return [r["key"] for r in self.requests if method is None or r["method"] == method]

    # -- WSGI: record, hook, inject, then the real app ------------------------

    def _take_fault(self, method):
        for i, f in enumerate(self.faults):
            if f["methods"] is None or method in f["methods"]:
                return self.faults.pop(i)
        return None

    def _wsgi(self, environ, start_response):
        import io
        from urllib.parse import parse_qsl
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        info = {"method": method, "path": path, "query": dict(parse_qsl(environ.get("QUERY_STRING", ""))),
                "key": environ.get("HTTP_IDEMPOTENCY_KEY"), "content_type": environ.get("CONTENT_TYPE"),
                "body": raw.decode("utf-8", "replace"), "raw": raw}
        self.requests.append(info)
        for hook in list(self.hooks):
            hook(info)
        fault = self._take_fault(method)
        if fault and not fault["apply"]:
            code = fault["code"]
            reason = fault["reason"] or {503: "ServiceUnavailable", 500: "InternalError", 409: "Conflict",
                                         422: "Invalid", 429: "TooManyRequests"}.get(code, "Unknown")
            headers = [("Shepherd-Outcome", fault["outcome"])] if code in (503, 429) else []
            if code in (503, 429) and fault["retry_after"] is not None:
                headers.append(("Retry-After", fault["retry_after"]))
            return self._answer(start_response, code, status_body(code, reason, fault["message"] or "no leader"),
                                headers)
        if path == "/shepherd/v1/cluster" and self.cluster_info is not None:
            return self._answer(start_response, 200, self.cluster_info)
        before = self.store.fsm.revision
        if fault:   # applied, then the answer is lost
            body = b"".join(self.app(environ, lambda *a, **k: None))
            del body
            self._note_write(method, path, before)
            return self._answer(start_response, 503, status_body(503, "ServiceUnavailable",
                                                                 fault["message"] or "lost leadership"),
                                [("Retry-After", "1"), ("Shepherd-Outcome", "unknown")])
        out = self.app(environ, start_response)
        self._note_write(method, path, before)
        return self._streamed(out)

    def _note_write(self, method, path, before):
        if method != "GET" and self.store.fsm.revision != before:
            self.store.applied.append((method, path))

    def _streamed(self, body):
        """The app's chunks, held back while the replica is frozen, cut when it stops."""
        try:
            for chunk in body:
                while self.frozen and self._server is not None:
                    time.sleep(0.05)
                if self._server is None:
                    return
                yield chunk
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()

    @staticmethod
    def _answer(start_response, code, body, headers=()):
        data = json.dumps(body).encode()
        start_response("%d %s" % (code, "Injected"), [("Content-Type", "application/json"),
                                                      ("Content-Length", str(len(data)))] + list(headers))
        return [data]


# ---- no HTTP: the Flask test client over a replica of a fresh store ----

def token_for(name):
    return (name.replace(":", "-") + "-" + "t" * 32)[:48]


def token_table(users):
    """An auth.TokenTable for users {name: groups}; each one's token is token_for(name)."""
    return auth.TokenTable({token_for(name): auth.User(name, name, tuple(groups)) for name, groups in users.items()})


def bearer(name, **extra):
    return dict({"Authorization": "Bearer " + token_for(name)}, **extra)


def memory_replica(namespaces=NAMESPACES):
    """A MemoryReplica of a fresh ApiStore (its store is replica.store)."""
    return MemoryReplica(ApiStore(namespaces), "r1")


def flask_client(replica=None, users=None):
    """(Flask test client of the real app, its MemoryReplica); users {name: groups} require tokens."""
    replica = replica or memory_replica()
    return create_app(replica, tokens=token_table(users) if users is not None else None).test_client(), replica
