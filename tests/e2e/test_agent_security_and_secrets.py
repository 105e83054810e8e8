"""End to end (real replicas, a real agent process, the real Docker engine):
- a pod's securityContext reaches its container: `id -u`/`id -g` print the asked ids;
- runAsNonRoot with an image that runs as root leaves the container waiting with
  CreateContainerConfigError "container has runAsNonRoot and image will run as root";
- a Secret reaches a pod as an env var (secretKeyRef), as envFrom, and as files of a
  secret volume on a tmpfs (the agent's state dir holds no file of it on disk), and the
  tmpfs goes when the pod is deleted.
Pods are named adm-*."""
import base64
import os

from .helpers import container_status, wait_until
from .test_agent_volumes_events import WAIT, all_running, busybox, exec_in, start_node, unique


def test_ids_and_run_as_non_root_on_a_real_agent(agents, tmp_path):
    node, _ = start_node(agents, tmp_path, "sc")
    ids = unique("adm-ids")
    agents.create_pod(ids, [busybox("exec sleep 3600")], node=node, terminationGracePeriodSeconds=1,
                      securityContext={"runAsUser": 1000, "runAsGroup": 3000})
    agents.wait_pod(ids, all_running, WAIT, "running")
    assert exec_in(agents, node, ids, "id -u; id -g") == (0, "1000\n3000\n")

    root = unique("adm-nonroot")
    agents.create_pod(root, [busybox("exec sleep 3600")], node=node, terminationGracePeriodSeconds=1,
                      securityContext={"runAsNonRoot": True})

    def refused(pod):
        waiting = ((container_status(pod) or {}).get("state") or {}).get("waiting") or {}
        return waiting.get("reason") == "CreateContainerConfigError"
    pod = agents.wait_pod(root, refused, WAIT, "waiting with CreateContainerConfigError")
    message = container_status(pod)["state"]["waiting"]["message"]
    assert message.startswith("container has runAsNonRoot and image will run as root"), message
    assert pod["status"]["phase"] == "Pending" and not agents.containers(node, root)


def test_a_secret_reaches_a_pod_as_env_and_as_tmpfs_files(agents, tmp_path):
    node, state = start_node(agents, tmp_path, "secret")
    client = agents.client
    name = unique("adm-db")
    client.create("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                              "stringData": {"password": "s3cr3t-value", "user": "admin"}}, "default")
    pod_name = unique("adm-reader")
    agents.create_pod(pod_name, [busybox(
        "exec sleep 3600",
        env=[{"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": name, "key": "password"}}}],
        envFrom=[{"secretRef": {"name": name}, "prefix": "S_"}],
        volumeMounts=[{"name": "creds", "mountPath": "/etc/creds"}])],
        node=node, terminationGracePeriodSeconds=1,
        volumes=[{"name": "creds", "secret": {"secretName": name, "defaultMode": 0o400}}])
    pod = agents.wait_pod(pod_name, all_running, WAIT, "running")
    assert exec_in(agents, node, pod_name, 'echo "$DB_PASSWORD $S_user"') == (0, "s3cr3t-value admin\n")
    assert exec_in(agents, node, pod_name, "cat /etc/creds/password") == (0, "s3cr3t-value")
    code, out = exec_in(agents, node, pod_name, "stat -c %a /etc/creds/password; grep ' /etc/creds ' /proc/mounts")
    assert code == 0 and out.startswith("400\n") and " tmpfs " in out, out
    volume = str(state / "pods" / pod["metadata"]["uid"] / "volumes" / "creds")
    with open("/proc/self/mountinfo") as fh:
        assert any(line.split()[4] == volume and " - tmpfs " in line for line in fh), volume
    assert base64.b64decode(client.get("secrets", name, namespace="default")["data"]["password"]) == b"s3cr3t-value"

    agents.delete_pod(pod_name, grace=1)
    agents.wait_gone(pod_name, WAIT)
    wait_until(lambda: not os.path.exists(volume), WAIT, "the secret volume of %s removed" % pod_name,
               agents.log_tails)
    with open("/proc/self/mountinfo") as fh:
        assert not any(volume in line for line in fh)
