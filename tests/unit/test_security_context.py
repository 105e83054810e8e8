"""securityContext: what validation refuses (fields the agent cannot enforce) and how
the accepted fields become Docker options (agent/security_context.py, agent/spec.py,
DockerRuntime's create_kwargs)."""
import docker
import pytest

from agent import security_context as S
from agent import spec as P
from agent.runtime.docker_runtime import create_kwargs
from shepherd_ha.model.validation import validate_object


def pod(pod_sc=None, sc=None, **spec):
    c = {"name": "main", "image": "busybox"}
    if sc is not None:
        c["securityContext"] = sc
    s = {"containers": [c]}
    if pod_sc is not None:
        s["securityContext"] = pod_sc
    s.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": s}


def causes(obj):
    return {c.field: c.message for c in validate_object("pods", obj)}


@pytest.mark.parametrize("obj, field, words", [
    (pod(pod_sc={"seLinuxOptions": {"type": "container_t"}}), "spec.securityContext.seLinuxOptions",
     "is not supported (the nodes do not run SELinux labelling)"),
    (pod(sc={"windowsOptions": {"runAsUserName": "x"}}), "spec.containers[0].securityContext.windowsOptions",
     "is not supported (the nodes run Linux containers only)"),
    (pod(sc={"procMount": "Unmasked"}), "spec.containers[0].securityContext.procMount", "is not supported"),
    (pod(sc={"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}),
     "spec.containers[0].securityContext.seccompProfile.type", '"Localhost" is not supported'),
    (pod(pod_sc={"appArmorProfile": {"type": "Localhost"}}), "spec.securityContext.appArmorProfile.type",
     '"Localhost" is not supported'),
    (pod(pod_sc={"fsGroupChangePolicy": "Always"}), "spec.securityContext.fsGroupChangePolicy", "is not supported"),
    (pod(sc={"runAsUser": -1}), "spec.containers[0].securityContext.runAsUser", "must be an integer from 0"),
    (pod(sc={"runAsUser": 0, "runAsNonRoot": True}), "spec.containers[0].securityContext.runAsNonRoot",
     "is true while runAsUser is 0"),
    (pod(sc={"privileged": True, "allowPrivilegeEscalation": False}),
     "spec.containers[0].securityContext.allowPrivilegeEscalation", "cannot be false while privileged is true"),
    (pod(sc={"capabilities": {"add": ["net admin"]}}), "spec.containers[0].securityContext.capabilities.add[0]",
     "is not a capability name"),
    (pod(sc={"capabilities": {"keep": ["CHOWN"]}}), "spec.containers[0].securityContext.capabilities.keep",
     "is not a capabilities field"),
    (pod(sc={"readOnlyRootFilesystem": "yes"}), "spec.containers[0].securityContext.readOnlyRootFilesystem",
     "must be true or false"),
    (pod(pod_sc={"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]}, hostNetwork=True),
     "spec.securityContext.sysctls[0].name", "cannot be set with hostNetwork"),
    (pod(pod_sc={"sysctls": [{"name": "Bad Name", "value": "1"}]}), "spec.securityContext.sysctls[0].name",
     "is not a sysctl name"),
    (pod(pod_sc={"supplementalGroups": ["x"]}), "spec.securityContext.supplementalGroups[0]", "must be an integer"),
    (pod(hostPID="yes"), "spec.hostPID", "must be true or false"),
])
def test_fields_the_agent_cannot_enforce_or_bad_values_are_refused(obj, field, words):
    found = causes(obj)
    assert field in found and words in found[field], found


def test_every_enforced_field_is_accepted():
    obj = pod(pod_sc={"runAsUser": 1000, "runAsGroup": 3000, "runAsNonRoot": True, "supplementalGroups": [4000],
                      "fsGroup": 2000, "sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}],
                      "seccompProfile": {"type": "RuntimeDefault"}, "appArmorProfile": {"type": "RuntimeDefault"}},
              sc={"runAsUser": 1001, "runAsGroup": 3001, "runAsNonRoot": True, "readOnlyRootFilesystem": True,
                  "privileged": False, "allowPrivilegeEscalation": False, "procMount": "Default",
                  "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
                  "seccompProfile": {"type": "Unconfined"}}, hostPID=False, hostIPC=False)
    assert causes(obj) == {}


def test_the_container_wins_over_the_pod_and_the_options_reach_docker():
    obj = pod(pod_sc={"runAsUser": 1000, "runAsGroup": 3000, "supplementalGroups": [4000], "fsGroup": 2000,
                      "sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"},
                                  {"name": "kernel.shm_rmid_forced", "value": "1"}]},
              sc={"runAsUser": 1001, "capabilities": {"add": ["NET_ADMIN"], "drop": ["CAP_CHOWN"]},
                  "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                  "seccompProfile": {"type": "Unconfined"}}, hostPID=True, hostIPC=True)
    c = obj["spec"]["containers"][0]
    config = P.container_config(obj, c, "n1", "10.0.0.1", 0)
    assert config.user == "1001:3000"
    assert config.group_add == ["4000", "2000"]
    assert (config.cap_add, config.cap_drop) == (["NET_ADMIN"], ["CHOWN"])
    assert config.read_only and not config.privileged
    assert config.security_opt == ["no-new-privileges:true", "seccomp=unconfined"]
    assert config.sysctls == {"net.ipv4.tcp_syncookies": "1", "kernel.shm_rmid_forced": "1"}
    assert (config.pid_mode, config.ipc_mode) == ("host", "host")
    kwargs = create_kwargs(docker.APIClient(version="1.41"), config)
    host = kwargs["host_config"]
    assert kwargs["user"] == "1001:3000"
    assert host["CapAdd"] == ["NET_ADMIN"] and host["CapDrop"] == ["CHOWN"]
    assert host["ReadonlyRootfs"] is True and host["GroupAdd"] == ["4000", "2000"]
    assert host["SecurityOpt"] == ["no-new-privileges:true", "seccomp=unconfined"]
    assert host["PidMode"] == "host" and host["IpcMode"] == "host"
    assert host["Sysctls"] == config.sysctls


def test_a_plain_pod_changes_nothing_in_docker():
    obj = pod()
    config = P.container_config(obj, obj["spec"]["containers"][0], "n1", "10.0.0.1", 0)
    host = create_kwargs(docker.APIClient(version="1.41"), config)["host_config"]
    assert "user" not in create_kwargs(docker.APIClient(version="1.41"), config)
    for key in ("CapAdd", "CapDrop", "ReadonlyRootfs", "Privileged", "SecurityOpt", "PidMode", "Sysctls", "GroupAdd"):
        assert not host.get(key), key


def test_only_a_group_keeps_the_image_user_and_net_sysctls_go_to_the_network_owner():
    obj = pod(pod_sc={"runAsGroup": 50, "sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]})
    c = obj["spec"]["containers"][0]
    assert S.user_spec(obj, c, "nobody") == "nobody:50"
    assert S.user_spec(obj, c, "") == "0:50"
    joined = P.container_config(obj, c, "n1", "10.0.0.1", 0, sandbox_id="abc")
    assert joined.sysctls == {}
    assert P.sandbox_config(obj, "n1", "10.0.0.1", "pause", 0).sysctls == {"net.ipv4.tcp_syncookies": "1"}


@pytest.mark.parametrize("pod_sc, sc, image_user, words", [
    ({"runAsNonRoot": True}, None, "", "container has runAsNonRoot and image will run as root"),
    ({"runAsNonRoot": True}, None, "root", "image will run as root"),
    ({"runAsNonRoot": True}, None, "0:0", "image will run as root"),
    (None, {"runAsNonRoot": True}, "nobody", "image has non-numeric user (nobody), cannot verify user is non-root"),
    ({"runAsNonRoot": True}, {"runAsUser": 0}, "1000", "container's runAsUser breaks non-root policy"),
])
def test_run_as_non_root_against_the_image_user(pod_sc, sc, image_user, words):
    obj = pod(pod_sc=pod_sc, sc=sc)
    problem = S.non_root_problem(obj, obj["spec"]["containers"][0], image_user)
    assert problem and words in problem and '(pod: "default/p", container: main)' in problem


@pytest.mark.parametrize("pod_sc, sc, image_user", [
    ({"runAsNonRoot": True}, None, "1000"),
    ({"runAsNonRoot": True}, {"runAsUser": 1000}, ""),
    ({"runAsNonRoot": True}, {"runAsNonRoot": False}, ""),      # the container's own value wins
    (None, None, ""),
    ({"runAsNonRoot": True}, None, None),                       # simulated runtime: image unknown
])
def test_run_as_non_root_allows(pod_sc, sc, image_user):
    obj = pod(pod_sc=pod_sc, sc=sc)
    assert S.non_root_problem(obj, obj["spec"]["containers"][0], image_user) is None
