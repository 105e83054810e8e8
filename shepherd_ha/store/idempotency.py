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
"""
import collections

DEFAULT_DEDUP_LIMIT = 50000
KEY_REUSED = ("this Idempotency-Key was already used for a different request (method, path or body): "
              "use a new key for a new request")


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
    """Mixed into StoreFSM: `self.dedup` (an OrderedDict, key -> entry) and `self.get`."""

    def _init_idempotency(self, dedup_limit):
        self.dedup = collections.OrderedDict()   # idempotency key -> compact outcome
        self.dedup_limit = dedup_limit

    def _remembered_digest(self, entry):
        return entry[0] if isinstance(entry, tuple) else entry.get("digest")

    def _remember(self, key, result, digest=None):
        if result.get("ok"):
            entry = (digest, result["revision"], tuple(_op_entry(r) for r in result["results"]))
        else:
            entry = dict(result)
            if digest is not None:
                entry["digest"] = digest
        self.dedup[key] = entry
        while len(self.dedup) > self.dedup_limit:
            self.dedup.popitem(last=False)

    def recall(self, key):
        """The outcome remembered for idempotency key `key` (as a retry would get it), or None."""
        entry = self.dedup.get(key)
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
