"""End to end: the agent restarting (adoption, orphans), a node going away (its pods
come back elsewhere), and the control plane being unreachable for a while."""
import time

import pytest

from .helpers import IMAGE, condition, container_status, http_get, wait_until

pytestmark = pytest.mark.e2e

SLEEPER = {"name": "c", "image": IMAGE, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}
HTTPD = {"name": "httpd", "image": IMAGE, "imagePullPolicy": "Never",
         "command": ["httpd", "-f", "-p", "8080", "-h", "/www"], "ports": [{"containerPort": 8080}]}


def docker_id(pod, name=None):
    return container_status(pod, name)["containerID"][len("docker://"):]


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_a_restarted_agent_adopts_its_containers_and_removes_orphans(agents, how):
    node = agents.start("a")
    agents.create_pod("keep", [SLEEPER], node=node, terminationGracePeriodSeconds=1)
    agents.create_pod("drop", [SLEEPER], node=node, terminationGracePeriodSeconds=1)
    agents.wait_running("keep")
    agents.wait_running("drop")
    agents.engine.api.kill(docker_id(agents.pod("keep")))
    before = agents.wait_pod("keep", lambda p: container_status(p)["restartCount"] == 1
                             and container_status(p)["ready"], 15, "restarted once")
    running_before = agents.container_ids(node)
    all_before = agents.container_ids(node, running_only=False)

    if how == "sigterm":
        agents.stop(node)
    else:
        agents.kill(node)
    # the containers outlive their agent
    assert agents.container_ids(node) == running_before
    # a pod deleted for good while the agent is away leaves an orphaned container
    dropped = docker_id(agents.pod("drop"))
    agents.delete_pod("drop", grace=0)
    agents.restart(node)

    wait_until(lambda: dropped not in agents.container_ids(node, running_only=False), 10,
               "the orphaned container of the deleted pod to be removed", agents.log_tails)
    time.sleep(2.5)      # a few housekeeping passes and a resync
    after = agents.pod("keep")
    assert docker_id(after) == docker_id(before)
    assert container_status(after)["restartCount"] == 1
    assert container_status(after)["lastState"] == container_status(before)["lastState"]
    assert after["status"]["phase"] == "Running" and container_status(after)["ready"]
    # no container was created or restarted by the new agent
    assert agents.container_ids(node) == [i for i in running_before if i != dropped]
    assert set(agents.container_ids(node, running_only=False)) <= set(all_before)


def test_a_stopped_agent_makes_its_node_not_ready_and_its_pods_move(agents):
    a = agents.start("a")
    name = "mover-%s" % agents.tag
    agents.client.create("deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"terminationGracePeriodSeconds": 1,
                                       "nodeSelector": {agents.group_label[0]: agents.group_label[1]},
                                       "containers": [HTTPD]}}}})
    try:
        def running_on(node):
            pods = [p for p in agents.pods("app=%s" % name) if p["spec"].get("nodeName") == node
                    and (p.get("status") or {}).get("phase") == "Running"
                    and (condition(p, "Ready") or {}).get("status") == "True"
                    and not p["metadata"].get("deletionTimestamp")]
            return pods if len(pods) == 2 else None
        first = wait_until(lambda: running_on(a), 20, "2 pods Running on %s" % a, agents.log_tails)
        b = agents.start("b")
        agents.stop(a)
        stopped = time.monotonic()

        def not_ready():
            cond = condition(agents.client.get("nodes", a), "Ready")
            return cond if cond and cond.get("status") != "True" else None
        cond = wait_until(not_ready, 15, "node %s NotReady" % a)
        assert cond["reason"] == "NodeStatusUnknown"
        moved = wait_until(lambda: running_on(b), 30, "the pods Running on %s" % b, agents.log_tails)
        took = time.monotonic() - stopped
        assert not {p["metadata"]["uid"] for p in moved} & {p["metadata"]["uid"] for p in first}
        for pod in moved:
            assert http_get(pod["status"]["podIP"], 8080)[0] == 200
        # the old containers kept running without their agent; back, it removes them
        assert len(agents.container_ids(a)) == 2
        agents.restart(a)
        wait_until(lambda: agents.container_ids(a, running_only=False) == [], 15,
                   "the evicted pods' containers on %s to be removed" % a, agents.log_tails)
        print("pods Running on the other node %.1fs after the agent stopped" % took)
    finally:
        agents.client.delete("deployments", name)


def test_pods_keep_running_and_restarting_while_no_replica_answers(agents, e2e_cluster):
    node = agents.start("a")
    agents.create_pod("steady", [HTTPD], node=node, terminationGracePeriodSeconds=1)
    pod = agents.wait_running("steady")
    ip = pod["status"]["podIP"]
    e2e_cluster.stop_all()
    try:
        assert http_get(ip, 8080)[0] == 200
        old = docker_id(pod)
        agents.engine.api.kill(old)
        # restarted by the agent although it cannot report it yet
        new = wait_until(lambda: [i for i in agents.container_ids(node) if i != old], 10,
                         "a new container while the control plane is down", agents.log_tails)
        assert agents.pid(node), "the agent exited while the control plane was down"
    finally:
        e2e_cluster.start()
    pod = agents.wait_pod("steady", lambda p: container_status(p)["restartCount"] == 1
                          and container_status(p)["ready"], 30, "the restart reported")
    assert docker_id(pod) == new[0]
    assert http_get(pod["status"]["podIP"], 8080)[0] == 200
    agents.wait_node_ready(node)
