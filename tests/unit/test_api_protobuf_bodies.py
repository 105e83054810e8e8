"""Protobuf request bodies (api/protobuf_bodies.py) for every kind the API serves: each
object is encoded here from its JSON form by tests/unit/protobuf_encoder.py (the way
Go writes it, zero scalars included) and must decode back to exactly that JSON.
The real kubectl's bytes are tested in test_api_protobuf_golden.py."""
import pytest
from hypothesis import given, settings, strategies as st

from shepherd_ha.api import protobuf_bodies
from shepherd_ha.api.errors import ApiError
from shepherd_ha.api.protobuf_bodies import MEDIA_TYPE, decode
from shepherd_ha.api.protobuf_schema import KINDS, MESSAGES
from shepherd_ha.model.resources import RESOURCES
from protobuf_encoder import MAGIC, encode, encode_message, envelope, length_delimited, number_field
from real_api import flask_client as api_client

META = {"name": "web", "namespace": "default", "labels": {"app": "web", "empty": ""},
        "annotations": {"a": "b"}, "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                         "name": "web-1", "uid": "u-1", "controller": True}],
        "finalizers": ["x/y"]}
POD_SPEC = {
    "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "conf", "configMap": {"name": "cm", "defaultMode": 0o644,
                                               "items": [{"key": "a", "path": "a.txt"}]}}],
    "containers": [{"name": "app", "image": "nginx:1.25", "command": ["sh", "-c"], "args": ["", "x"],
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP", "hostPort": 30001}],
                    "env": [{"name": "A", "value": "1"},
                            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": False}}},
                            {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "0"}},
                    "volumeMounts": [{"name": "scratch", "mountPath": "/tmp", "readOnly": True}],
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5},
                    "readinessProbe": {"tcpSocket": {"port": 8080}, "failureThreshold": 3},
                    "startupProbe": {"exec": {"command": ["true"]}},
                    "securityContext": {"runAsUser": 0, "privileged": False, "capabilities": {"add": ["NET_ADMIN"]}},
                    "imagePullPolicy": "IfNotPresent"}],
    "restartPolicy": "Always", "terminationGracePeriodSeconds": 0, "nodeSelector": {"disk": "ssd"},
    "nodeName": "node-a", "hostNetwork": True, "automountServiceAccountToken": False,
    "securityContext": {"supplementalGroups": [0, 5, -1], "fsGroup": 2000},
    "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
}
SELECTOR = {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}
TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": POD_SPEC}
T = "2026-01-02T03:04:05Z"
OBJECTS = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}, "spec": {"finalizers": ["kubernetes"]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": META, "spec": POD_SPEC,
     "status": {"phase": "Running", "podIP": "10.0.0.5", "startTime": T,
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": T}],
                "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0, "image": "nginx",
                                       "state": {"running": {"startedAt": T}}, "started": True}]}},
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
     "spec": {"unschedulable": True, "taints": [{"key": "k", "value": "v", "effect": "NoSchedule", "timeAdded": T}]},
     "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "addresses": [{"type": "InternalIP", "address": "10.1.0.1"}],
                "nodeInfo": {"kubeletVersion": "v1.32.0", "bootID": "b", "machineID": "m"},
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": T}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
     "spec": {"ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP", "nodePort": 30080},
                        {"name": "alt", "port": 81, "targetPort": 8081}],
              "selector": {"app": "web"}, "type": "NodePort", "clusterIP": "None", "ipFamilies": ["IPv4"],
              "sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}}}},
    {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"},
     "subsets": [{"addresses": [{"ip": "10.0.0.5", "nodeName": "node-a",
                                 "targetRef": {"kind": "Pod", "name": "p", "namespace": "default"}}],
                  "ports": [{"port": 8080, "protocol": "TCP"}]}]},
    {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e.1"}, "involvedObject": {"kind": "Pod", "name": "p"},
     "reason": "Started", "message": "m", "count": 3, "type": "Normal", "firstTimestamp": T, "lastTimestamp": T,
     "eventTime": "2026-01-02T03:04:05.123456Z", "source": {"component": "agent", "host": "node-a"}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "b", "empty": ""},
     "binaryData": {"bin": "AAE=", "none": ""}, "immutable": False},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"p": "cQ==", "e": ""},
     "stringData": {"x": "y"}, "type": "Opaque"},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": META,
     "spec": {"replicas": 0, "selector": SELECTOR, "template": TEMPLATE, "revisionHistoryLimit": 0,
              "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
              "minReadySeconds": 5, "paused": True},
     "status": {"replicas": 2, "conditions": [{"type": "Available", "status": "True", "lastUpdateTime": T}]}},
    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": META,
     "spec": {"replicas": 3, "selector": SELECTOR, "template": TEMPLATE}, "status": {"replicas": 3}},
    {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "web-1"}, "revision": 2,
     "data": {"spec": {"template": {"metadata": {"labels": {"app": "web"}}}}}},
    {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "node-a", "namespace": "kube-node-lease"},
     "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 40, "renewTime": "2026-01-02T03:04:05.500000Z"}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
     "rules": [{"verbs": ["get", "list"], "apiGroups": ["", "apps"], "resources": ["pods"], "resourceNames": ["a"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "cr"},
     "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
     "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
     "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
                  {"kind": "ServiceAccount", "name": "sa", "namespace": "default"}],
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "crb"},
     "subjects": [{"kind": "Group", "name": "ops", "apiGroup": "rbac.authorization.k8s.io"}],
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cr"}},
    {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {},
     "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods",
                                     "subresource": "eviction"}}},
    {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
     "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}},
    {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}},
    {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"},
     "deleteOptions": {"gracePeriodSeconds": 0, "preconditions": {"uid": "u-1"}, "dryRun": ["All"]}},
    {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 30, "propagationPolicy": "Foreground"},
    {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 4}},
]


