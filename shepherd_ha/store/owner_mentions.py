"""Which stored objects name an owner's uid in their ownerReferences, kept by the FSM so
an Orphan delete (store/fsm.py) reads those objects and not every object of the namespace
(each stored object is compressed: reading one costs a decompression and a parse).

Unlike store/owner_index.py (an API worker's index of the objects a *controller* owns),
this counts every reference and holds only (resource, key). It is derived state, never
dumped: kept by each commit and rebuilt as a dump loads. It must say what the stored JSON
says, so that a replica that kept it write by write and one that rebuilt it from a dump
read the same objects (tests/unit/test_fsm_owner_index.py): a command's object is read as
JSON would spell it, and decoded from its stored bytes when it holds anything else.
"""
from .encoded_objects import decode

_JSON_SCALARS = (str, int, float, bool, type(None))


def reference_uids(obj, stored=None):
    """The uids of `obj`'s ownerReferences as its stored JSON reads them. `stored`: those
    bytes, decoded only when `obj` holds something JSON spells differently (a tuple reads
    back as a list)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    if not isinstance(refs, (list, tuple)):
        return ()
    uids = set()
    for ref in refs:
        if isinstance(ref, dict):
            uid = ref.get("uid")
            if isinstance(uid, str):
                uids.add(str(uid))
            elif not isinstance(uid, _JSON_SCALARS):
                return reference_uids(decode(stored)) if stored is not None else ()
        elif not isinstance(ref, _JSON_SCALARS + (list, tuple)):
            return reference_uids(decode(stored)) if stored is not None else ()
    return uids


class OwnerMentions:
    """{owner uid: {(resource, key)}} of what is stored."""

    def __init__(self):
        self._by_uid = {}

    @classmethod
    def of_stored(cls, objects):
        """Built from {resource: EncodedBucket}: every object decoded once (~10 us each; a
        damaged object raises here, as the dump loads, not in a later command)."""
        index = cls()
        for resource, bucket in objects.items():
            for key, data in bucket.raw_dict().items():
                for uid in reference_uids(decode(data)):
                    index._by_uid.setdefault(uid, set()).add((resource, key))
        return index

    def naming(self, uid):
        """The (resource, key) of every object whose ownerReferences name `uid`."""
        return self._by_uid.get(uid, ())

    def note(self, resource, key, previous, replaced, obj, stored):
        """The object stored at `key` as `replaced` (None: none; its dict `previous`, or
        None) becomes `obj`, stored as `stored` (None: deleted)."""
        if replaced is not None:
            gone = reference_uids(previous, replaced) if previous is not None else reference_uids(decode(replaced))
            for uid in gone:
                keys = self._by_uid.get(uid)
                if keys is not None:
                    keys.discard((resource, key))
                    if not keys:
                        del self._by_uid[uid]
        if obj is not None:
            for uid in reference_uids(obj, stored):
                self._by_uid.setdefault(uid, set()).add((resource, key))

    def __eq__(self, other):
        return isinstance(other, OwnerMentions) and self._by_uid == other._by_uid

    __hash__ = None
