"""Endpoints controller: one Endpoints object per Service with a selector, listing the
pods that match it and have an IP (ready ones in `addresses`, the others in
`notReadyAddresses`) and the ports they serve the Service's ports on.

Keys are services. A pod change maps to every service in its namespace whose
selector matched the pod before or after the change, and only when something the
endpoints show changed (labels, IP, readiness, node, phase, container ports). The
Endpoints object is written only when what it lists changes; it is owned by its
Service (ownerReference), so it goes when the Service goes (here at once, and by
the garbage collector in any case). Services without a selector are left alone:
their Endpoints, if any, are the user's.
"""
import copy

from shepherd_ha.model.defaults import apply_defaults
from shepherd_ha.model.selectors import SelectorError, selector_from_labels
from shepherd_ha.model.validation import describe_causes, validate_object
from shepherd_ha.store import commands
from shepherd_ha.store.stamping import stamp_new

from .controller import Controller, Retry

TERMINAL_PHASES = ("Succeeded", "Failed")


def pod_is_ready(pod):
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _containers(pod):
    spec = pod.get("spec") or {}
    return [c for c in spec.get("containers") or [] if isinstance(c, dict)]


def resolve_target_port(service_port, pod):
    """The pod port a service port sends to: an int targetPort, or the containerPort
    named by a string targetPort (None when the pod has no such port)."""
    target = service_port.get("targetPort")
    if target is None:
        target = service_port.get("port")
    if isinstance(target, bool):
        return None
    if isinstance(target, int):
        return target
    if isinstance(target, str):
        if target.isdigit():
            return int(target)
        protocol = service_port.get("protocol") or "TCP"
        for container in _containers(pod):
            for port in container.get("ports") or []:
                if (isinstance(port, dict) and port.get("name") == target
                        and (port.get("protocol") or "TCP") == protocol
                        and isinstance(port.get("containerPort"), int)):
                    return port["containerPort"]
    return None


def _endpoint_relevant(pod):
    """What of a pod the endpoints show or depend on; equal projections need no reconcile."""
    if pod is None:
        return None
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    ports = [(c.get("name"), c.get("ports")) for c in _containers(pod)]
    return (meta.get("labels"), meta.get("uid"), status.get("podIP"), status.get("phase"),
            pod_is_ready(pod), (pod.get("spec") or {}).get("nodeName"), repr(ports),
            bool(meta.get("deletionTimestamp")))


def _address(pod):
    meta = pod["metadata"]
    ip = pod["status"]["podIP"]
    if not isinstance(ip, str):
        raise TypeError("status.podIP is %r, not a string" % (ip,))
    address = {"ip": ip}
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        address["nodeName"] = node
    address["targetRef"] = {"kind": "Pod", "name": meta["name"], "namespace": meta.get("namespace"),
                            "uid": meta.get("uid")}
    return address


def _pod_entry(pod, service_ports):
    """(ports signature, ports, ready, address) of one selected pod; None when it serves nothing."""
    status = pod.get("status") or {}
    if not status.get("podIP") or status.get("phase") in TERMINAL_PHASES:
        return None
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    ports = []
    for sp in service_ports:
        number = resolve_target_port(sp, pod)
        if number is None:
            continue
        port = {"port": number, "protocol": sp.get("protocol") or "TCP"}
        if sp.get("name"):
            port["name"] = sp["name"]
        ports.append(port)
    if service_ports and not ports:
        return None         # the pod serves none of the service's ports
    signature = tuple((p.get("name") or "", p["port"], p["protocol"]) for p in ports)
    return signature, ports, pod_is_ready(pod), _address(pod)


def desired_subsets(service, pods, on_bad_pod=None):
    """Subsets for `service` over the (already selected) pods: pods are grouped by the
    ports they resolve to, as a named targetPort may map to different ports per pod.
    A pod that cannot be read (wrong types) is left out and given to on_bad_pod(pod, exc)."""
    service_ports = [p for p in (service.get("spec") or {}).get("ports") or [] if isinstance(p, dict)]
    groups = {}
    for pod in pods:
        try:
            entry = _pod_entry(pod, service_ports)
        except Exception as exc:
            if on_bad_pod is None:
                raise
            on_bad_pod(pod, exc)
            continue
        if entry is None:
            continue
        signature, ports, ready, address = entry
        group = groups.setdefault(signature, {"addresses": [], "notReadyAddresses": [], "ports": ports})
        group["addresses" if ready else "notReadyAddresses"].append(address)
    subsets = []
    for signature in sorted(groups):
        group = groups[signature]
        order = (lambda a: (a["ip"], a["targetRef"]["name"]))
        subset = {}
        if group["addresses"]:
            subset["addresses"] = sorted(group["addresses"], key=order)
        if group["notReadyAddresses"]:
            subset["notReadyAddresses"] = sorted(group["notReadyAddresses"], key=order)
        subset["ports"] = sorted(group["ports"], key=lambda p: (p.get("name") or "", p["port"], p["protocol"]))
        subsets.append(subset)
    return subsets


