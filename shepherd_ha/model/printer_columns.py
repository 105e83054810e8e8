"""The columns kubectl shows for each kind, computed on the server (Tables).

Kubernetes' own columns per kind (names, order, types, `-o wide` ones at priority 1)
and its cell texts (pod STATUS as kubectl derives it, ages as HumanDuration). Pure:
the caller passes `now`. A kind without an entry gets NAME and AGE.
"""
from dataclasses import dataclass
from typing import Callable

from .durations import age, human_duration
from .times import parse_time
from .selectors import LabelSelector, SelectorError

NONE = "<none>"


@dataclass(frozen=True)
class Column:
    name: str
    type: str                   # string, integer, number, boolean, date
    description: str
    cell: Callable              # (object, now) -> cell value
    priority: int = 0           # 1: only with `-o wide`
    format: str = ""            # "name" for the object's name column

    def definition(self):
        return {"name": self.name, "type": self.type, "format": self.format,
                "description": self.description, "priority": self.priority}


def _meta(o):
    return o.get("metadata") or {} if isinstance(o, dict) else {}


def _spec(o):
    v = o.get("spec") if isinstance(o, dict) else None
    return v if isinstance(v, dict) else {}


def _status(o):
    v = o.get("status") if isinstance(o, dict) else None
    return v if isinstance(v, dict) else {}


def _list(v):
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


NAME = Column("Name", "string", "Name must be unique within a namespace.",
              lambda o, now: _meta(o).get("name", ""), format="name")
AGE = Column("Age", "string", "Time since the object was created (metadata.creationTimestamp).",
             lambda o, now: age(_meta(o).get("creationTimestamp"), now))


# ---- pods ----

def _container_statuses(pod):
    return _list(_status(pod).get("containerStatuses"))


def pod_ready(pod, now=None):
    total = len(_list(_spec(pod).get("containers")))
    ready = sum(1 for cs in _container_statuses(pod) if cs.get("ready") is True
                and isinstance((cs.get("state") or {}).get("running"), dict))
    return "%d/%d" % (ready, total)


def _terminated_text(terminated, prefix=""):
    if terminated.get("reason"):
        return prefix + terminated["reason"]
    if _int(terminated.get("signal")):
        return "%sSignal:%d" % (prefix, terminated["signal"])
    return "%sExitCode:%d" % (prefix, _int(terminated.get("exitCode")))


def _init_status(pod):
    """(reason, initializing) from the init containers, as kubectl reads them."""
    inits = _list(_spec(pod).get("initContainers"))
    for i, cs in enumerate(_list(_status(pod).get("initContainerStatuses"))):
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if isinstance(terminated, dict) and _int(terminated.get("exitCode")) == 0 and not terminated.get("signal"):
            continue
        if isinstance(terminated, dict):
            return _terminated_text(terminated, "Init:"), True
        if isinstance(waiting, dict) and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            return "Init:" + waiting["reason"], True
        return "Init:%d/%d" % (i, len(inits)), True
    return None, False


def _condition_true(obj, kind):
    return any(c.get("type") == kind and c.get("status") == "True" for c in _list(_status(obj).get("conditions")))


def pod_status(pod, now=None):
    """The STATUS kubectl shows: the phase (or status.reason), else the reason of a
    waiting or terminated container (ContainerCreating, CrashLoopBackOff, Completed,
    Error...), Init:... while init containers run, Terminating once deleted."""
    st = _status(pod)
    reason = st.get("reason") or st.get("phase") or "Pending"
    init_reason, initializing = _init_status(pod)
    if initializing:
        reason = init_reason
    if not initializing or _condition_true(pod, "Initialized"):
        has_running = False
        for cs in reversed(_container_statuses(pod)):
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = waiting["reason"]
            elif isinstance(terminated, dict) and terminated.get("reason"):
                reason = terminated["reason"]
            elif isinstance(terminated, dict):
                reason = _terminated_text(terminated)
            elif cs.get("ready") is True and isinstance(state.get("running"), dict):
                has_running = True
        # A pod whose containers finished but one still runs is Running (kubectl does the same).
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(pod, "Ready") else "NotReady"
    if _meta(pod).get("deletionTimestamp"):
        reason = "Unknown" if st.get("reason") == "NodeLost" else "Terminating"
    return reason


