"""The official Python client (`kubernetes`, typed models) against our clusters: a client
from the kubeconfig `local up` writes, and one case per kind the API serves, each saying
how to build the object with the typed models, how to change it with a strategic
(the client's default) and a merge patch, how to replace it, and what each change
must show. test_python_client.py runs every case through the same verbs.
"""
import datetime
from dataclasses import dataclass, field
from typing import Callable, Optional

import kubernetes
from kubernetes import client as k

MERGE = "application/merge-patch+json"


def api_client(kubeconfig, context=None):
    """An ApiClient from the kubeconfig (its CA, its admin token): its current context (the
    first replica) or `context` (shepherd-ID: that replica). Setting Configuration.host
    instead does not last: the client's token hook copies the kubeconfig's server back
    before each request."""
    config = k.Configuration()
    kubernetes.config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=config)
    config.retries = 0       # a dead replica fails at once: the tests choose where to go next
    return k.ApiClient(config)


def verb_function(api, kind, verb, all_namespaces=False):
    """The typed API function for `verb` (create, read, list, patch, replace, delete) of `kind`."""
    if all_namespaces:
        return getattr(api, "%s_%s_for_all_namespaces" % (verb, kind.suffix))
    return getattr(api, "%s_%s%s" % (verb, "namespaced_" if kind.namespaced else "", kind.suffix))


def now():
    return datetime.datetime.now(datetime.timezone.utc)


@dataclass
class Kind:
    plural: str
    api: type                   # CoreV1Api, AppsV1Api, ...
    suffix: str                 # the name in the API's functions: pod, config_map, ...
    namespaced: bool
    model: type                 # V1Pod, ...
    build: Callable             # (name, labels) -> a typed object to create
    # A strategic merge patch (the client's default content type) and what the result shows.
    strategic: dict = field(default_factory=lambda: {"metadata": {"annotations": {"step": "strategic"}}})
    strategic_check: Callable = lambda obj: obj.metadata.annotations["step"] == "strategic"
    # A JSON merge patch (`_content_type=MERGE`) and what the result shows.
    merge: dict = field(default_factory=lambda: {"metadata": {"annotations": {"step": "merge", "gone": None}}})
    merge_check: Callable = lambda obj: obj.metadata.annotations.get("step") == "merge" and \
        "gone" not in obj.metadata.annotations
    # Replace: a change to the object read back (typed), and what the result shows.
    mutate: Callable = lambda obj: setattr(obj.metadata, "annotations",
                                           dict(obj.metadata.annotations or {}, step="replaced"))
    replace_check: Callable = lambda obj: obj.metadata.annotations["step"] == "replaced"
    created_check: Optional[Callable] = None


def meta(name, labels):
    # "gone" is there for the merge patch to remove (null deletes a key)
    return k.V1ObjectMeta(name=name, labels=dict(labels), annotations={"gone": "soon"})


def _pod_spec(image="nginx:1.25"):
    return k.V1PodSpec(containers=[
        k.V1Container(name="main", image=image, env=[k.V1EnvVar(name="A", value="1")]),
        k.V1Container(name="side", image="busybox:1.36", command=["sleep", "3600"])])


def _template(labels):
    return k.V1PodTemplateSpec(metadata=k.V1ObjectMeta(labels=dict(labels)), spec=_pod_spec())


def _containers(obj):
    spec = obj.spec.template.spec if hasattr(obj.spec, "template") else obj.spec
    return {c.name: c for c in spec.containers}


# Strategic merge of containers by name: `main` changes, `side` stays, `main`'s env merges by name.
_CONTAINER_SMP = {"containers": [{"name": "main", "image": "nginx:1.26", "env": [{"name": "B", "value": "2"}]}]}


def _smp_kept_side(obj):
    c = _containers(obj)
    return set(c) == {"main", "side"} and c["main"].image == "nginx:1.26" and \
        [(e.name, e.value) for e in c["main"].env] in ([("B", "2"), ("A", "1")], [("A", "1"), ("B", "2")])


def _merge_replaced_list(obj):
    # a merge patch replaces the list whole: only `main` is left
    return set(_containers(obj)) == {"main"} and _containers(obj)["main"].image == "nginx:1.27"


def _set_image(image):
    def mutate(obj):
        _containers(obj)["main"].image = image
    return mutate