def _owner_reference(service):
    return {"apiVersion": "v1", "kind": "Service", "name": service["metadata"]["name"],
            "uid": service["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def _owned_by_a_service(endpoints, name):
    return any(isinstance(r, dict) and r.get("kind") == "Service" and r.get("name") == name
               for r in endpoints["metadata"].get("ownerReferences") or [])


def _count(subsets, group):
    return sum(len(s.get(group) or []) for s in subsets)


class EndpointsController(Controller):
    name = "endpoints"
    watches = ("services", "pods", "endpoints")

    def __init__(self, store, events=None):
        super().__init__(store, events)
        self._selectors = {}      # (namespace, name) -> (resourceVersion, selector or None)

    # ---- keys ----

    def _selector(self, service):
        meta = service["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        rv = meta.get("resourceVersion")
        cached = self._selectors.get(key)
        if cached is not None and cached[0] == rv:
            return cached[1]
        labels = (service.get("spec") or {}).get("selector")
        try:
            selector = selector_from_labels(labels) if labels else None
        except SelectorError:
            selector = None
        self._selectors[key] = (rv, selector)
        return selector

    def keys_for(self, change):
        obj = change.object or change.previous
        meta = obj["metadata"]
        namespace = meta.get("namespace") or ""
        if change.resource == "services":
            if change.object is None:
                self._selectors.pop((namespace, meta["name"]), None)
            return [(namespace, meta["name"])]
        if change.resource == "endpoints":
            return [(namespace, meta["name"])]
        # pods
        if _endpoint_relevant(change.object) == _endpoint_relevant(change.previous):
            return []
        labels = [(p.get("metadata") or {}).get("labels") or {} for p in (change.previous, change.object) if p]
        keys = []
        for service in self.store.list("services", namespace):
            selector = self._selector(service)
            if selector is not None and any(selector.matches(ls) for ls in labels):
                keys.append((namespace, service["metadata"]["name"]))
        return keys

    def all_keys(self):
        return [(s["metadata"].get("namespace") or "", s["metadata"]["name"]) for s in self.store.list("services")]

    # ---- reconcile ----

    def _bad_pod(self, pod, exc):
        """A pod the endpoints cannot show: left out, the service's other pods still are."""
        self.object_failed("reconcile", "pods", pod, exc)

    def reconcile(self, key):
        namespace, name = key
        service = self.store.get("services", namespace, name)
        current = self.store.get("endpoints", namespace, name)
        if service is None:
            if current is None or not _owned_by_a_service(current, name):
                return None
            self.write([commands.delete("endpoints", namespace, name,
                                        precondition={"uid": current["metadata"]["uid"]})])
            return "deleted endpoints %s/%s: its service is gone" % (namespace, name)
        selector = self._selector(service)
        if selector is None:
            return None       # no selector: the user manages these endpoints
        pods = self.select("pods", self.store.list("pods", namespace),
                           lambda p: selector.matches((p.get("metadata") or {}).get("labels") or {}))
        subsets = desired_subsets(service, pods, self._bad_pod)
        owner = _owner_reference(service)
        labels = dict(service["metadata"].get("labels") or {})
        summary = "%d ready, %d not ready" % (_count(subsets, "addresses"), _count(subsets, "notReadyAddresses"))
        if current is None:
            obj = {"apiVersion": "v1", "kind": "Endpoints",
                   "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
                   "subsets": subsets}
            if labels:
                obj["metadata"]["labels"] = labels
            obj = stamp_new(apply_defaults("endpoints", obj))
            causes = validate_object("endpoints", obj)
            if causes:
                raise Retry("endpoints %s/%s would be invalid: %s" % (namespace, name, describe_causes(causes)),
                            delay=self.resync_period)
            self.write([commands.create("endpoints", obj)])
            return "created endpoints %s/%s: %s" % (namespace, name, summary)
        meta = current["metadata"]
        refs = meta.get("ownerReferences") or []
        wanted_refs = [r for r in refs if not (isinstance(r, dict) and r.get("kind") == "Service")] + [owner]
        if current.get("subsets") == subsets and refs == wanted_refs and (meta.get("labels") or {}) == labels:
            return None
        obj = copy.deepcopy(current)
        obj["subsets"] = subsets
        obj["metadata"]["ownerReferences"] = wanted_refs
        if labels:
            obj["metadata"]["labels"] = labels
        else:
            obj["metadata"].pop("labels", None)
        causes = validate_object("endpoints", obj)
        if causes:
            raise Retry("endpoints %s/%s would be invalid: %s" % (namespace, name, describe_causes(causes)),
                        delay=self.resync_period)
        self.write([commands.update("endpoints", namespace, name, obj,
                                    precondition={"resourceVersion": meta["resourceVersion"],
                                                  "uid": meta.get("uid")})])
        return "updated endpoints %s/%s: %s" % (namespace, name, summary)


def controllers(store, recorder, settings):
    controller = EndpointsController(store, recorder)
    controller.resync_period = settings.resync_period
    return [controller]
