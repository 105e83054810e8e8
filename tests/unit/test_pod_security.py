"""The Pod Security Standards checks (shepherd_ha/model/pod_security.py), one rule at a
time, at each level, with Kubernetes' wording of the violation."""
import pytest

from shepherd_ha.model import pod_security as PSS
from shepherd_ha.model.validation import validate_object


def spec(**fields):
    s = {"containers": [{"name": "main", "image": "busybox"}]}
    s.update(fields)
    return s


def container(**fields):
    c = {"name": "main", "image": "busybox"}
    c.update(fields)
    return {"containers": [c]}


RESTRICTED_OK = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "main", "image": "busybox", "securityContext": {
                     "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}


@pytest.mark.parametrize("pod_spec, words", [
    (spec(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), 'hostPath volumes (volume "root")'),
    (spec(volumes=[{"name": "a", "hostPath": {"path": "/a"}}, {"name": "b", "hostPath": {"path": "/b"}}]),
     'hostPath volumes (volumes "a", "b")'),
    (spec(hostNetwork=True), "host namespaces (hostNetwork=true)"),
    (spec(hostPID=True, hostIPC=True), "host namespaces (hostPID=true, hostIPC=true)"),
    (container(securityContext={"privileged": True}),
     'privileged (container "main" must not set securityContext.privileged=true)'),
    (container(ports=[{"containerPort": 22, "hostPort": 22}]), 'hostPort (container "main" uses hostPort 22)'),
    (container(securityContext={"capabilities": {"add": ["NET_ADMIN"]}}),
     'non-default capabilities (container "main" must not include "NET_ADMIN" in securityContext.capabilities.add)'),
    (container(securityContext={"capabilities": {"add": ["NET_RAW"]}}), "non-default capabilities"),
    (spec(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}),
     "forbidden sysctls (kernel.msgmax)"),
    (spec(securityContext={"seccompProfile": {"type": "Unconfined"}}),
     'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")'),
    (container(securityContext={"seccompProfile": {"type": "Unconfined"}}),
     'seccompProfile (container "main" must not set'),
    (container(securityContext={"appArmorProfile": {"type": "Unconfined"}}), "forbidden AppArmor profile"),
    (container(securityContext={"procMount": "Unmasked"}), "procMount"),
    (spec(securityContext={"seLinuxOptions": {"type": "spc_t"}}), "seLinuxOptions"),
    (spec(securityContext={"windowsOptions": {"hostProcess": True}}), "hostProcess"),
])
def test_baseline_refuses_each_escape_and_privileged_allows_it(pod_spec, words):
    found = PSS.check("baseline", pod_spec)
    assert any(words in v for v in found), found
    assert any(words in v for v in PSS.check("restricted", pod_spec))      # cumulative
    assert PSS.check("privileged", pod_spec) == []


@pytest.mark.parametrize("pod_spec", [
    spec(),
    container(ports=[{"containerPort": 80, "hostPort": 0}]),
    container(securityContext={"capabilities": {"add": sorted(PSS.BASELINE_CAPABILITIES)}}),
    spec(securityContext={"sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"}]}),
    spec(securityContext={"seccompProfile": {"type": "RuntimeDefault"}}),
    spec(hostNetwork=False, hostPID=False),
    container(securityContext={"privileged": False}),
    spec(volumes=[{"name": "c", "configMap": {"name": "x"}}, {"name": "e", "emptyDir": {}}]),
])
def test_baseline_allows_the_default_pod(pod_spec):
    assert PSS.check("baseline", pod_spec) == []


def test_restricted_allows_a_hardened_pod_and_names_each_missing_setting():
    assert PSS.check("restricted", RESTRICTED_OK) == []
    found = PSS.check("restricted", spec())
    text = ", ".join(found)
    for words in ('allowPrivilegeEscalation != false (container "main" must set '
                  'securityContext.allowPrivilegeEscalation=false)',
                  'unrestricted capabilities (container "main" must set securityContext.capabilities.drop=["ALL"])',
                  'runAsNonRoot != true (pod or container "main" must set securityContext.runAsNonRoot=true)',
                  'seccompProfile (pod or container "main" must set securityContext.seccompProfile.type to '
                  '"RuntimeDefault" or "Localhost")'):
        assert words in text, text
    assert PSS.check("baseline", spec()) == []


@pytest.mark.parametrize("change, words", [
    (lambda s: s["containers"][0]["securityContext"]["capabilities"].update(add=["CHOWN"]),
     'must not include capabilities other than "NET_BIND_SERVICE"'),
    (lambda s: s["securityContext"].update(runAsUser=0), "runAsUser=0 (pod must not set runAsUser=0)"),
    (lambda s: s["containers"][0]["securityContext"].update(runAsNonRoot=False), "runAsNonRoot != true"),
    (lambda s: s.update(volumes=[{"name": "h", "hostPath": {"path": "/x"}}]),
     'restricted volume types (volume "h" uses restricted volume type "hostPath")'),
    (lambda s: s["containers"][0]["securityContext"].update(allowPrivilegeEscalation=True),
     "allowPrivilegeEscalation != false"),
])
def test_restricted_refuses_each_weakening(change, words):
    import copy
    s = copy.deepcopy(RESTRICTED_OK)
    change(s)
    found = PSS.check("restricted", s)
    assert any(words in v for v in found), found


def test_restricted_allows_net_bind_service_and_container_level_settings():
    s = {"containers": [{"name": "web", "image": "busybox", "securityContext": {
        "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}, "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}],
        "volumes": [{"name": "s", "secret": {"secretName": "x"}}]}
    assert PSS.check("restricted", s) == []


def test_the_namespace_label_picks_the_level_and_baseline_is_the_default():
    def ns(labels):
        return {"metadata": {"name": "n", "labels": labels}}
    assert PSS.namespace_levels(None) == ("baseline", None)
    assert PSS.namespace_levels(ns({})) == ("baseline", None)
    assert PSS.namespace_levels(ns({PSS.ENFORCE_LABEL: "privileged"})) == ("privileged", None)
    assert PSS.namespace_levels(ns({PSS.ENFORCE_LABEL: "restricted", PSS.WARN_LABEL: "restricted"})) == \
        ("restricted", "restricted")


def test_a_namespace_with_a_bad_level_is_invalid():
    bad = {"metadata": {"name": "n", "labels": {PSS.ENFORCE_LABEL: "strict"}}}
    causes = validate_object("namespaces", bad)
    assert causes and causes[0].field == "metadata.labels[%s]" % PSS.ENFORCE_LABEL
    assert "'strict' is not a Pod Security level: use one of privileged, baseline, restricted" in causes[0].message
    assert validate_object("namespaces", {"metadata": {"name": "n", "labels": {PSS.WARN_LABEL: "x"}}})
    assert validate_object("namespaces", {"metadata": {"name": "n", "labels": {PSS.ENFORCE_LABEL: "restricted"}}}) == []


def test_the_message_is_kubernetes_sentence():
    found = PSS.check("baseline", spec(volumes=[{"name": "root", "hostPath": {"path": "/"}}], hostNetwork=True))
    assert PSS.forbidden_message("pods", "x", "baseline", found) == (
        'pods "x" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), '
        'hostPath volumes (volume "root")')