def _template_kind(plural, suffix, model, spec_model):
    def build(name, labels):
        selector = {"pyclient": name}
        return model(metadata=meta(name, labels), spec=spec_model(
            replicas=0, selector=k.V1LabelSelector(match_labels=selector), template=_template(selector)))
    return Kind(plural, k.AppsV1Api, suffix, True, model, build,
                strategic={"spec": {"template": {"spec": _CONTAINER_SMP}}}, strategic_check=_smp_kept_side,
                merge={"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}}}},
                merge_check=_merge_replaced_list,
                mutate=_set_image("nginx:1.28"), replace_check=lambda o: _containers(o)["main"].image == "nginx:1.28")


def _event(name, labels):
    t = now()
    return k.CoreV1Event(metadata=meta(name, labels), type="Normal", reason="Typed", message="from the typed client",
                         involved_object=k.V1ObjectReference(kind="ConfigMap", namespace=None, name="anything",
                                                             api_version="v1"),
                         source=k.V1EventSource(component="pyclient"), count=1, first_timestamp=t, last_timestamp=t)


def _event_count(obj):
    obj.count = 7


def _lease(name, labels):
    t = now()
    return k.V1Lease(metadata=meta(name, labels), spec=k.V1LeaseSpec(
        holder_identity="holder-a", lease_duration_seconds=40, acquire_time=t, renew_time=t))


def _renew(obj):
    obj.spec.holder_identity = "holder-b"
    obj.spec.renew_time = now()


def _rules(*verbs):
    return [k.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=list(verbs))]


def _subjects(*names):
    return [k.RbacV1Subject(kind="User", name=n, api_group="rbac.authorization.k8s.io") for n in names]


def _set_rules(obj):
    obj.rules = _rules("get", "list", "watch")


def _set_subjects(obj):
    obj.subjects = _subjects("carol")


