"""Which Secrets and ConfigMaps a pod uses (pure): env valueFrom, envFrom and volumes
of every container list. NodeRestriction lets a node read only these."""


def _dict(value):
    return value if isinstance(value, dict) else {}


def _containers(spec):
    for key in ("initContainers", "containers", "ephemeralContainers"):
        items = spec.get(key)
        for c in items if isinstance(items, list) else ():
            if isinstance(c, dict):
                yield c


def _referenced(pod, key_ref, source_ref, volume_key, volume_name_field):
    spec = _dict(_dict(pod).get("spec"))
    names = set()
    for c in _containers(spec):
        for var in c.get("env") if isinstance(c.get("env"), list) else ():
            name = _dict(_dict(_dict(var).get("valueFrom")).get(key_ref)).get("name")
            if isinstance(name, str) and name:
                names.add(name)
        for source in c.get("envFrom") if isinstance(c.get("envFrom"), list) else ():
            name = _dict(_dict(source).get(source_ref)).get("name")
            if isinstance(name, str) and name:
                names.add(name)
    for volume in spec.get("volumes") if isinstance(spec.get("volumes"), list) else ():
        name = _dict(_dict(volume).get(volume_key)).get(volume_name_field)
        if isinstance(name, str) and name:
            names.add(name)
    return names


def referenced_secrets(pod):
    """Names of the Secrets (in the pod's namespace) the pod uses."""
    return _referenced(pod, "secretKeyRef", "secretRef", "secret", "secretName")


def referenced_configmaps(pod):
    """Names of the ConfigMaps (in the pod's namespace) the pod uses."""
    return _referenced(pod, "configMapKeyRef", "configMapRef", "configMap", "name")
