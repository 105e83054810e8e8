"""The replica as the object handlers see it when Secrets are encrypted at rest
(store/encryption_at_rest.py): Secrets in writes are sealed before they are
submitted, and opened in every answer (get, list, write results, recalled
outcomes, watch events). Everything else passes through untouched; the snapshot
endpoint and the controllers use the replica itself (ciphertext).

A Secret that cannot be opened is a 503 naming it and the key (a replica without the
key, or a key removed too early); in a watch it is sent as stored (sealed).
"""
from shepherd_ha.store.encryption_at_rest import DecryptError, decrypt

from .errors import ApiError


def _open(obj, cipher):
    try:
        return decrypt(obj, cipher)
    except DecryptError as exc:
        raise ApiError(503, "%s: give every replica the same --encryption-key-file" % exc)


class _WatchLog:
    def __init__(self, log, cipher):
        self._log, self._cipher = log, cipher

    def _opened(self, obj):
        try:
            return decrypt(obj, self._cipher)
        except DecryptError:
            return obj

    def since(self, revision):
        return self._all_opened(self._log.since(revision))

    def since_for(self, revision, interest):
        changes, covered = self._log.since_for(revision, interest)
        return self._all_opened(changes), covered

    def _all_opened(self, changes):
        return [c._replace(object=self._opened(c.object), previous=self._opened(c.previous))
                if c.resource == "secrets" else c for c in changes]

    def __getattr__(self, name):
        return getattr(self._log, name)


class SecretsAtRest:
    def __init__(self, replica, cipher=None):
        self._replica = replica
        self._cipher = cipher          # None: write Secrets in clear (still refuse to serve sealed ones)

    @property
    def watch_log(self):
        return _WatchLog(self._replica.watch_log, self._cipher)

    def __getattr__(self, name):
        return getattr(self._replica, name)

    def _seal(self, op):
        if self._cipher is None or op.get("resource") != "secrets" or not isinstance(op.get("object"), dict):
            return op
        return dict(op, object=self._cipher.encrypt(op["object"]))

    def _open_result(self, result):
        if not isinstance(result, dict) or not isinstance(result.get("results"), list):
            return result
        results = [dict(r, object=_open(r["object"], self._cipher)) if isinstance(r, dict) and "object" in r
                   else r for r in result["results"]]
        return dict(result, results=results)

    def write(self, ops, *args, **kwargs):
        return self._open_result(self._replica.write([self._seal(op) for op in ops], *args, **kwargs))

    def recall(self, key):
        return self._open_result(self._replica.recall(key))

    def get(self, resource, namespace, name, consistent=True):
        obj, revision = self._replica.get(resource, namespace, name, consistent)
        return (_open(obj, self._cipher) if resource == "secrets" else obj), revision

    def list(self, resource, namespace=None, consistent=True, selection=None):
        items, revision = self._replica.list(resource, namespace, consistent, selection)
        if resource == "secrets":
            items = [_open(o, self._cipher) for o in items]
        return items, revision
