"""End to end: a deployment of busybox httpd pods on two real agents and Docker;
restarts, crash loops, graceful deletion, multi-container pods."""
import time

import pytest

from shepherd_ha.client import ApiError

from .helpers import IMAGE, condition, container_status, free_port, http_get, wait_until

pytestmark = pytest.mark.e2e

HTTPD = {"name": "httpd", "image": IMAGE, "imagePullPolicy": "Never",
         "command": ["httpd", "-f", "-p", "8080", "-h", "/www"], "ports": [{"containerPort": 8080}]}


def deployment(name, group, replicas=3, grace=2):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": grace,
                                           "nodeSelector": {group[0]: group[1]},
                                           "containers": [HTTPD]}}}}


def ready_pods(agents, app):
    pods = agents.pods("app=%s" % app)
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
            and (condition(p, "Ready") or {}).get("status") == "True"
            and not p["metadata"].get("deletionTimestamp")]


def test_deployment_runs_serves_and_is_listed_in_its_endpoints(agents):
    a = agents.start("a")
    b = agents.start("b")
    name = "web-%s" % agents.tag
    agents.client.create("deployments", deployment(name, agents.group_label))
    agents.client.create("services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                                      "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}})
    try:
        pods = wait_until(lambda: (lambda r: r if len(r) == 3 else None)(ready_pods(agents, name)), 30,
                          "3 Running and Ready pods", agents.log_tails)
        ips = sorted(p["status"]["podIP"] for p in pods)
        assert len(set(ips)) == 3, ips
        for pod in pods:
            st = pod["status"]
            assert pod["spec"]["nodeName"] in (a, b)
            assert st["hostIP"] == "127.0.0.1" and st["startTime"]
            cs = container_status(pod, "httpd")
            assert cs["ready"] and cs["restartCount"] == 0 and cs["containerID"].startswith("docker://")
            assert cs["image"] == IMAGE and cs["imageID"].startswith("docker://sha256:")
            assert "running" in cs["state"] and cs["state"]["running"]["startedAt"]
            assert [c["Id"] for c in agents.containers(pod["spec"]["nodeName"], pod["metadata"]["name"])] \
                == [cs["containerID"][len("docker://"):]]
        for ip in ips:
            status, body = http_get(ip, 8080)
            assert status == 200 and "hello from shepherd" in body

        def endpoint_ips():
            ep = agents.client.get("endpoints", name)
            listed = sorted(a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or [])
            return listed if listed == ips else None
        wait_until(endpoint_ips, 15, "the service's endpoints to list %s" % ips)
        ep = agents.client.get("endpoints", name)
        assert [p["port"] for s in ep["subsets"] for p in s["ports"]] == [8080]

        # a container killed outside the agent is restarted: restartCount 1, same pod
        victim = pods[0]
        vname = victim["metadata"]["name"]
        old_id = container_status(victim)["containerID"][len("docker://"):]
        agents.engine.api.kill(old_id)
        pod = agents.wait_pod(vname, lambda p: (container_status(p) or {}).get("restartCount") == 1
                              and "running" in container_status(p)["state"], 15, "restartCount 1 and running")
        cs = container_status(pod)
        assert cs["lastState"]["terminated"]["exitCode"] == 137
        assert cs["lastState"]["terminated"]["containerID"] == "docker://" + old_id
        assert cs["containerID"] != "docker://" + old_id
        agents.wait_running(vname)
        assert http_get(agents.pod(vname)["status"]["podIP"], 8080)[0] == 200
        # the deployment kept its three pods: nothing was recreated
        assert sorted(p["metadata"]["name"] for p in agents.pods("app=%s" % name)) == \
            sorted(p["metadata"]["name"] for p in pods)
    finally:
        agents.client.delete("deployments", name)
        agents.client.delete("services", name)


def test_a_crashing_container_backs_off(agents):
    node = agents.start("a")
    agents.create_pod("crash", [{"name": "c", "image": IMAGE, "imagePullPolicy": "Never",
                                 "command": ["sh", "-c", "echo dying; exit 3"]}], node=node)
    started = time.monotonic()
    pod = agents.wait_pod("crash", lambda p: ((container_status(p) or {}).get("state") or {})
                          .get("waiting", {}).get("reason") == "CrashLoopBackOff", 15, "CrashLoopBackOff")
    cs = container_status(pod)
    assert cs["lastState"]["terminated"]["exitCode"] == 3
    assert cs["lastState"]["terminated"]["reason"] == "Error"
    assert "back-off" in cs["state"]["waiting"]["message"] and "container=c pod=crash_default" in \
        cs["state"]["waiting"]["message"]
    assert pod["status"]["phase"] == "Running" and not cs["ready"]
    # backoff base 1 s: restarts at about 0, 1, 3, 7, 15 s after the first exit
    time.sleep(max(0.0, 8.0 - (time.monotonic() - started)))
    count = container_status(agents.pod("crash"))["restartCount"]
    elapsed = time.monotonic() - started
    assert 2 <= count <= 5, "restartCount %d after %.1fs" % (count, elapsed)
    # only the newest instance and the one before it are kept
    kept = agents.containers(node, "crash")
    assert len(kept) <= 2, [(c["Names"], c["State"], c["Status"], c["Labels"].get("shepherd.io/restart-count")) for c in kept]