def served_kinds():
    return {(r.api_version, r.kind) for r in RESOURCES.values()}


def test_every_served_kind_has_a_table_and_a_round_trip_here():
    assert served_kinds() <= set(KINDS), served_kinds() - set(KINDS)
    assert served_kinds() <= {(o["apiVersion"], o["kind"]) for o in OBJECTS}


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda o: o["kind"])
def test_each_kind_decodes_to_what_json_would_carry(obj):
    message = protobuf_bodies.message_of(obj["apiVersion"], obj["kind"])
    assert decode(encode(message, obj)) == obj


def test_zeros_go_writes_for_plain_fields_are_absent_but_pointer_zeros_are_kept():
    dep = decode(encode("apps.Deployment", OBJECTS[8]))
    assert dep["spec"]["replicas"] == 0 and dep["spec"]["revisionHistoryLimit"] == 0   # *int32: set to 0
    pod = decode(encode("core.Pod", OBJECTS[1]))
    assert pod["spec"]["terminationGracePeriodSeconds"] == 0 and pod["spec"]["automountServiceAccountToken"] is False
    assert "hostPID" not in pod["spec"] and "generateName" not in pod["metadata"]      # written as zero by Go
    assert pod["spec"]["containers"][0]["args"] == ["", "x"]     # an empty item of a list is kept


def test_a_field_this_server_does_not_know_names_its_number_and_kind_and_says_send_json():
    spec = encode_message("core.PodSpec", {"containers": [{"name": "a", "image": "b"}]}) + \
        length_delimited(99, "future")
    body = envelope("v1", "Pod", length_delimited(1, length_delimited(1, "p")) + length_delimited(2, spec))
    with pytest.raises(ApiError) as err:
        decode(body)
    assert err.value.code == 400
    message = str(err.value.message)
    assert "field number 99" in message and "PodSpec" in message and "Pod.spec" in message and "JSON" in message


@pytest.mark.parametrize("body, code, words", [
    (b"{}", 400, "does not start with k8s"),
    (envelope("v1", "ServiceAccount", b""), 415, "ServiceAccount"),
    (envelope("batch/v1", "Job", b""), 415, "Job"),
    (envelope("v1", "ConfigMap", length_delimited(1, length_delimited(1, b"\xff\xfe"))), 400, "UTF-8"),
    (envelope("v1", "ConfigMap", number_field(1, 5)), 400, "wire type"),
    (envelope("v1", "ConfigMap", b"\x0a\x7f"), 400, "past the end"),
    (MAGIC + length_delimited(1, length_delimited(1, "v1") + length_delimited(2, "ConfigMap")) +
     length_delimited(3, "gzip"), 400, "encoding"),
    (envelope("v1", "Event", length_delimited(6, number_field(1, 1 << 62))), 400, "range of a time"),
    (envelope("apps/v1", "ControllerRevision", length_delimited(2, length_delimited(1, "{nope"))), 400, "JSON"),
])
def test_bad_bodies_are_4xx_saying_what_and_to_send_json(body, code, words):
    with pytest.raises(ApiError) as err:
        decode(body)
    assert err.value.code == code and words in str(err.value.message) and "JSON" in str(err.value.message)


