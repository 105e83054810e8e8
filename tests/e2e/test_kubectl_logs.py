"""End to end: `kubectl logs` and `kubectl logs -f` (kubectl 1.32) of a real container, on a
cluster made by `shepherd-ha local up` (HTTPS, tokens: tests/integration/kubectl_kit.py)
through the DIR/kubeconfig it wrote, with one agent on the real Docker engine (the hollow
runtime's containers print nothing, so logs are proven here). The output goes kubectl ->
replica -> the agent's log server (with a log grant) -> Docker, and back.

Containers are labelled with this module's node name and removed at the end.
"""
import queue
import subprocess
import threading
import uuid

from .helpers import IMAGE, NODE_LABEL, wait_until

WAIT = 60.0
NS = "default"
# five lines at once, then one more each time /tmp/go appears (made with docker exec)
LOGGER = ("mkdir -p /tmp; for i in 1 2 3 4 5; do echo line $i; done; "
          "while true; do if [ -f /tmp/go ]; then rm /tmp/go; echo line after; fi; sleep 0.1; done")


def running_logger(kube, docker_engine):
    name = "logger-%s" % uuid.uuid4().hex[:6]
    kube.client.create("pods", {"metadata": {"name": name}, "spec": {
        "nodeName": kube.node, "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                        "command": ["sh", "-c", LOGGER]}]}}, NS)
    kube.kubectl("wait", "--for=condition=Ready", "pod/" + name, "--timeout=%ds" % WAIT, namespace=NS,
                 timeout=WAIT + 10)

    def trigger():
        found = docker_engine.api.containers(filters={"label": [
            "%s=%s" % (NODE_LABEL, kube.node), "shepherd.io/pod-name=%s" % name]})
        assert found, "no running container of pod %s" % name
        exec_id = docker_engine.api.exec_create(found[0]["Id"], ["sh", "-c", "touch /tmp/go"])["Id"]
        docker_engine.api.exec_start(exec_id)
    wait_until(lambda: "line 5" in kube.kubectl("logs", name, namespace=NS).stdout, WAIT,
               "the first lines of %s in kubectl logs" % name)
    return name, trigger


def test_kubectl_logs_and_tail(kube, docker_engine):
    name, _ = running_logger(kube, docker_engine)
    out = kube.kubectl("logs", name, namespace=NS)
    assert out.stdout == "".join("line %d\n" % i for i in range(1, 6)) and out.stderr == "", out
    # what kubectl printed is what the server serves for the pod's log
    served = kube.api("GET", "/api/v1/namespaces/%s/pods/%s/log" % (NS, name))
    assert served.status_code == 200 and served.text == out.stdout
    assert kube.kubectl("logs", name, "--tail=2", namespace=NS).stdout == "line 4\nline 5\n"
    assert kube.kubectl("logs", "pod/" + name, "-c", "main", "--tail=1", namespace=NS).stdout == "line 5\n"
    missing = kube.kubectl("logs", "no-such-pod", namespace=NS, check=False)
    assert missing.returncode == 1 and 'pods "no-such-pod" in namespace default not found' in missing.stderr, missing.stderr


def test_kubectl_logs_follow_prints_new_lines_as_they_come(kube, docker_engine):
    name, trigger = running_logger(kube, docker_engine)
    proc = subprocess.Popen(kube.argv(NS) + ["logs", "-f", name], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()

    def next_line():
        try:
            return lines.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError("kubectl logs -f printed nothing more in %ds" % WAIT)
    try:
        assert [next_line() for _ in range(5)] == ["line %d\n" % i for i in range(1, 6)]
        trigger()
        assert next_line() == "line after\n"
        trigger()
        assert next_line() == "line after\n"
        assert proc.poll() is None, "kubectl logs -f ended while the container runs: %s" % proc.stderr.read()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
