"""The FSM's idempotency table: what a retried write (same Idempotency-Key) is answered.

Part of the replicated state (every replica remembers the same keys, so a retry on
another replica after a failover gets the same answer), bounded to the newest
`dedup_limit` keys. A retry of a write that succeeded gets each object as it is now
if it is still the one the write touched (same uid), else what is needed to name it
(kind, name, namespace, uid, resourceVersion); a failure is answered as it was.

So an entry keeps no object: a success is a flat tuple
    (digest, revision, ((code, resource, namespace, name, uid, apiVersion, kind, resourceVersion), ...))
about 250 bytes per entry instead of ~900 with a stub object (two dicts) per op
(docs/benchmarks.md, "The store process's tick"); a failure stays the failure dict
(plus "digest"). Entries in the older form (a dict with per-op 6-tuples holding a stub
object), from a dump or snapshot written before, are still answered.

Two tables, by who made the key. A client's Idempotency-Key (scoped by the API:
`CLIENT_KEY_PREFIX`) is retried by its client until its retry deadline (15 s for
shepherd_ha.client, 10 s for the agent; its last try may take a 5 s read timeout and the
server's 2 s write timeout more): the newest 20,000 are kept, 22 s at 900 keyed writes
a second, above the highest rate measured. A key the server made, for a write the client
sent without one or for a controller's write, is only ever retried by the server itself
within its write timeout (a group resubmitted after a leader change): the newest 10,000
are kept, and a rollout's controller writes no longer push clients' keys out. One table
of 50,000 was ~35 MB of the store process at 1,000 nodes, filled by the leases' renewals
(docs/benchmarks.md, run V). The bounds are the code's, not part of the state.
"""
import collections

DEFAULT_DEDUP_LIMIT = 20000
SERVER_KEY_LIMIT = 10000
CLIENT_KEY_PREFIX = "idem:"     # api/idempotency.py store_key(): a client's key, scoped to its user
KEY_REUSED = ("this Idempotency-Key was already used for a different request (method, path or body): "
              "use a new key for a new request")


def _from_a_client(key):
    return isinstance(key, str) and key.startswith(CLIENT_KEY_PREFIX)


def _op_entry(op_result):
    obj = op_result["object"]
    meta = obj["metadata"]
    return (op_result["code"], op_result["resource"], meta.get("namespace"), meta["name"], meta.get("uid"),
            obj.get("apiVersion"), obj.get("kind"), meta.get("resourceVersion"))


def _stub(api_version, kind, namespace, name, uid, resource_version):
    meta = {"name": name}
    for field, value in (("namespace", namespace), ("uid", uid), ("resourceVersion", resource_version)):
        if value is not None:
            meta[field] = value
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


class Idempotency:
    """Mixed into StoreFSM: `self.dedup` and `self.server_dedup` (OrderedDicts, key ->
    entry) and `self.get`."""

    def _init_idempotency(self, dedup_limit, server_key_limit=SERVER_KEY_LIMIT):
        self.dedup = collections.OrderedDict()          # clients' keys -> compact outcome
        self.dedup_limit = dedup_limit
        self.server_dedup = collections.OrderedDict()   # keys the server made -> compact outcome
        self.server_key_limit = server_key_limit

    def _loaded(self):
        """After a load (dump or snapshot): this version's bounds, and one table split in
        two. Every replica reloads its own dump, taken at its own log index by whichever
        version ran then, so the tables must come out the same whoever filed the keys:
        each key goes where this version files it, in the order it was remembered."""
        self.dedup_limit, self.server_key_limit = DEFAULT_DEDUP_LIMIT, SERVER_KEY_LIMIT
        if "server_dedup" not in self.__dict__:
            mixed = self.dedup
            self.dedup, self.server_dedup = collections.OrderedDict(), collections.OrderedDict()
            for key, entry in mixed.items():
                (self.dedup if _from_a_client(key) else self.server_dedup)[key] = entry
        for table, limit in ((self.dedup, self.dedup_limit), (self.server_dedup, self.server_key_limit)):
            while len(table) > limit:
                table.popitem(last=False)

    def remembered(self, key):
        """The entry remembered for `key`, or None."""
        entry = self.dedup.get(key)
        if entry is None:
            entry = self.server_dedup.get(key)
        return entry

    def _remembered_digest(self, entry):
        return entry[0] if isinstance(entry, tuple) else entry.get("digest")

    def _remember(self, key, result, digest=None):
        if result.get("ok"):
            entry = (digest, result["revision"], tuple(_op_entry(r) for r in result["results"]))
        else:
            entry = dict(result)
            if digest is not None:
                entry["digest"] = digest
        if _from_a_client(key):
            table, limit = self.dedup, self.dedup_limit
        else:
            table, limit = self.server_dedup, self.server_key_limit
        table[key] = entry
        while len(table) > limit:
            table.popitem(last=False)

    def recall(self, key):
        """The outcome remembered for idempotency key `key` (as a retry would get it), or None."""
        entry = self.remembered(key)
        if entry is None:
            return None
        result = self._replay(entry)
        digest = self._remembered_digest(entry)
        if digest is not None:
            result["digest"] = digest     # which request the key answered
        return result

    def _replay(self, entry):
        if isinstance(entry, tuple):
            _, revision, ops = entry
            return {"ok": True, "revision": revision, "duplicate": True,
                    "results": [self._expand(code, resource, namespace, name, uid,
                                             lambda e=(api, kind, namespace, name, uid, rv): _stub(*e))
                                for code, resource, namespace, name, uid, api, kind, rv in ops]}
        result = dict(entry, duplicate=True)
        result.pop("digest", None)
        if entry.get("ok"):          # the older form: (code, resource, namespace, name, uid, stub)
            result["results"] = [self._expand(c, r, ns, n, uid, lambda s=stub: s)
                                 for c, r, ns, n, uid, stub in entry["results"]]
        return result

    def _expand(self, code, resource, namespace, name, uid, stub):
        current = self.get(resource, namespace, name)
        if current is not None and current["metadata"].get("uid") == uid:
            return {"code": code, "resource": resource, "object": current}
        return {"code": code, "resource": resource, "object": stub()}
