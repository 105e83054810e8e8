"""Helpers of the end-to-end suite. Every wait is bounded; failure messages carry the
agents' log tails."""
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import docker
import pytest

from shepherd_ha.client import ApiError, Client, ClientError

IMAGE = os.environ.get("SHEPHERD_TEST_IMAGE", "shepherd/busybox:1")
NODE_LABEL = "shepherd.io/node"
REPO = Path(__file__).resolve().parents[2]


def ctl_env(home):
    """The environment for a sheepctl process: none of the machine's SHEPHERD_* settings, HOME at `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    env["HOME"] = str(home)
    return env


def ctl_argv(cluster, *argv):
    """`python -m ctl --server <every replica> ARGV...` for `cluster`."""
    servers = ",".join(cluster.url(i) for i in cluster.ids)
    return [sys.executable, "-m", "ctl", "--server", servers] + list(argv)


def ctl(cluster, home, *argv, timeout=60):
    """sheepctl ARGV against every replica of `cluster`, as a process: its CompletedProcess (text)."""
    return subprocess.run(ctl_argv(cluster, *argv), cwd=str(REPO), env=ctl_env(home), capture_output=True,
                          text=True, timeout=timeout)


class E2E:
    # short node lifecycle: NotReady 4 s after the last lease renewal, pods evicted 2 s later
    server_options = {"node_grace_period": 4.0, "pod_eviction_timeout": 2.0, "node_lease_interval": 1.0}
    agent_args = ["--lease-interval", "1", "--status-interval", "5", "--backoff-base", "1",
                  "--housekeeping-interval", "1"]


def docker_engine_or_fail():
    """A docker APIClient, or pytest.fail saying how to get one (never a skip)."""
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        pytest.fail("the end-to-end tests need a Docker engine and none answers (%s): run "
                    "scripts/setup-docker.sh" % exc, pytrace=False)
    try:
        client.api.inspect_image(IMAGE)
    except docker.errors.ImageNotFound:
        client.close()
        pytest.fail("image %s is missing: run scripts/setup-docker.sh (it builds it from busybox-static)"
                    % IMAGE, pytrace=False)
    return client


def wait_until(fn, timeout, what, on_fail=None, interval=0.1):
    """fn() until it returns something truthy (returned); AssertionError after timeout."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except (ClientError, OSError, KeyError, IndexError, TypeError) as exc:
            last_exc = exc
        time.sleep(interval)
    extra = on_fail() if on_fail else ""
    raise AssertionError("timed out after %.0fs waiting for %s%s\n%s" % (
        timeout, what, " (last error: %s)" % last_exc if last_exc else "", extra))


