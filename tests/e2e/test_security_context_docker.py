"""securityContext enforced on real containers: a pod spec goes through agent/spec.py
(with agent/security_context.py) to the real Docker engine, and what the process sees
inside is checked: ids, groups, capabilities, read-only root, no-new-privileges,
seccomp, privileged. Also a secret volume's tmpfs under a state dir (mounted, files
with their modes, unmounted when the pod's directory goes). Containers are named
adm-*; a missing engine or image is a failure (tests/e2e/conftest.py)."""
import base64
import os
import uuid

import pytest

from agent import spec as P
from agent import volumes as V
from agent.runtime.docker_runtime import DockerRuntime

from .helpers import IMAGE, wait_until

pytestmark = pytest.mark.e2e
CHOWN_BIT = 1 << 0        # CAP_CHOWN in CapEff
NET_ADMIN_BIT = 1 << 12


@pytest.fixture
def runtime(docker_engine):
    rt = DockerRuntime()
    rt.node = "adm-%s" % uuid.uuid4().hex[:6]
    yield rt
    for c in docker_engine.api.containers(all=True, filters={"label": "shepherd.io/node=%s" % rt.node}):
        docker_engine.api.remove_container(c["Id"], force=True)
    rt.close()


def run(rt, script, pod_sc=None, sc=None, mounts=None, **spec):
    """Start a one-container pod with these settings; (exit code, output) of `script`
    run in it by exec (as the container's user)."""
    c = {"name": "main", "image": IMAGE, "command": ["sh", "-c", "sleep 3600"]}
    if sc is not None:
        c["securityContext"] = sc
    body = {"containers": [c]}
    if pod_sc is not None:
        body["securityContext"] = pod_sc
    body.update(spec)
    name = "adm-%s" % uuid.uuid4().hex[:6]
    pod = {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": body}
    config = P.container_config(pod, c, rt.node, "", 0, mounts=mounts, image_user=rt.image_user(IMAGE))
    cid = rt.create(config)
    rt.start(cid)
    wait_until(lambda: rt.inspect(cid).running, 10, "container %s running" % name)
    code, out = rt.exec(cid, ["sh", "-c", script], timeout=10)
    return code, out.decode(errors="replace")


def status_field(output, field):
    for line in output.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no %s in %r" % (field, output))


def test_the_image_runs_as_root_without_a_security_context(runtime):
    assert runtime.image_user(IMAGE) == ""
    code, out = run(runtime, "id -u; id -g; grep -E 'CapEff|NoNewPrivs' /proc/self/status; touch /x && echo wrote")
    lines = out.split()
    assert code == 0 and lines[:2] == ["0", "0"] and "wrote" in out
    assert int(status_field(out, "CapEff"), 16) & CHOWN_BIT
    assert status_field(out, "NoNewPrivs") == "0"


def test_run_as_user_and_group_from_the_pod_with_the_container_winning(runtime):
    code, out = run(runtime, "id -u; id -g; id -G", pod_sc={"runAsUser": 1000, "runAsGroup": 3000,
                                                             "supplementalGroups": [4000], "fsGroup": 2000},
                    sc={"runAsUser": 1234})
    uid, gid, groups = out.strip().splitlines()
    assert code == 0 and (uid, gid) == ("1234", "3000")
    assert {"3000", "4000", "2000"} <= set(groups.split())


def test_a_dropped_capability_is_gone_and_an_added_one_is_there(runtime):
    code, out = run(runtime, "grep CapEff /proc/self/status; touch /f; chown 1 /f && echo chowned",
                    sc={"capabilities": {"drop": ["CHOWN"], "add": ["NET_ADMIN"]}})
    caps = int(status_field(out, "CapEff"), 16)
    assert not caps & CHOWN_BIT and caps & NET_ADMIN_BIT
    assert "chowned" not in out and code != 0
    code, out = run(runtime, "grep CapEff /proc/self/status", sc={"capabilities": {"drop": ["ALL"]}})
    assert int(status_field(out, "CapEff"), 16) == 0


def test_a_read_only_root_refuses_a_write(runtime):
    code, out = run(runtime, "echo x > /etc/x && echo wrote", sc={"readOnlyRootFilesystem": True})
    assert code != 0 and "wrote" not in out and "Read-only file system" in out


def test_no_new_privileges_seccomp_and_privileged(runtime):
    code, out = run(runtime, "grep -E 'NoNewPrivs|Seccomp:' /proc/self/status",
                    sc={"allowPrivilegeEscalation": False, "seccompProfile": {"type": "RuntimeDefault"}})
    assert status_field(out, "NoNewPrivs") == "1" and status_field(out, "Seccomp") == "2"
    code, out = run(runtime, "grep Seccomp: /proc/self/status", sc={"seccompProfile": {"type": "Unconfined"}})
    assert status_field(out, "Seccomp") == "0"



def test_privileged_reaches_docker(runtime, docker_engine):
    # Created, not started: this test host's own capability bounding set lacks one that a
    # privileged container gets, so runc cannot start one here ("unable to apply caps").
    c = {"name": "main", "image": IMAGE, "securityContext": {"privileged": True}}
    pod = {"metadata": {"name": "adm-priv", "namespace": "default", "uid": "u"}, "spec": {"containers": [c]}}
    cid = runtime.create(P.container_config(pod, c, runtime.node, "", 0))
    assert docker_engine.api.inspect_container(cid)["HostConfig"]["Privileged"] is True


def test_a_secret_volume_is_a_tmpfs_with_modes_and_goes_with_the_pod(runtime, tmp_path):
    state = str(tmp_path / "state")
    uid = "adm-%s" % uuid.uuid4().hex[:6]
    pod = {"metadata": {"name": uid, "namespace": "default", "uid": uid}, "spec": {
        "securityContext": {"fsGroup": 2000},
        "containers": [{"name": "main", "image": IMAGE, "volumeMounts": [{"name": "s", "mountPath": "/s"}]}],
        "volumes": [{"name": "s", "secret": {"secretName": "db", "defaultMode": 0o440,
                                             "items": [{"key": "pass", "path": "p/pass"}]}}]}}
    secret = {"data": {"pass": base64.b64encode(b"s3cr3t").decode()}}
    mounts = V.prepare_mounts(pod, pod["spec"]["containers"][0], state, lambda ns, n: None,
                              get_secret=lambda ns, n: secret)
    volume = V.volume_dir(state, uid, "s")
    assert mounts[0].source == volume and mounts[0].read_only
    assert os.path.ismount(volume)
    with open("/proc/self/mountinfo") as fh:
        assert any(line.split()[4] == volume and " - tmpfs " in line for line in fh)
    path = os.path.join(volume, "p", "pass")
    st = os.stat(path)
    assert open(path, "rb").read() == b"s3cr3t" and st.st_mode & 0o777 == 0o440 and st.st_gid == 2000
    code, out = run(runtime, "cat /s/p/pass; grep ' /s ' /proc/mounts", pod_sc={"runAsUser": 1000, "fsGroup": 2000},
                    mounts=mounts)
    assert code == 0 and out.startswith("s3cr3t") and "tmpfs" in out
    V.prepare_mounts(pod, pod["spec"]["containers"][0], state, lambda ns, n: None,
                     get_secret=lambda ns, n: secret)           # a restart: mounted once
    with open("/proc/self/mountinfo") as fh:
        assert sum(line.split()[4] == volume for line in fh) == 1
    V.remove_pod_dir(state, uid)
    assert not os.path.exists(V.pod_dir(state, uid))
    with open("/proc/self/mountinfo") as fh:
        assert not any(volume in line for line in fh)
