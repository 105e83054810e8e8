"""Pod Security admission and Secrets on a real 3-replica cluster.

Finding 4 of issue 14: any pod creator was root on every worker (hostPath /, the Docker
socket, hostNetwork, hostPort 22, privileged). Now such a pod is refused (403, naming
the level and each violation) in a namespace without a label (baseline), and allowed
in one labelled privileged; Deployments are checked on their template; a bad level is
a 422 on the namespace; the warn level gives a Warning header; an update that does not
touch the spec passes after the namespace became stricter. Secrets: stringData merged
into base64 data, immutable honoured, bad base64 refused."""
import base64

import pytest

from .helpers import assert_no_internal_errors, assert_status, call, describe, expect, unique

pytestmark = pytest.mark.integration
ENFORCE = "pod-security.kubernetes.io/enforce"
WARN = "pod-security.kubernetes.io/warn"
MERGE = {"Content-Type": "application/merge-patch+json"}


def root_pod(name):
    """The pod of finding 4."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "hostNetwork": True,
        "containers": [{"name": "main", "image": "busybox", "securityContext": {"privileged": True, "runAsUser": 0},
                        "ports": [{"containerPort": 22, "hostPort": 22}],
                        "volumeMounts": [{"name": "root", "mountPath": "/host"},
                                         {"name": "docker", "mountPath": "/var/run/docker.sock"}]}],
        "volumes": [{"name": "root", "hostPath": {"path": "/", "type": "DirectoryOrCreate"}},
                    {"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}]}}


def plain_pod(name, **spec):
    body = {"containers": [{"name": "main", "image": "busybox:1"}]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": body}


def namespace(url, labels):
    name = unique("adm")
    expect(call("POST", url + "/api/v1/namespaces", json={"metadata": {"name": name, "labels": labels}}), 201)
    return name


def pods(url, ns):
    return "%s/api/v1/namespaces/%s/pods" % (url, ns)


@pytest.fixture(scope="module")
def url(cluster):
    yield cluster.url(cluster.followers()[0])       # through a follower: forwarded writes too
    assert_no_internal_errors(cluster)


def test_finding_4_pod_is_refused_by_default_and_allowed_when_privileged(url):
    resp = call("POST", pods(url, "default"), json=root_pod("adm-root"))
    body = assert_status(resp, 403, "Forbidden")
    message = body["message"]
    assert message.startswith('pods "adm-root" is forbidden: violates PodSecurity "baseline:latest": '), message
    for words in ("host namespaces (hostNetwork=true)",
                  'privileged (container "main" must not set securityContext.privileged=true)',
                  'hostPath volumes (volumes "root", "docker")', 'hostPort (container "main" uses hostPort 22)'):
        assert words in message, message
    assert_status(call("GET", pods(url, "default") + "/adm-root"), 404)
    ns = namespace(url, {ENFORCE: "privileged"})
    created = expect(call("POST", pods(url, ns), json=root_pod("adm-root")), 201)
    assert created["spec"]["hostNetwork"] is True


def test_a_deployment_whose_template_breaks_the_level_is_refused(url):
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "adm-dep"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "adm"}},
                    "template": {"metadata": {"labels": {"app": "adm"}}, "spec": root_pod("x")["spec"]}}}
    resp = call("POST", url + "/apis/apps/v1/namespaces/default/deployments", json=dep)
    assert 'deployments "adm-dep" is forbidden: violates PodSecurity "baseline:latest"' in \
        assert_status(resp, 403, "Forbidden")["message"]
    ns = namespace(url, {ENFORCE: "privileged"})
    expect(call("POST", url + "/apis/apps/v1/namespaces/%s/deployments" % ns, json=dep), 201)


def test_a_bad_level_is_invalid_on_the_namespace(url):
    resp = call("POST", url + "/api/v1/namespaces", json={"metadata": {"name": unique("adm"),
                                                                       "labels": {ENFORCE: "strict"}}})
    assert "is not a Pod Security level" in assert_status(resp, 422, "Invalid")["message"]
    ns = namespace(url, {})
    resp = call("PATCH", url + "/api/v1/namespaces/" + ns, headers=MERGE,
                json={"metadata": {"labels": {WARN: "everything"}}})
    assert_status(resp, 422, "Invalid")


def test_restricted_needs_a_hardened_pod(url):
    ns = namespace(url, {ENFORCE: "restricted"})
    message = assert_status(call("POST", pods(url, ns), json=plain_pod("adm-plain")), 403)["message"]
    assert 'violates PodSecurity "restricted:latest"' in message and "runAsNonRoot != true" in message
    hardened = plain_pod("adm-hard", securityContext={"runAsNonRoot": True, "runAsUser": 1000,
                                                      "seccompProfile": {"type": "RuntimeDefault"}})
    hardened["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False,
                                                            "capabilities": {"drop": ["ALL"]}}
    expect(call("POST", pods(url, ns), json=hardened), 201)


def test_the_warn_level_adds_a_warning_header(url):
    ns = namespace(url, {WARN: "restricted"})
    resp = call("POST", pods(url, ns), json=plain_pod("adm-warned"))
    expect(resp, 201)
    warning = resp.headers.get("Warning", "")
    assert warning.startswith('299 - "would violate PodSecurity \\"restricted:latest\\": '), warning
    quiet = call("POST", pods(url, namespace(url, {})), json=plain_pod("adm-quiet"))
    assert quiet.status_code == 201 and "Warning" not in quiet.headers, describe(quiet)


def test_an_update_that_keeps_the_spec_passes_after_the_namespace_became_stricter(url):
    ns = namespace(url, {ENFORCE: "privileged"})
    expect(call("POST", pods(url, ns), json=plain_pod("adm-host", hostNetwork=True)), 201)
    expect(call("PATCH", url + "/api/v1/namespaces/" + ns, headers=MERGE,
                json={"metadata": {"labels": {ENFORCE: "baseline"}}}), 200)
    patched = expect(call("PATCH", pods(url, ns) + "/adm-host", headers=MERGE,
                          json={"metadata": {"labels": {"seen": "yes"}}}), 200)
    assert patched["metadata"]["labels"] == {"seen": "yes"}
    resp = call("PATCH", pods(url, ns) + "/adm-host", headers=MERGE,
                json={"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}})
    assert "host namespaces (hostNetwork=true)" in assert_status(resp, 403)["message"]


def test_a_security_context_field_the_agent_cannot_enforce_is_refused(url):
    pod = plain_pod("adm-selinux", securityContext={"seLinuxOptions": {"type": "container_t"}})
    body = assert_status(call("POST", pods(url, "default"), json=pod), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "spec.securityContext.seLinuxOptions"


def test_secrets_merge_string_data_and_honour_immutable(url):
    path = url + "/api/v1/namespaces/default/secrets"
    created = expect(call("POST", path, json={"metadata": {"name": "adm-db"}, "stringData": {"pass": "s3cr3t"},
                                              "data": {"user": base64.b64encode(b"admin").decode()},
                                              "immutable": True}), 201)
    assert "stringData" not in created and created["type"] == "Opaque"
    assert base64.b64decode(created["data"]["pass"]) == b"s3cr3t"
    got = expect(call("GET", path + "/adm-db"), 200)
    assert got["data"] == created["data"]
    resp = call("PATCH", path + "/adm-db", headers=MERGE, json={"stringData": {"pass": "other"}})
    assert_status(resp, 422, "Invalid")
    resp = call("POST", path, json={"metadata": {"name": "adm-bad"}, "data": {"k": "not base64!"}})
    assert assert_status(resp, 422)["details"]["causes"][0]["field"] == "data.k"
    listed = expect(call("GET", path), 200)
    assert listed["kind"] == "SecretList" and "adm-db" in [s["metadata"]["name"] for s in listed["items"]]
