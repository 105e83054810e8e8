"""Objects by the uid of their controller ownerReference, as Kubernetes' informers
index them: a controller's pass reads the objects it owns instead of scanning every
object of the kind. At 30 Deployments of 1,000 pods each, a ReplicaSet pass scanned
30,000 pods for its 1,000, and those scans took 80 % of the leader's API worker.

`scan_owned` answers from the objects as they are (what the FSM does); `OwnerIndex`
is kept beside them change by change (what the API worker's mirror does). Both give
the same answer; tests/unit/test_owner_index.py checks it on random changes.
"""


class UnreadableOwner(ValueError):
    """An object's ownerReferences are not what Kubernetes allows (stored past validation)."""


def controller_uid(obj):
    """The uid of `obj`'s controller ownerReference (the first with controller: true,
    as deployment_util.controller_ref reads it), or None; raises UnreadableOwner if
    its metadata or ownerReferences cannot be read."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        raise UnreadableOwner("its metadata is not an object")
    refs = meta.get("ownerReferences") or ()
    if not isinstance(refs, (list, tuple)):
        raise UnreadableOwner("its ownerReferences is not a list")
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller") is True:
            uid = ref.get("uid")
            if uid is not None and not isinstance(uid, str):
                raise UnreadableOwner("its controller ownerReference's uid is not a string")
            return uid
    return None


_BAD = object()


def _uid_or_bad(obj):
    try:
        return controller_uid(obj)
    except UnreadableOwner:
        return _BAD


def _in(namespace, key):
    return namespace is None or key[0] == (namespace or "")


def scan_owned(bucket, namespace, uid):
    """(owned, unreadable) among `bucket` ({(namespace, name): object}) by walking it;
    no object is owned by uid None (one without a controller is nobody's)."""
    owned, unreadable = [], []
    for key, obj in bucket.items():
        if not _in(namespace, key):
            continue
        try:
            if controller_uid(obj) == uid and uid is not None:
                owned.append(obj)
        except UnreadableOwner:
            unreadable.append(obj)
    return owned, unreadable


class OwnerIndex:
    """{resource: {owner uid: {key: object}}} plus the objects whose owner cannot be
    read, for the resources it was asked about (`add`), kept current by `replace`
    under the caller's lock."""

    def __init__(self):
        self._owned = {}             # resource -> uid -> {key: object}
        self._unreadable = {}        # resource -> {key: object}

    def covers(self, resource):
        return resource in self._owned

    def add(self, resource, bucket):
        """Index `resource` from its bucket ({key: object}), in the bucket's order."""
        self._owned[resource], self._unreadable[resource] = {}, {}
        for key, obj in bucket.items():
            self.put(resource, key, obj)

    def replace(self, resource, key, old, new):
        """`old` (or None) stored at `key` becomes `new` (or None: deleted). An object
        keeping its owner keeps its place, so owned() lists in creation order as a scan does."""
        if resource not in self._owned:
            return
        if old is not None and new is not None and _uid_or_bad(old) == _uid_or_bad(new):
            uid = _uid_or_bad(old)
            if uid is _BAD:
                self._unreadable[resource][key] = new
            elif uid is not None:
                self._owned[resource][uid][key] = new
            return
        if old is not None:
            self.drop(resource, key, old)
        if new is not None:
            self.put(resource, key, new)

    def put(self, resource, key, obj):
        try:
            uid = controller_uid(obj)
        except UnreadableOwner:
            self._unreadable.setdefault(resource, {})[key] = obj
            return
        if uid is not None:
            self._owned.setdefault(resource, {}).setdefault(uid, {})[key] = obj

    def drop(self, resource, key, obj):
        """Forget `obj` (the version stored at `key` until now)."""
        try:
            uid = controller_uid(obj)
        except UnreadableOwner:
            self._unreadable.get(resource, {}).pop(key, None)
            return
        if uid is None:
            return
        by_uid = self._owned.get(resource, {})
        keys = by_uid.get(uid)
        if keys is not None:
            keys.pop(key, None)
            if not keys:
                del by_uid[uid]

    def owned(self, resource, namespace, uid):
        """(owned, unreadable): the objects of `resource` in `namespace` (None: all)
        whose controller ownerReference has `uid`, and those whose owner cannot be read."""
        keys = self._owned.get(resource, {}).get(uid, {})
        owned = [obj for key, obj in keys.items() if _in(namespace, key)]
        unreadable = [obj for key, obj in self._unreadable.get(resource, {}).items() if _in(namespace, key)]
        return owned, unreadable
