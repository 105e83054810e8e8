"""End to end: probes and logs on a real 3-replica cluster, real agent processes and the
real Docker engine (containers of shepherd/busybox:1 only), with the fixtures of
tests/e2e/conftest.py (Docker missing is a failure, never a skip; every container of
the test's nodes is removed at the end).

- a failing readiness probe takes the pod out of its Service's endpoints, a passing
  one puts it back;
- a failing liveness probe restarts the container;
- `sheepctl logs` shows a container's output, `--tail` and `-f` work, and a follow
  goes on without repeating lines when the replica it streams through is killed.
"""
import queue
import signal
import subprocess
import threading
import time
import uuid

from shepherd_ha.client import ApiError

from .helpers import IMAGE, NODE_LABEL, REPO, condition, container_status, ctl, ctl_argv, ctl_env, wait_until

WAIT = 30.0          # seconds for anything the agent or the controllers should do


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:6])


def busybox(script, name="main", **fields):
    """A container of the local busybox image (FROM scratch: no /tmp until a container makes it)."""
    c = {"name": name, "image": IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", script]}
    c.update(fields)
    return c


def sh(agents, node, pod_name, script, container="main"):
    """Run a shell command in one of our pod's containers (found by its labels)."""
    found = agents.engine.api.containers(filters={"label": [
        "%s=%s" % (NODE_LABEL, node), "shepherd.io/pod-name=%s" % pod_name,
        "shepherd.io/container-name=%s" % container]})
    assert found, "no running container %s of pod %s on node %s" % (container, pod_name, node)
    exec_id = agents.engine.api.exec_create(found[0]["Id"], ["sh", "-c", script])["Id"]
    output = agents.engine.api.exec_start(exec_id)
    code = agents.engine.api.exec_inspect(exec_id)["ExitCode"]
    assert code == 0, output


def running(pod):
    st = pod.get("status") or {}
    statuses = st.get("containerStatuses") or []
    return st.get("phase") == "Running" and st.get("podIP") and statuses and \
        all("running" in (cs.get("state") or {}) for cs in statuses)


def ready(pod):
    return (condition(pod, "Ready") or {}).get("status") == "True"


def endpoint_ips(client, name):
    """(ready IPs, not-ready IPs) of a Service's Endpoints."""
    try:
        ep = client.get("endpoints", name, "default")
    except ApiError as exc:
        if exc.code == 404:
            return set(), set()
        raise
    ready_ips, not_ready = set(), set()
    for s in ep.get("subsets") or []:
        ready_ips |= {a.get("ip") for a in s.get("addresses") or []}
        not_ready |= {a.get("ip") for a in s.get("notReadyAddresses") or []}
    return ready_ips, not_ready


# ---------------------------------------------------------------- probes

def test_readiness_probe_drives_the_endpoints(agents):
    node = agents.start("ready")
    client = agents.client
    name = unique("ready")
    client.create("services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                               "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}}, "default")
    agents.create_pod(name, [busybox(
        "mkdir -p /www && echo ok > /www/ready && exec httpd -f -p 80 -h /www",
        ports=[{"name": "http", "containerPort": 80}],
        readinessProbe={"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 1,
                        "failureThreshold": 1, "successThreshold": 1})],
        node=node, labels={"app": name}, terminationGracePeriodSeconds=1)
    ip = agents.wait_pod(name, running, WAIT, "running with an IP")["status"]["podIP"]

    wait_until(lambda: ip in endpoint_ips(client, name)[0] and ready(agents.pod(name)), WAIT,
               "pod %s (%s) Ready and in the endpoints' addresses" % (name, ip), agents.log_tails)
    sh(agents, node, name, "rm /www/ready")       # httpd now answers 404: the probe fails
    wait_until(lambda: endpoint_ips(client, name) == (set(), {ip}), WAIT,
               "pod %s moved to notReadyAddresses" % name, agents.log_tails)
    pod = agents.pod(name)
    assert not ready(pod)
    cs = container_status(pod)
    assert cs["ready"] is False and cs["restartCount"] == 0      # readiness never restarts
    sh(agents, node, name, "echo ok > /www/ready")
    wait_until(lambda: endpoint_ips(client, name) == ({ip}, set()) and ready(agents.pod(name)), WAIT,
               "pod %s back in the endpoints' addresses" % name, agents.log_tails)


