"""The read side shared by the FSM and the API worker's mirror of it: objects kept as
`{resource plural: {(namespace or "", name): object}}`."""


class ObjectReads:
    objects: dict

    def get(self, resource, namespace, name):
        return self.objects.get(resource, {}).get((namespace or "", name))

    def list(self, resource, namespace=None):
        bucket = self.objects.get(resource, {})
        if namespace is None:
            return list(bucket.values())
        return [o for (ns, _), o in bucket.items() if ns == namespace]

    def count(self):
        return sum(len(b) for b in self.objects.values())