def post(client, path, body):
    return client.post(path, data=body, headers={"Content-Type": MEDIA_TYPE,
                                                 "Accept": MEDIA_TYPE + ",application/json"})


def test_the_api_stores_what_the_protobuf_body_says():
    client, _ = api_client()
    for obj, path in ((OBJECTS[6], "/api/v1/namespaces/default/configmaps"),
                      (dict(OBJECTS[3], metadata={"name": "web"}), "/api/v1/namespaces/default/services")):
        resp = post(client, path, encode(protobuf_bodies.message_of(obj["apiVersion"], obj["kind"]),
                                         dict(obj, metadata=dict(obj["metadata"], namespace="default"))))
        assert resp.status_code == 201, resp.get_json()
    cm = client.get("/api/v1/namespaces/default/configmaps/cm").get_json()
    assert cm["data"] == {"a": "b", "empty": ""} and cm["binaryData"] == {"bin": "AAE=", "none": ""}
    svc = client.get("/api/v1/namespaces/default/services/web").get_json()
    assert [p["targetPort"] for p in svc["spec"]["ports"]] == ["http", 8081]
    assert svc["spec"]["ports"][0]["nodePort"] == 30080


# ---- no byte sequence is a 500 ----

_VALID = [encode(protobuf_bodies.message_of(o["apiVersion"], o["kind"]), o) for o in OBJECTS]


def _decodes_or_4xx(body):
    try:
        out = decode(body)
    except ApiError as err:
        assert err.code in (400, 415), err
        assert "JSON" in str(err.message)
        return
    assert isinstance(out, dict) and isinstance(out["kind"], str)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_after_the_magic_are_a_400_or_415_never_an_exception(tail):
    _decodes_or_4xx(MAGIC + tail)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(_VALID), st.data())
def test_mutations_of_valid_bodies_are_decoded_or_refused_never_an_exception(body, data):
    body = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(("flip", "cut", "insert", "delete")))
        where = data.draw(st.integers(len(MAGIC), max(len(MAGIC), len(body) - 1)))
        if action == "flip" and where < len(body):
            body[where] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "cut":
            del body[where:]
        elif action == "insert":
            body[where:where] = data.draw(st.binary(min_size=1, max_size=8))
        elif where < len(body):
            del body[where]
    _decodes_or_4xx(bytes(body))


def test_mutated_bodies_through_the_api_are_never_a_500():
    client, _ = api_client()
    for i, body in enumerate(_VALID):
        for cut in range(len(MAGIC), len(body), max(1, len(body) // 15)):
            for variant in (body[:cut], body[:cut] + b"\xff" + body[cut + 1:]):
                resp = post(client, "/api/v1/namespaces/default/configmaps", variant)
                assert resp.status_code < 500, (i, cut, resp.get_json())


def test_every_table_entry_has_a_type_the_decoder_reads():
    simple = {"string", "int", "bool", "double", "float", "bytes", "quantity", "intorstring", "time",
              "microtime", "raw"}
    for name, table in MESSAGES.items():
        for number, (json_name, typ) in table.items():
            base = typ[2:] if typ.startswith("[]") else typ[4:] if typ.startswith("map:") else typ
            assert base.rstrip("?") in simple or base in MESSAGES, (name, number, typ)


@pytest.mark.parametrize("data, code", [("{\"x\": NaN}", 400), ("{\"x\": 1e999}", 400),
                                        ("{\"x\": \"\\ud800\"}", 422), ("[" * 150 + "]" * 150, 400)])
def test_embedded_json_in_a_protobuf_body_gets_the_checks_a_json_body_gets(data, code):
    """A RawExtension (ControllerRevision data) carries JSON inside the protobuf: NaN,
    Infinity, a lone surrogate or a nest past the depth limit are refused as they are in a
    JSON body, not stored (NaN would then be written out and break every reader)."""
    client, _ = api_client()
    body = envelope("apps/v1", "ControllerRevision", encode_message("apps.ControllerRevision", {
        "metadata": {"name": "cr", "namespace": "default"}, "revision": 1})
        + length_delimited(2, length_delimited(1, data)))
    resp = post(client, "/apis/apps/v1/namespaces/default/controllerrevisions", body)
    assert resp.status_code == code, resp.get_json()
    assert client.get("/apis/apps/v1/namespaces/default/controllerrevisions/cr").status_code == 404