def test_liveness_probe_restarts_the_container(agents, e2e_cluster, tmp_path):
    node = agents.start("alive")
    name = unique("alive")
    agents.create_pod(name, [busybox(
        "echo instance $(cat /proc/sys/kernel/random/uuid); mkdir -p /tmp && touch /tmp/alive && exec sleep 3600",
        livenessProbe={"exec": {"command": ["cat", "/tmp/alive"]}, "periodSeconds": 1, "failureThreshold": 2},
        readinessProbe={"tcpSocket": {"port": 9}, "periodSeconds": 1})],
        node=node, terminationGracePeriodSeconds=1)
    first = container_status(agents.wait_pod(name, running, WAIT, "running"))
    assert first["restartCount"] == 0 and first["ready"] is False        # nothing listens on port 9
    sh(agents, node, name, "rm /tmp/alive")

    def restarted(pod):
        cs = container_status(pod) or {}
        return cs.get("restartCount", 0) >= 1 and "running" in (cs.get("state") or {}) \
            and cs.get("containerID") != first["containerID"]
    cs = container_status(agents.wait_pod(name, restarted, WAIT, "container restarted by its liveness probe"))
    assert cs["restartCount"] == 1
    assert "terminated" in (cs.get("lastState") or {}), cs
    # both instances' output: `logs` shows the new one's, `logs --previous` the killed one's
    current = wait_until(lambda: ctl(e2e_cluster, tmp_path, "logs", name).stdout, WAIT, "logs of %s" % name)
    previous = ctl(e2e_cluster, tmp_path, "logs", name, "--previous")
    assert previous.returncode == 0, previous.stderr
    assert current.startswith("instance ") and previous.stdout.startswith("instance ")
    assert current != previous.stdout
    # the new instance is healthy (its command made /tmp/alive again): no further restart
    time.sleep(2)
    assert container_status(agents.pod(name))["restartCount"] == 1


# ---------------------------------------------------------------- logs

LOGGER = ("mkdir -p /tmp; for i in 1 2 3 4 5; do echo line $i; done; "
          "while true; do if [ -f /tmp/go ]; then rm /tmp/go; echo line after; fi; sleep 0.1; done")


def start_logger(agents, e2e_cluster, tmp_path, suffix):
    node = agents.start(suffix)
    name = unique("logger")
    agents.create_pod(name, [busybox(LOGGER)], node=node, terminationGracePeriodSeconds=1)
    agents.wait_pod(name, running, WAIT, "running")
    wait_until(lambda: "line 5" in ctl(e2e_cluster, tmp_path, "logs", name).stdout, WAIT,
               "the first lines of %s in sheepctl logs" % name, agents.log_tails)
    return node, name


def test_logs_shows_the_output_and_tail(agents, e2e_cluster, tmp_path):
    _, name = start_logger(agents, e2e_cluster, tmp_path, "logs")
    r = ctl(e2e_cluster, tmp_path, "logs", name)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert r.stdout == "".join("line %d\n" % i for i in range(1, 6))
    r = ctl(e2e_cluster, tmp_path, "logs", name, "--tail", "2")
    assert r.stdout == "line 4\nline 5\n"
    r = ctl(e2e_cluster, tmp_path, "logs", name, "--timestamps", "--tail", "1")
    assert r.stdout.endswith(" line 5\n") and r.stdout[:4].isdigit(), r.stdout
    r = ctl(e2e_cluster, tmp_path, "logs", name, "-c", "nope")
    assert r.returncode == 1 and "'nope' is not valid" in r.stderr
    r = ctl(e2e_cluster, tmp_path, "logs", "no-such-pod")
    assert r.returncode == 1 and "NotFound" in r.stderr


class LineReader:
    def __init__(self, stream):
        self.q = queue.Queue()
        threading.Thread(target=self._run, args=(stream,), daemon=True).start()

    def _run(self, stream):
        for line in stream:
            self.q.put(line)
        self.q.put(None)

    def next(self, timeout=WAIT):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no line within %ss" % timeout)

    def rest(self, timeout=2.0):
        out = []
        while True:
            try:
                line = self.q.get(timeout=timeout)
            except queue.Empty:
                return out
            if line is None:
                return out
            out.append(line)


def test_logs_follow_survives_the_death_of_its_replica(agents, e2e_cluster, tmp_path):
    """Last in this module: it kills a replica of the module's cluster."""
    node, name = start_logger(agents, e2e_cluster, tmp_path, "follow")
    # PYTHONFAULTHANDLER: should it not stop on SIGINT, SIGABRT makes it print every thread's stack.
    # SIG_DFL: a test run started in the background (`make test &`) ignores SIGINT, the child would
    # inherit that and Python would then never raise KeyboardInterrupt (seen: two CI runs killed it).
    proc = subprocess.Popen(ctl_argv(e2e_cluster, "logs", name, "-f", "--tail", "1"),
                            cwd=str(REPO), env=dict(ctl_env(tmp_path), PYTHONFAULTHANDLER="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    errors = LineReader(proc.stderr)       # drained all along: a full stderr pipe would block it
    try:
        lines = LineReader(proc.stdout)
        assert lines.next() == "line 5\n"
        sh(agents, node, name, "touch /tmp/go")
        assert lines.next() == "line after\n"
        # the stream goes through the first replica of the list: kill it
        e2e_cluster.kill(e2e_cluster.ids[0])
        time.sleep(1.0)
        sh(agents, node, name, "touch /tmp/go")
        assert lines.next() == "line after\n"
        sh(agents, node, name, "touch /tmp/go")
        assert lines.next() == "line after\n"
        assert proc.poll() is None                  # still following
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    assert lines.rest() == []                       # nothing repeated, nothing extra
    stderr = "".join(errors.rest())
    assert proc.returncode == 130, "sheepctl did not stop on SIGINT within 10 s; its stderr:\n" + stderr[-6000:]
    assert "resuming" in stderr                     # it did go through another replica