_RULES_PATCH = {"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}
_SUBJECTS_PATCH = {"subjects": [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]}


def _verbs(obj):
    return [r.verbs for r in obj.rules]


def _subject_names(obj):
    return [s.name for s in obj.subjects]


def _node(name, labels):
    return k.V1Node(metadata=meta(name, labels), spec=k.V1NodeSpec(unschedulable=True))


def _service(name, labels):
    return k.V1Service(metadata=meta(name, labels), spec=k.V1ServiceSpec(
        selector={"pyclient": name}, ports=[k.V1ServicePort(name="http", port=80, target_port=8080),
                                            k.V1ServicePort(name="https", port=443)]))


def _service_ports(obj):
    return {p.port: p for p in obj.spec.ports}


def _endpoints(name, labels):
    return k.V1Endpoints(metadata=meta(name, labels), subsets=[k.V1EndpointSubset(
        addresses=[k.V1EndpointAddress(ip="10.250.0.1")], ports=[k.CoreV1EndpointPort(name="http", port=80)])])


def _endpoint_ips(obj):
    return [a.ip for s in obj.subsets for a in s.addresses]


def _add_address(obj):
    obj.subsets[0].addresses.append(k.V1EndpointAddress(ip="10.250.0.3"))


def _secret(name, labels):
    return k.V1Secret(metadata=meta(name, labels), type="Opaque", data={"user": "YWRtaW4="},
                      string_data={"plain": "text"})


def _secret_data(obj):
    obj.data = dict(obj.data, extra="eHl6")


def _configmap_data(obj):
    obj.data = dict(obj.data, c="3")


def _namespace(name, labels):
    return k.V1Namespace(metadata=meta(name, labels))


KINDS = [
    Kind("namespaces", k.CoreV1Api, "namespace", False, k.V1Namespace, _namespace,
         strategic={"metadata": {"labels": {"team": "blue"}}},
         strategic_check=lambda o: o.metadata.labels["team"] == "blue"),
    Kind("nodes", k.CoreV1Api, "node", False, k.V1Node, _node,
         strategic={"metadata": {"labels": {"zone": "a"}}},
         strategic_check=lambda o: o.metadata.labels["zone"] == "a" and "pyclient-kind" in o.metadata.labels,
         mutate=lambda o: setattr(o.spec, "unschedulable", False),
         replace_check=lambda o: not o.spec.unschedulable),
    Kind("pods", k.CoreV1Api, "pod", True, k.V1Pod, lambda name, labels: k.V1Pod(
        metadata=meta(name, labels), spec=_pod_spec()),
        # a pod's spec is immutable but for images: `main` changes by name, `side` stays
        strategic={"spec": {"containers": [{"name": "main", "image": "nginx:1.26"}]}},
        strategic_check=lambda o: list(_containers(o)) == ["main", "side"] and
        _containers(o)["main"].image == "nginx:1.26" and _containers(o)["main"].env[0].name == "A",
        mutate=_set_image("nginx:1.28"), replace_check=lambda o: _containers(o)["main"].image == "nginx:1.28"),
    Kind("services", k.CoreV1Api, "service", True, k.V1Service, _service,
         # ports merge by port: 80 changes its target, 443 stays
         strategic={"spec": {"ports": [{"port": 80, "targetPort": 9090}]}},
         strategic_check=lambda o: sorted(_service_ports(o)) == [80, 443] and
         _service_ports(o)[80].target_port == 9090 and _service_ports(o)[80].name == "http",
         merge={"spec": {"ports": [{"name": "only", "port": 8443}]}},
         merge_check=lambda o: sorted(_service_ports(o)) == [8443],
         created_check=lambda o: bool(o.spec.cluster_ip)),
    Kind("endpoints", k.CoreV1Api, "endpoints", True, k.V1Endpoints, _endpoints,
         # subsets have no strategy: a strategic patch replaces them whole, as Kubernetes does
         strategic={"subsets": [{"addresses": [{"ip": "10.250.0.2"}], "ports": [{"name": "http", "port": 80}]}]},
         strategic_check=lambda o: _endpoint_ips(o) == ["10.250.0.2"],
         mutate=_add_address, replace_check=lambda o: _endpoint_ips(o) == ["10.250.0.2", "10.250.0.3"]),
    Kind("events", k.CoreV1Api, "event", True, k.CoreV1Event, _event,
         mutate=_event_count, replace_check=lambda o: o.count == 7),
    Kind("configmaps", k.CoreV1Api, "config_map", True, k.V1ConfigMap,
         lambda name, labels: k.V1ConfigMap(metadata=meta(name, labels), data={"a": "1", "b": "2"}),
         strategic={"data": {"a": "10", "b": None}}, strategic_check=lambda o: o.data == {"a": "10"},
         mutate=_configmap_data, replace_check=lambda o: o.data == {"a": "10", "c": "3"}),
    Kind("secrets", k.CoreV1Api, "secret", True, k.V1Secret, _secret,
         strategic={"stringData": {"token": "t0k"}},
         strategic_check=lambda o: o.data.get("token") == "dDBr" and o.data["user"] == "YWRtaW4=",
         mutate=_secret_data, replace_check=lambda o: o.data["extra"] == "eHl6",
         created_check=lambda o: o.data == {"user": "YWRtaW4=", "plain": "dGV4dA=="} and not o.string_data),
    _template_kind("deployments", "deployment", k.V1Deployment, k.V1DeploymentSpec),
    _template_kind("replicasets", "replica_set", k.V1ReplicaSet, k.V1ReplicaSetSpec),
    Kind("controllerrevisions", k.AppsV1Api, "controller_revision", True, k.V1ControllerRevision,
         lambda name, labels: k.V1ControllerRevision(metadata=meta(name, labels), revision=1,
                                                     data={"spec": {"template": {"x": 1}}}),
         created_check=lambda o: o.revision == 1 and o.data == {"spec": {"template": {"x": 1}}}),
    Kind("leases", k.CoordinationV1Api, "lease", True, k.V1Lease, _lease,
         strategic={"spec": {"leaseDurationSeconds": 15}},
         strategic_check=lambda o: o.spec.lease_duration_seconds == 15 and o.spec.holder_identity == "holder-a",
         mutate=_renew, replace_check=lambda o: o.spec.holder_identity == "holder-b"),
    Kind("roles", k.RbacAuthorizationV1Api, "role", True, k.V1Role,
         lambda name, labels: k.V1Role(metadata=meta(name, labels), rules=_rules("get")),
         strategic=_RULES_PATCH, strategic_check=lambda o: _verbs(o) == [["get", "list"]],
         mutate=_set_rules, replace_check=lambda o: _verbs(o) == [["get", "list", "watch"]]),
    Kind("clusterroles", k.RbacAuthorizationV1Api, "cluster_role", False, k.V1ClusterRole,
         lambda name, labels: k.V1ClusterRole(metadata=meta(name, labels), rules=_rules("get")),
         strategic=_RULES_PATCH, strategic_check=lambda o: _verbs(o) == [["get", "list"]],
         mutate=_set_rules, replace_check=lambda o: _verbs(o) == [["get", "list", "watch"]]),
    Kind("rolebindings", k.RbacAuthorizationV1Api, "role_binding", True, k.V1RoleBinding,
         lambda name, labels: k.V1RoleBinding(metadata=meta(name, labels), subjects=_subjects("alice"),
                                              role_ref=k.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                                                   kind="ClusterRole", name="view")),
         strategic=_SUBJECTS_PATCH, strategic_check=lambda o: _subject_names(o) == ["bob"],
         mutate=_set_subjects, replace_check=lambda o: _subject_names(o) == ["carol"]),
    Kind("clusterrolebindings", k.RbacAuthorizationV1Api, "cluster_role_binding", False, k.V1ClusterRoleBinding,
         lambda name, labels: k.V1ClusterRoleBinding(metadata=meta(name, labels), subjects=_subjects("alice"),
                                                     role_ref=k.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                                                          kind="ClusterRole", name="view")),
         strategic=_SUBJECTS_PATCH, strategic_check=lambda o: _subject_names(o) == ["bob"],
         mutate=_set_subjects, replace_check=lambda o: _subject_names(o) == ["carol"]),
]
