"""Who waits for which changes of a watch log (store/watch_log.py), so an append wakes
only the watchers it may concern.

Every watch registers an Interest in its resource. A watch that names an indexed
field's value (a kubelet's spec.nodeName=N: store/selector_index.py INDEXED_FIELDS) is woken
only by a change whose object had that value before or after, as kube-apiserver's
cacher does with its indexed triggers; any other watch by every change of its resource,
so a watch of ConfigMaps sleeps through a rollout's pod writes. With a thousand nodes,
each pod change used to wake a thousand threads to find nothing for all but one or two.

Not thread-safe on its own: the watch log calls it under its lock.
"""
import threading

from shepherd_ha.model.selectors import field_value


class Interest:
    """A watcher of `resource`'s changes, or with `field` only of those whose `field` is
    `value` before or after. Its flag is set when such a change arrives, and on a reset or
    a poke; it starts set, so the first look reads the log."""

    def __init__(self, resource, field=None, value=None):
        self.resource, self.field, self.value = resource, field, value
        self.flag = threading.Event()
        self.flag.set()


class Interests:
    def __init__(self):
        self._every = {}        # resource -> set of Interest in all its changes
        self._by_field = {}     # resource -> field -> value -> set of Interest

    def add(self, resource, field=None, value=None):
        interest = Interest(resource, field, value)
        if field is None:
            self._every.setdefault(resource, set()).add(interest)
        else:
            self._by_field.setdefault(resource, {}).setdefault(field, {}).setdefault(value, set()).add(interest)
        return interest

    def remove(self, interest):
        """Forget `interest` (again: nothing)."""
        if interest.field is None:
            _discard(self._every, interest.resource, interest)
            return
        fields = self._by_field.get(interest.resource, {})
        if _discard(fields.get(interest.field, {}), interest.value, interest) and not fields.get(interest.field):
            fields.pop(interest.field, None)
            if not fields:
                self._by_field.pop(interest.resource, None)

    def __len__(self):
        return sum(len(s) for s in self._every.values()) + sum(
            len(s) for fields in self._by_field.values() for by_value in fields.values() for s in by_value.values())

    def flag_change(self, change):
        """Flag the interests `change` may concern. A MODIFIED change must carry its
        previous version (the mirror's and the in-memory store's do): a pod bound to node N
        names N only in its new version, and one that left N only in its previous one."""
        _flag(self._every.get(change.resource, ()))
        fields = self._by_field.get(change.resource)
        if not fields:
            return
        for obj in (change.object, change.previous):
            if obj is not None and not isinstance(obj, dict):     # stored bytes (a store process's
                for by_value in fields.values():                  # log): cannot tell, flag them all
                    for interests in by_value.values():
                        _flag(interests)
                return
        for field, by_value in fields.items():
            for obj in (change.object, change.previous):
                if obj is not None:
                    _flag(by_value.get(field_value(obj, field), ()))

    def flag_all(self):
        """A reset or a poke: every watcher looks again."""
        for interests in self._every.values():
            _flag(interests)
        for fields in self._by_field.values():
            for by_value in fields.values():
                for interests in by_value.values():
                    _flag(interests)


def _flag(interests):
    for interest in interests:
        interest.flag.set()


def _discard(by_key, key, interest):
    """Remove `interest` from the set at `by_key[key]`, and the set once empty; True if it was the last."""
    interests = by_key.get(key)
    if interests is None:
        return False
    interests.discard(interest)
    if interests:
        return False
    del by_key[key]
    return True