def test_graceful_deletion_sends_sigterm_then_sigkill_after_the_grace_period(agents):
    node = agents.start("a")
    polite = {"name": "c", "image": IMAGE, "imagePullPolicy": "Never",
              "command": ["sh", "-c", "trap 'echo got TERM; exit 0' TERM; while true; do sleep 0.1; done"]}
    stubborn = dict(polite, command=["sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"])
    agents.create_pod("polite", [polite], node=node, terminationGracePeriodSeconds=20)
    agents.create_pod("stubborn", [stubborn], node=node, terminationGracePeriodSeconds=3)
    agents.wait_running("polite")
    agents.wait_running("stubborn")
    assert len(agents.container_ids(node, "polite")) == 1

    started = time.monotonic()
    deleted = agents.delete_pod("polite")
    assert deleted["metadata"]["deletionTimestamp"]       # marked terminating, not gone yet
    agents.wait_gone("polite", 10)
    polite_took = time.monotonic() - started
    assert polite_took < 8, "SIGTERM was not honoured: the pod took %.1fs (grace 20 s)" % polite_took
    assert agents.containers(node, "polite") == []          # removed before the pod went

    started = time.monotonic()
    agents.delete_pod("stubborn")
    agents.wait_gone("stubborn", 15)
    took = time.monotonic() - started
    assert 2.0 <= took <= 10, "a container ignoring SIGTERM was killed after %.1fs (grace 3 s)" % took
    assert agents.containers(node, "stubborn") == []


def test_deleting_a_namespace_stops_its_pods_within_their_grace_period(agents):
    """Kubernetes' namespace lifecycle with a real agent: the namespace stays Terminating
    while its agent stops the pod (SIGTERM honoured, so well before the 20 s grace), then
    goes; its container is removed first."""
    node = agents.start("a")
    ns = "nsdel-%s" % agents.tag
    agents.client.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    polite = {"name": "c", "image": IMAGE, "imagePullPolicy": "Never",
              "command": ["sh", "-c", "trap 'echo got TERM; exit 0' TERM; while true; do sleep 0.1; done"]}
    agents.create_pod("polite", [polite], node=node, namespace=ns, terminationGracePeriodSeconds=20)
    agents.wait_running("polite", namespace=ns)
    assert len(agents.container_ids(node, "polite")) == 1

    started = time.monotonic()
    marked = agents.client.delete("namespaces", ns)
    assert marked["status"]["phase"] == "Terminating"
    pod = wait_until(lambda: (lambda p: p if p["metadata"].get("deletionTimestamp") else None)(
        agents.pod("polite", ns)), 10, "the pod marked for graceful deletion", agents.log_tails)
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 20

    def gone():
        try:
            agents.client.get("namespaces", ns)
        except ApiError as exc:
            return exc.code == 404
        return False
    wait_until(gone, 20, "namespace %s gone" % ns, agents.log_tails)
    took = time.monotonic() - started
    assert took < 10, "the namespace took %.1fs: its pod's SIGTERM was not honoured (grace 20 s)" % took
    assert agents.containers(node, "polite") == []


def test_a_multi_container_pod_shares_one_network_and_publishes_host_ports(agents):
    node = agents.start("a")
    host_port = free_port()
    web = dict(HTTPD, ports=[{"containerPort": 8080, "hostPort": host_port}])
    side = {"name": "side", "image": IMAGE, "imagePullPolicy": "Never",
            "command": ["sh", "-c", "sleep 3600"], "env": [{"name": "GREETING", "value": "hi there"}],
            "workingDir": "/www", "resources": {"limits": {"memory": "32Mi", "cpu": "250m"}}}
    ns = agents.privileged_namespace()         # hostPort needs it (Pod Security)
    agents.create_pod("duo", [web, side], node=node, namespace=ns)
    pod = agents.wait_running("duo", namespace=ns)
    ip = pod["status"]["podIP"]
    assert http_get(ip, 8080)[0] == 200
    assert http_get("127.0.0.1", host_port)[1].strip() == "hello from shepherd"
    side_id = container_status(pod, "side")["containerID"][len("docker://"):]
    # the sidecar reaches the web container on localhost: one network namespace
    exec_id = agents.engine.api.exec_create(side_id, ["wget", "-q", "-O-", "http://127.0.0.1:8080/"])["Id"]
    assert b"hello from shepherd" in agents.engine.api.exec_start(exec_id)
    inspect = agents.engine.api.inspect_container(side_id)
    assert "GREETING=hi there" in inspect["Config"]["Env"]
    assert inspect["Config"]["WorkingDir"] == "/www"
    assert inspect["HostConfig"]["Memory"] == 32 * 1024 * 1024
    assert inspect["HostConfig"]["NanoCpus"] == 250_000_000
    assert inspect["HostConfig"]["NetworkMode"].startswith("container:")
    labels = inspect["Config"]["Labels"]
    assert labels["shepherd.io/node"] == node and labels["shepherd.io/pod-name"] == "duo"
    assert labels["shepherd.io/pod-namespace"] == ns and labels["shepherd.io/container-name"] == "side"
    assert labels["shepherd.io/pod-uid"] == pod["metadata"]["uid"]
    # the web container restarting keeps the pod's network and IP
    agents.engine.api.kill(container_status(pod, "httpd")["containerID"][len("docker://"):])
    pod = agents.wait_pod("duo", lambda p: container_status(p, "httpd")["restartCount"] == 1
                          and container_status(p, "httpd")["ready"], 15, "httpd restarted", namespace=ns)
    assert pod["status"]["podIP"] == ip and http_get(ip, 8080)[0] == 200
    assert container_status(pod, "side")["restartCount"] == 0
