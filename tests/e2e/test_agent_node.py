"""End to end: the Node an agent registers, its lease and usage, re-registration,
bad pod specs, the hollow runtime, and `shepherd-ha local up --agents`."""
import os
import socket
import subprocess
import sys
import time
import uuid

import requests

import pytest

from shepherd_ha.client import ApiError

from .helpers import IMAGE, condition, container_status, wait_until

pytestmark = pytest.mark.e2e

SLEEPER = {"name": "c", "image": IMAGE, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}


def test_the_node_object_lease_and_usage(agents):
    name = agents.start("a", extra=["--labels", "zone=z1,%s=%s" % agents.group_label, "--max-pods", "50",
                                    "--status-interval", "2"])
    node = agents.client.get("nodes", name)
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == name and labels["kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/arch"] and labels["zone"] == "z1" and labels["shepherd.io/runtime"] == "docker"
    assert node["spec"]["unschedulable"] is False
    st = node["status"]
    cpus = os.cpu_count()
    assert st["capacity"]["cpu"] == str(cpus) and st["capacity"]["pods"] == "50"
    assert st["allocatable"]["cpu"] == "%dm" % (cpus * 1000 - 100)
    assert st["capacity"]["memory"].endswith("Ki") and st["allocatable"]["memory"].endswith("Ki")
    assert int(st["capacity"]["memory"][:-2]) - int(st["allocatable"]["memory"][:-2]) == 256 * 1024
    assert {"type": "InternalIP", "address": "127.0.0.1"} in st["addresses"]
    info = st["nodeInfo"]
    assert info["containerRuntimeVersion"].startswith("docker://")
    assert info["kubeletVersion"].startswith("shepherd-agent/")
    assert info["operatingSystem"] == "linux" and info["architecture"]
    port = st["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    assert port > 0
    socket.create_connection(("127.0.0.1", port), timeout=2).close()     # the agent's HTTP server
    assert condition(node, "Ready")["reason"] == "AgentReady"
    usage = st["usage"]
    for key in ("cpuPercent", "memoryUsedBytes", "memoryAvailableBytes", "diskUsedBytes", "diskTotalBytes",
                "load1", "load5", "load15", "containers", "timestamp"):
        assert key in usage, key
    # the lease moves every second (lease interval 1 s), renewTime with microseconds
    lease = agents.client.get("leases", name, namespace="kube-node-lease")
    assert lease["spec"]["holderIdentity"] == name and "." in lease["spec"]["renewTime"]
    time.sleep(2.2)
    later = agents.client.get("leases", name, namespace="kube-node-lease")
    assert int(later["metadata"]["resourceVersion"]) > int(lease["metadata"]["resourceVersion"])
    assert later["spec"]["renewTime"] > lease["spec"]["renewTime"]
    # usage is posted again (status interval 2 s) and counts the containers
    agents.create_pod("one", [SLEEPER], node=name)
    agents.wait_running("one")
    wait_until(lambda: agents.client.get("nodes", name)["status"]["usage"].get("containers") == 1, 10,
               "the usage to count 1 container")


def test_a_deleted_node_registers_again_and_keeps_its_pods(agents):
    # As in Kubernetes: the agent registers its node again, well within the pod GC's
    # quarantine (--orphan-pod-grace, 40 s), so its running pod is left alone.
    name = agents.start("a")
    agents.create_pod("stay", [SLEEPER], node=name)
    pod = agents.wait_running("stay")
    agents.client.delete("nodes", name)
    node = wait_until(lambda: agents.client.get("nodes", name), 10, "node %s registered again" % name,
                      agents.log_tails)
    assert node["status"]["capacity"]["pods"] == "110"
    agents.wait_node_ready(name)
    assert container_status(agents.pod("stay"))["containerID"] == container_status(pod)["containerID"]


def test_bad_pod_specs_get_clear_reasons_and_the_agent_keeps_serving(agents):
    node = agents.start("a")
    agents.create_pod("noimage", [dict(SLEEPER, image="shepherd/no-such-image:1")], node=node)
    agents.create_pod("pullfail", [dict(SLEEPER, image="shepherd/no-such-image:2", imagePullPolicy="Always")],
                      node=node)
    # a host port taken on the node by something else: Docker refuses to start the container
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    taken = blocker.getsockname()[1]
    try:
        privileged = agents.privileged_namespace()     # a hostPort needs it (Pod Security)
        agents.create_pod("portclash", [dict(SLEEPER, ports=[{"containerPort": 80, "hostPort": taken}])],
                          node=node, namespace=privileged)
        agents.create_pod("noexec", [dict(SLEEPER, command=["/no/such/binary"])], node=node)

        def waiting(name, reason):
            return lambda p: ((container_status(p) or {}).get("state") or {}).get("waiting", {}).get("reason") \
                == reason
        pod = agents.wait_pod("noimage", waiting("noimage", "ErrImageNeverPull"), 15, "ErrImageNeverPull")
        assert container_status(pod)["state"]["waiting"]["message"] == \
            'Container image "shepherd/no-such-image:1" is not present with pull policy of Never'
        assert pod["status"]["phase"] == "Pending"
        pod = agents.wait_pod("pullfail", lambda p: waiting("", "ErrImagePull")(p) or
                              waiting("", "ImagePullBackOff")(p), 15, "ErrImagePull")
        assert "shepherd/no-such-image:2" in container_status(pod)["state"]["waiting"]["message"]
        pod = agents.wait_pod("portclash", waiting("portclash", "CreateContainerError"), 15, "CreateContainerError",
                              namespace=privileged)
        message = container_status(pod)["state"]["waiting"]["message"]
        assert str(taken) in message and ("address already in use" in message or "already allocated" in message), \
            message
        pod = agents.wait_pod("noexec", waiting("noexec", "CreateContainerError"), 15, "CreateContainerError")
        assert "/no/such/binary" in container_status(pod)["state"]["waiting"]["message"]
        # the agent still runs and serves good pods
        agents.create_pod("good", [SLEEPER], node=node)
        agents.wait_running("good")
        assert agents.pid(node)
        # no half-made containers are left running for the refused pods
        assert agents.container_ids(node, "portclash") == []
    finally:
        blocker.close()
    # once the port is free, the pod starts on a later retry
    agents.wait_running("portclash", timeout=30, namespace=privileged)


def test_the_hollow_runtime_simulates_pods_without_containers(agents):
    node = agents.start("h", runtime="hollow", extra=["--cpu", "64", "--memory", "256Gi"])
    got = agents.client.get("nodes", node)
    assert got["metadata"]["labels"]["shepherd.io/runtime"] == "hollow"
    assert got["status"]["nodeInfo"]["containerRuntimeVersion"] == "hollow://1"
    assert got["status"]["capacity"]["cpu"] == "64"
    for i in range(5):
        agents.create_pod("h%d" % i, [dict(SLEEPER, image="anything:never-pulled")], node=node)
    ips = set()
    for i in range(5):
        pod = agents.wait_running("h%d" % i)
        assert pod["status"]["podIP"].startswith("10.")
        assert container_status(pod)["containerID"].startswith("hollow://")
        ips.add(pod["status"]["podIP"])
    assert len(ips) == 5
    assert agents.containers(node) == []       # nothing real
    agents.delete_pod("h0")
    agents.wait_gone("h0", 10)


def test_local_up_starts_agents_and_down_keeps_or_purges_their_containers(tmp_path, docker_engine):
    from tests.integration.helpers import free_base_port
    directory = str(tmp_path / "local")
    prefix = "e2e-%s-node" % uuid.uuid4().hex[:6]
    cli = [sys.executable, "-m", "shepherd_ha.cli.main", "local"]

    def run(*args, timeout=90):
        out = subprocess.run(cli + list(args) + ["--dir", directory], capture_output=True, text=True,
                             timeout=timeout)
        return out.returncode, out.stdout + out.stderr

    def purge():
        for c in docker_engine.api.containers(all=True, filters={"label": "shepherd.io/node=%s-1" % prefix}):
            docker_engine.api.remove_container(c["Id"], force=True)

    try:
        code, text = run("up", "--agents", "1", "--agent-prefix", prefix, "--base-port", str(free_base_port()),
                         "--timeout", "30")
        assert code == 0, text
        assert "node %s-1 Ready" % prefix in text
        code, text = run("status")
        assert code == 0 and ("%s-1" % prefix) in text and "Ready" in text, text
        config = os.path.join(directory, "config")
        from shepherd_ha.client import Client
        import yaml
        with open(config) as fh:
            settings = yaml.safe_load(fh)
        # `local up` serves HTTPS from the cluster CA its config names
        ca = os.path.join(directory, settings["certificate-authority"])
        assert all(url.startswith("https://") for url in settings["servers"])
        # `local up` requires tokens: the agent got the node token, sheepctl's config the admin's
        assert requests.get(settings["servers"][0] + "/api/v1/nodes", timeout=5, verify=ca).status_code == 401
        client = Client(settings["servers"], token=settings["token"], ca_file=ca)
        client.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                               "spec": {"nodeName": "%s-1" % prefix, "containers": [SLEEPER]}})
        wait_until(lambda: (client.get("pods", "p").get("status") or {}).get("phase") == "Running", 20,
                   "the pod Running")
        # Logs through a replica with the token; the agent itself wants one too.
        from shepherd_ha.api.pod_logs import agent_endpoint
        logs = requests.get(settings["servers"][1] + "/api/v1/namespaces/default/pods/p/log",
                            headers={"Authorization": "Bearer " + settings["token"]}, timeout=10, verify=ca)
        assert logs.status_code == 200, logs.text
        ctl = subprocess.run([sys.executable, "-m", "ctl", "--config", config, "logs", "p"], capture_output=True,
                             text=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                         if not k.startswith("SHEPHERD_")})
        assert ctl.returncode == 0, ctl.stdout + ctl.stderr
        host, port = agent_endpoint(client.get("nodes", "%s-1" % prefix))
        direct = requests.get("https://%s:%d/containerLogs/default/p/%s" % (host, port, SLEEPER["name"]), timeout=10,
                              verify=ca)
        assert direct.status_code == 401, direct.text
        plain = requests.get("http://%s:%d/containerLogs/default/p/%s" % (host, port, SLEEPER["name"]), timeout=10)
        assert plain.status_code == 400 and "TLS" in plain.text, plain.text     # the agent speaks TLS only
        code, text = run("down")
        assert code == 0, text
        running = docker_engine.api.containers(filters={"label": "shepherd.io/node=%s-1" % prefix})
        assert len(running) == 1
        # the container says which cluster it is of (another on this engine may have a node of its name)
        assert running[0]["Labels"]["shepherd.io/cluster-id"] == settings["cluster_id"], running[0]["Labels"]
        # `up` again, plainly: the cluster's own agent comes back, no node-1 or node-2 is added
        code, text = run("up", "--timeout", "30")
        assert code == 0, text
        assert "node %s-1 Ready" % prefix in text and "agent node-1 " not in text and "agent node-2 " not in text, text
        wait_until(lambda: (client.get("pods", "p").get("status") or {}).get("phase") == "Running", 20,
                   "the pod Running again")
        assert [c["Id"] for c in docker_engine.api.containers(
            filters={"label": "shepherd.io/node=%s-1" % prefix})] == [running[0]["Id"]]    # adopted
        code, text = run("down", "--purge-containers")
        assert code == 0 and "removed 1 container" in text, text
        assert docker_engine.api.containers(all=True, filters={"label": "shepherd.io/node=%s-1" % prefix}) == []
        client.close()
    finally:
        run("down", timeout=60)
        purge()


def test_a_pod_bound_to_another_node_is_not_touched(agents):
    node = agents.start("a")
    agents.create_pod("elsewhere", [SLEEPER], node="e2e-%s-nobody" % agents.tag)
    time.sleep(1.5)
    assert (agents.pod("elsewhere").get("status") or {}).get("phase") == "Pending"
    assert agents.container_ids(node, "elsewhere", running_only=False) == []
    try:
        agents.delete_pod("elsewhere", grace=0)
    except ApiError:
        pass