def pod_restarts(pod, now):
    """Restarts, with how long ago the last one was when known: "3 (5m ago)"."""
    restarts, last = 0, None
    for cs in _container_statuses(pod):
        restarts += _int(cs.get("restartCount"))
        finished = parse_time(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
        if finished is not None and (last is None or finished > last):
            last = finished
    if last is None or now is None:
        return restarts
    return "%d (%s ago)" % (restarts, human_duration((now - last).total_seconds()))


def _readiness_gates(pod, now):
    gates = _list(_spec(pod).get("readinessGates"))
    if not gates:
        return NONE
    true = sum(1 for g in gates if _condition_true(pod, g.get("conditionType")))
    return "%d/%d" % (true, len(gates))


POD_COLUMNS = (
    NAME,
    Column("Ready", "string", "The ready containers of the pod, out of all its containers.", pod_ready),
    Column("Status", "string", "The aggregate status of the containers in this pod.", pod_status),
    Column("Restarts", "string", "The number of times the containers in this pod have been restarted "
           "and when the last container in this pod has restarted.", pod_restarts),
    AGE,
    Column("IP", "string", "IP address allocated to the pod.",
           lambda o, now: _status(o).get("podIP") or NONE, priority=1),
    Column("Node", "string", "Name of the node the pod is bound to.",
           lambda o, now: _spec(o).get("nodeName") or NONE, priority=1),
    Column("Nominated Node", "string", "Name of the node nominated for the pod.",
           lambda o, now: _status(o).get("nominatedNodeName") or NONE, priority=1),
    Column("Readiness Gates", "string", "The readiness gates of the pod that are true, out of all.",
           _readiness_gates, priority=1),
)


# ---- deployments ----

def selector_text(spec_selector):
    try:
        text = str(LabelSelector.from_spec(spec_selector))
    except SelectorError:
        return NONE
    return text or NONE


def _template_containers(d):
    return _list(_spec((_spec(d).get("template") or {})).get("containers"))


def _deployment_ready(d, now):
    replicas = _spec(d).get("replicas")
    return "%d/%d" % (_int(_status(d).get("readyReplicas")), replicas if isinstance(replicas, int) else 1)


DEPLOYMENT_COLUMNS = (
    NAME,
    Column("Ready", "string", "Number of the pods that are ready, out of the desired replicas.", _deployment_ready),
    Column("Up-to-date", "integer", "Total number of pods of the deployment that have the desired template.",
           lambda o, now: _int(_status(o).get("updatedReplicas"))),
    Column("Available", "integer", "Total number of pods of the deployment available to serve.",
           lambda o, now: _int(_status(o).get("availableReplicas"))),
    AGE,
    Column("Containers", "string", "Names of each container in the template.",
           lambda o, now: ",".join(str(c.get("name", "")) for c in _template_containers(o)), priority=1),
    Column("Images", "string", "Images referenced by each container in the template.",
           lambda o, now: ",".join(str(c.get("image", "")) for c in _template_containers(o)), priority=1),
    Column("Selector", "string", "Label query over the pods of the deployment.",
           lambda o, now: selector_text(_spec(o).get("selector")), priority=1),
)


REPLICA_SET_COLUMNS = (
    NAME,
    Column("Desired", "integer", "Number of desired pods.", lambda o, now: _int(_spec(o).get("replicas"))),
    Column("Current", "integer", "Number of pods the replica set has.",
           lambda o, now: _int(_status(o).get("replicas"))),
    Column("Ready", "integer", "Number of its pods that are ready.",
           lambda o, now: _int(_status(o).get("readyReplicas"))),
    AGE,
    Column("Containers", "string", "Names of each container in the template.",
           lambda o, now: ",".join(str(c.get("name", "")) for c in _template_containers(o)), priority=1),
    Column("Images", "string", "Images referenced by each container in the template.",
           lambda o, now: ",".join(str(c.get("image", "")) for c in _template_containers(o)), priority=1),
    Column("Selector", "string", "Label query over the pods of the replica set.",
           lambda o, now: selector_text(_spec(o).get("selector")), priority=1),
)


# ---- nodes ----

def node_status(node, now=None):
    ready = [c for c in _list(_status(node).get("conditions")) if c.get("type") == "Ready"]
    text = "Unknown" if not ready else ("Ready" if ready[-1].get("status") == "True" else "NotReady")
    if _spec(node).get("unschedulable") is True:
        text += ",SchedulingDisabled"
    return text


def node_roles(node, now=None):
    roles = set()
    for key, value in (_meta(node).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/"):]:
            roles.add(key[len("node-role.kubernetes.io/"):])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or NONE


def _address(kind):
    def cell(node, now):
        for a in _list(_status(node).get("addresses")):
            if a.get("type") == kind and a.get("address"):
                return a["address"]
        return NONE
    return cell


def _node_info(key, default="<unknown>"):
    return lambda o, now: (_status(o).get("nodeInfo") or {}).get(key) or default


NODE_COLUMNS = (
    NAME,
    Column("Status", "string", "The status of the node (its Ready condition, and SchedulingDisabled "
           "when cordoned).", node_status),
    Column("Roles", "string", "The roles of the node (node-role.kubernetes.io/ labels).", node_roles),
    AGE,
    Column("Version", "string", "Version of the node agent (nodeInfo.kubeletVersion).", _node_info("kubeletVersion", "")),
    Column("Internal-IP", "string", "The node's internal IP address.", _address("InternalIP"), priority=1),
    Column("External-IP", "string", "The node's external IP address.", _address("ExternalIP"), priority=1),
    Column("OS-Image", "string", "The operating system image of the node.", _node_info("osImage"), priority=1),
    Column("Kernel-Version", "string", "The kernel version of the node.", _node_info("kernelVersion"), priority=1),
    Column("Container-Runtime", "string", "The container runtime and its version.",
           _node_info("containerRuntimeVersion"), priority=1),
)


# ---- services ----

def service_ports(svc, now=None):
    out = []
    for p in _list(_spec(svc).get("ports")):
        proto = p.get("protocol") or "TCP"
        if p.get("nodePort"):
            out.append("%s:%s/%s" % (p.get("port"), p["nodePort"], proto))
        else:
            out.append("%s/%s" % (p.get("port"), proto))
    return ",".join(out) or NONE


def _external_ip(svc, now):
    spec = _spec(svc)
    kind = spec.get("type") or "ClusterIP"
    ips = [str(ip) for ip in spec.get("externalIPs") or [] if ip]
    if kind == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname") for i in
                   _list(((_status(svc).get("loadBalancer") or {}).get("ingress")))]
        ips += [i for i in ingress if i]
        return ",".join(ips) or "<pending>"
    if kind == "ExternalName":
        return spec.get("externalName") or NONE
    return ",".join(ips) or NONE


def _service_selector(svc, now):
    sel = _spec(svc).get("selector")
    if not isinstance(sel, dict) or not sel:
        return NONE
    return ",".join("%s=%s" % (k, sel[k]) for k in sorted(sel))


SERVICE_COLUMNS = (
    NAME,
    Column("Type", "string", "The type of the service.", lambda o, now: _spec(o).get("type") or "ClusterIP"),
    Column("Cluster-IP", "string", "The virtual IP of the service.",
           lambda o, now: _spec(o).get("clusterIP") or NONE),
    Column("External-IP", "string", "The external IPs of the service.", _external_ip),
    Column("Port(s)", "string", "The ports the service exposes.", service_ports),
    AGE,
    Column("Selector", "string", "The labels of the pods the service routes to.", _service_selector, priority=1),
)


# ---- the others ----

def endpoints_text(ep, now=None, most=3):
    addresses = []
    for subset in _list((ep or {}).get("subsets")):
        ports = _list(subset.get("ports")) or [{}]
        for address in _list(subset.get("addresses")):
            for port in ports:
                ip = address.get("ip", "")
                addresses.append("%s:%s" % (ip, port["port"]) if "port" in port else ip)
    if not addresses:
        return NONE
    text = ",".join(addresses[:most])
    return text + (" + %d more..." % (len(addresses) - most) if len(addresses) > most else "")


def _event_time(e, *keys):
    for key in keys:
        if e.get(key):
            return e[key]
    return _meta(e).get("creationTimestamp")


def _event_source(e, now):
    src = e.get("source") if isinstance(e.get("source"), dict) else {}
    component = src.get("component") or e.get("reportingComponent") or ""
    host = src.get("host") or ""
    return ", ".join(x for x in (component, host) if x) or NONE


def _involved(e):
    v = e.get("involvedObject")
    return v if isinstance(v, dict) else {}


EVENT_COLUMNS = (
    Column("Last Seen", "string", "Time since the event was last seen.",
           lambda o, now: age(_event_time(o, "lastTimestamp", "eventTime", "firstTimestamp"), now)),
    Column("Type", "string", "The type of the event (Normal, Warning).", lambda o, now: o.get("type") or ""),
    Column("Reason", "string", "Why the event happened, in a word.", lambda o, now: o.get("reason") or ""),
    Column("Object", "string", "The object the event is about.",
           lambda o, now: "%s/%s" % (str(_involved(o).get("kind") or "").lower(), _involved(o).get("name") or "")),
    Column("Subobject", "string", "The part of the object the event is about.",
           lambda o, now: _involved(o).get("fieldPath") or "", priority=1),
    Column("Source", "string", "The component that reported the event.", _event_source, priority=1),
    Column("Message", "string", "What happened, for a person.", lambda o, now: o.get("message") or ""),
    Column("First Seen", "string", "Time since the event was first seen.",
           lambda o, now: age(_event_time(o, "firstTimestamp", "eventTime"), now), priority=1),
    Column("Count", "string", "How many times the event was seen.",
           lambda o, now: _int(o.get("count")) or 1, priority=1),
    Column("Name", "string", "The event's name.", lambda o, now: _meta(o).get("name", ""), priority=1,
           format="name"),
)


def _controller_of(obj, now):
    for ref in _list(_meta(obj).get("ownerReferences")):
        if ref.get("controller") is True:
            group = str(ref.get("apiVersion") or "").rpartition("/")[0]
            kind = str(ref.get("kind") or "").lower()
            return "%s%s/%s" % (kind, "." + group if group else "", ref.get("name") or "")
    return NONE


def _subjects(kind):
    return lambda o, now: ",".join(str(x.get("name")) for x in _list(o.get("subjects")) if x.get("kind") == kind)


# kubectl's: a role's creation time; a binding's role and (wide) subjects.
_ROLE = (NAME, Column("Created At", "date", "When the role was created.",
                      lambda o, now: _meta(o).get("creationTimestamp") or ""))
_BINDING = (NAME, Column("Role", "string", "The role the binding grants.",
                         lambda o, now: "%s/%s" % ((o.get("roleRef") or {}).get("kind") or "",
                                                   (o.get("roleRef") or {}).get("name") or "")), AGE,
            *(Column(title, "string", "The %s the binding names." % title.lower(), _subjects(kind), priority=1)
              for title, kind in (("Users", "User"), ("Groups", "Group"), ("ServiceAccounts", "ServiceAccount"))))

COLUMNS = {
    "pods": POD_COLUMNS,
    "secrets": (NAME, Column("Type", "string", "The type of the secret.", lambda o, now: o.get("type") or ""),
                Column("Data", "integer", "Number of keys in the secret.", lambda o, now: len(o.get("data") or {})),
                AGE),
    "roles": _ROLE, "clusterroles": _ROLE, "rolebindings": _BINDING, "clusterrolebindings": _BINDING,
    "deployments": DEPLOYMENT_COLUMNS,
    "replicasets": REPLICA_SET_COLUMNS,
    "nodes": NODE_COLUMNS,
    "services": SERVICE_COLUMNS,
    "namespaces": (NAME, Column("Status", "string", "The phase of the namespace.",
                                lambda o, now: _status(o).get("phase") or "Active"), AGE),
    "configmaps": (NAME, Column("Data", "integer", "Number of keys in the config map.",
                                lambda o, now: len(o.get("data") or {}) + len(o.get("binaryData") or {})), AGE),
    "endpoints": (NAME, Column("Endpoints", "string", "The ready addresses and ports.", endpoints_text), AGE),
    "events": EVENT_COLUMNS,
    "leases": (NAME, Column("Holder", "string", "The holder of the lease.",
                            lambda o, now: _spec(o).get("holderIdentity") or ""), AGE),
    "controllerrevisions": (NAME, Column("Controller", "string", "The object that owns the revision.",
                                         _controller_of),
                            Column("Revision", "integer", "The revision number.",
                                   lambda o, now: _int(o.get("revision"))), AGE),
}


def columns_for(plural):
    return COLUMNS.get(plural, (NAME, AGE))


def cells(columns, obj, now):
    return [c.cell(obj, now) for c in columns]