def http_get(ip, port, path="/", timeout=3.0):
    """(status, body) of a GET to a container we created (no proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open("http://%s:%d%s" % (ip, port, path), timeout=timeout) as resp:
        return resp.status, resp.read().decode(errors="replace")


def free_port(host="127.0.0.1", low=20000, high=32000):
    """A free port below the ephemeral range (an outgoing connection cannot take it
    between this check and Docker's bind)."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(low, high)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
                return port
            except OSError:
                continue
    raise AssertionError("no free port between %d and %d" % (low, high))


def condition(obj, ctype):
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def container_status(pod, name=None):
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for cs in statuses:
        if name is None or cs.get("name") == name:
            return cs
    return None


class AgentSet:
    """Agent processes of one test, on a shared cluster, with unique node names."""

    def __init__(self, cluster, engine, tag):
        self.cluster = cluster
        self.lc = cluster.lc
        self.engine = engine
        self.tag = tag
        self.group_label = ("e2e-group", tag)
        self.nodes = []
        self.client = Client(list(cluster.urls.values()), timeout=5.0, retry_deadline=15.0)

    # ---- agents ----

    def node_name(self, suffix):
        return "e2e-%s-%s" % (self.tag, suffix)

    def start(self, suffix, runtime="docker", extra=(), wait=True):
        name = self.node_name(suffix)
        args = list(E2E.agent_args) + ["--labels", "%s=%s" % self.group_label] + list(extra)
        if name not in self.nodes:
            self.lc.add_agent(name, runtime=runtime, extra_args=args)
            self.nodes.append(name)
        self.lc.start_agent(name)
        if wait:
            self.wait_node_ready(name)
        return name

    def restart(self, name, wait=True):
        self.lc.start_agent(name)
        if wait:
            self.wait_node_ready(name)

    def stop(self, name):
        assert self.lc.stop_agent(name), "agent %s was not running" % name

    def kill(self, name):
        assert self.lc.kill_agent(name), "agent %s was not running" % name

    def pid(self, name):
        return self.lc.agent_pid(name)

    def log_tails(self, lines=25):
        out = []
        for name in self.nodes:
            try:
                with open(self.lc.agent_log(name), errors="replace") as fh:
                    tail = fh.readlines()[-lines:]
            except OSError:
                tail = ["(no log)\n"]
            out.append("---- agent %s (last %d lines)\n%s" % (name, lines, "".join(tail)))
        return "\n".join(out)

    def wait_node_ready(self, name, timeout=20.0):
        def ready():
            node = self.client.get("nodes", name)
            cond = condition(node, "Ready")
            return node if cond and cond.get("status") == "True" else None
        return wait_until(ready, timeout, "node %s Ready" % name, self.log_tails)

    # ---- pods ----

    def pod(self, name, namespace="default"):
        return self.client.get("pods", name, namespace=namespace)

    def pods(self, selector=None, namespace="default"):
        return (self.client.list("pods", namespace, label_selector=selector) or {}).get("items") or []

    def wait_pod(self, name, predicate, timeout, what, namespace="default"):
        def check():
            try:
                pod = self.pod(name, namespace)
            except ApiError as err:
                if err.code == 404:
                    return None
                raise
            return pod if predicate(pod) else None
        return wait_until(check, timeout, "pod %s: %s" % (name, what),
                          lambda: "pod now: %s\n%s" % (self._pod_text(name, namespace), self.log_tails()))

    def wait_running(self, name, timeout=20.0, namespace="default"):
        return self.wait_pod(name, lambda p: (p.get("status") or {}).get("phase") == "Running"
                             and (condition(p, "Ready") or {}).get("status") == "True",
                             timeout, "Running and Ready", namespace)

    def wait_gone(self, name, timeout=20.0, namespace="default"):
        def gone():
            try:
                self.pod(name, namespace)
                return False
            except ApiError as err:
                return err.code == 404
        return wait_until(gone, timeout, "pod %s gone" % name,
                          lambda: "pod now: %s\n%s" % (self._pod_text(name, namespace), self.log_tails()))

    def _pod_text(self, name, namespace):
        try:
            pod = self.pod(name, namespace)
            return "%s %s" % (pod.get("spec", {}).get("nodeName"), pod.get("status"))
        except ClientError as exc:
            return str(exc)

    def create_pod(self, name, containers, node=None, namespace="default", labels=None, **spec):
        body = {"containers": containers}
        if node:
            body["nodeName"] = node
        else:
            body["nodeSelector"] = {self.group_label[0]: self.group_label[1]}
        body.update(spec)
        meta = {"name": name}
        if labels:
            meta["labels"] = labels
        return self.client.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body},
                                  namespace=namespace)

    def privileged_namespace(self):
        """A namespace of this test labelled with Pod Security level privileged (for
        hostPort, hostNetwork, hostPath pods)."""
        name = "e2e-priv-%s" % self.tag
        try:
            self.client.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": name, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
        except ApiError as err:
            if err.code != 409:
                raise
        return name

    def delete_pod(self, name, namespace="default", grace=None):
        path = "/api/v1/namespaces/%s/pods/%s" % (namespace, name)
        params = {"gracePeriodSeconds": str(grace)} if grace is not None else None
        return self.client.request("DELETE", path, params=params)

    # ---- containers ----

    def containers(self, node=None, pod=None, all=True):
        """Docker's rows for the containers of our nodes (or one node), maybe of one pod."""
        out = []
        for n in ([node] if node else self.nodes):
            labels = ["%s=%s" % (NODE_LABEL, n)] + (["shepherd.io/pod-name=%s" % pod] if pod else [])
            out += self.engine.api.containers(all=all, filters={"label": labels})
        return out

    def container_ids(self, node=None, pod=None, running_only=True):
        return sorted(c["Id"] for c in self.containers(node, pod, all=not running_only)
                      if not running_only or c["State"] == "running")

    # ---- the end ----

    def cleanup(self):
        for name in self.nodes:
            try:
                self.lc.stop_agent(name, timeout=10.0)
            except Exception:  # noqa: BLE001 - keep cleaning
                pass
        for name in self.nodes:
            try:
                for pod in (self.client.list("pods", None, field_selector="spec.nodeName=%s" % name)
                            or {}).get("items") or []:
                    meta = pod["metadata"]
                    try:
                        self.delete_pod(meta["name"], meta.get("namespace") or "default", grace=0)
                    except ApiError:
                        pass
                self.client.delete("nodes", name)
            except ClientError:
                pass
        for name in self.nodes:
            for c in self.engine.api.containers(all=True, filters={"label": "%s=%s" % (NODE_LABEL, name)}):
                try:
                    self.engine.api.remove_container(c["Id"], force=True, v=True)
                except docker.errors.APIError:
                    pass
        self.client.close()
