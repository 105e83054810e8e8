"""The read side shared by the FSM and the API worker's mirror of it: objects kept as
`{resource plural: {(namespace or "", name): object}}`."""
from .owner_index import scan_owned


class ObjectReads:
    objects: dict

    def get(self, resource, namespace, name):
        return self.objects.get(resource, {}).get((namespace or "", name))

    def list(self, resource, namespace=None, selection=None):
        """Every object of `resource` (in `namespace`). `selection` (label selector, field
        selector) may narrow it where an index exists (the mirror's); the caller still
        matches each object against it."""
        bucket = self.objects.get(resource, {})
        if namespace is None:
            return list(bucket.values())
        return [bucket[key] for key in bucket if key[0] == namespace]      # the FSM decodes only these

    def owned(self, resource, namespace, uid):
        """(owned, unreadable): the objects whose controller ownerReference has `uid`,
        and those whose owner cannot be read (store/owner_index.py); the mirror indexes it."""
        return scan_owned(self.objects.get(resource, {}), namespace, uid)

    def count(self):
        return sum(len(b) for b in self.objects.values())
