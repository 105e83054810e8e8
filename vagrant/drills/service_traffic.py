"""The service-traffic drill: a client pod on the first worker sends a request every
0.2 s to a Service by its DNS name (`http://<service>/`: the search path, the node's
cluster DNS, the ClusterIP's rules, the pod network to the backends on both workers)
while kill-leader, partition and a worker loss run, one after another. It reports the
fraction of failed requests and the longest outage, overall and per fault, and passes
only when traffic comes back after each fault (traffic_meter.py).

The data plane is the workers' own (agent, iptables, DNS): losing the control plane's
leader must not interrupt it at all; losing a worker interrupts the requests its
backends were answering until their Endpoints drop them (node lifecycle: NotReady
after the grace period), then the survivors answer everything.

It needs workers that run real containers (Target.real_workers): the netns target's
workers are hollow (no processes, no pod network), so there it fails at once saying so.
"""
import time
import uuid

from drill_kit import DrillFailed, wait_for
from shepherd_ha.client import ApiError, ClientError
from traffic_meter import RECOVERY_RUN, FaultWindow, backends, longest_outage, parse_lines, recovered_at, \
    summary, verdict, failed_fraction

INTERVAL = 0.2             # seconds between the client's requests
REQUEST_TIMEOUT = 2        # seconds for one request (nc -w)

CLIENT_SCRIPT = """i=0
while true; do
  i=$((i+1))
  b=$(printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w %(timeout)d %(service)s %(port)d 2>/dev/null | tail -n 1)
  read -r up _ </proc/uptime
  case "$b" in backend=*) echo "$i $up ok $b" ;; *) echo "$i $up fail" ;; esac
  sleep %(interval)s
done"""
BACKEND_SCRIPT = "mkdir -p /www && echo \"backend=$(hostname)\" >/www/index.html && exec httpd -f -p 8080 -h /www"


def _backend_deployment(name, replicas, target):
    labels = {"app": name}
    container = {"name": "web", "image": target.workload_image, "imagePullPolicy": "Never",
                 "command": ["sh", "-c", BACKEND_SCRIPT], "ports": [{"name": "http", "containerPort": 8080}],
                 "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 2},
                 "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def _service(name):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": "ClusterIP", "selector": {"app": name},
                     "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}


def client_script(service, port=80):
    """The client's shell loop: one request to http://<service>:<port>/ per INTERVAL."""
    return CLIENT_SCRIPT % {"timeout": REQUEST_TIMEOUT, "service": service, "port": port, "interval": INTERVAL}


def _client_pod(name, service, node, target):
    script = client_script(service)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"drill": name}},
            "spec": {"nodeName": node, "restartPolicy": "Always",
                     "containers": [{"name": "client", "image": target.workload_image, "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", script]}]}}


class ClientLog:
    """The client pod's samples, read through the API's pods/{name}/log."""

    def __init__(self, client, pod):
        self.client = client
        self.path = "/api/v1/namespaces/default/pods/%s/log" % pod
        self.samples = []

    def refresh(self):
        try:
            text = self.client.request("GET", self.path)
        except (ApiError, ClientError):
            return self.samples            # a fault may hide the log for a moment: keep what we have
        if isinstance(text, str):
            fresh = parse_lines(text)
            if len(fresh) >= len(self.samples):
                self.samples = fresh
        return self.samples

    def last_seq(self):
        self.refresh()
        return self.samples[-1].seq if self.samples else 0


def _running_by_node(client, app):
    pods = (client.list("pods", namespace="default", label_selector="app=%s" % app) or {}).get("items") or []
    out = {}
    for pod in pods:
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (pod.get("status") or {}).get("conditions") or [])
        if ready and not pod["metadata"].get("deletionTimestamp"):
            out.setdefault(pod["spec"].get("nodeName"), []).append(pod["metadata"]["name"])
    return out


def _worker_loss(target, report, client, victim):
    """Power off `victim` (not the client's worker) and bring it back."""
    node = target.node_name(victim)
    report.step("powering off worker %s (node %s)" % (victim, node))
    t0 = time.monotonic()
    target.power_off(victim)

    def not_ready():
        try:
            found = client.get("nodes", node)
        except (ApiError, ClientError):
            return False
        return not any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in (found.get("status") or {}).get("conditions") or [])
    wait_for("node %s not Ready" % node, not_ready, target.node_not_ready_timeout, interval=0.5)
    report.figure("worker-loss: power-off to node NotReady", time.monotonic() - t0, "s")
    t1 = time.monotonic()
    target.power_on(victim)
    wait_for("node %s Ready again" % node, lambda: not not_ready(), target.boot_timeout + target.ready_timeout,
             interval=0.5)
    report.figure("worker-loss: power-on to node Ready", time.monotonic() - t1, "s")


def service_traffic(target, report):
    if not getattr(target, "real_workers", False):
        raise DrillFailed("service-traffic needs workers that run real containers with the pod network, cluster "
                          "DNS and Services (the vagrant target); %s's workers are simulated" % target.name)
    if len(target.workers) < 2:
        raise DrillFailed("service-traffic needs 2 workers (backends on both), the target has %d"
                          % len(target.workers))
    import drills      # kill_leader and partition, as the drills of the same names run them
    client = target.client(timeout=3.0, retry_deadline=15.0)
    run = uuid.uuid4().hex[:6]
    web, pod = "drill-st-web-%s" % run, "drill-st-client-%s" % run
    home, victim = target.workers[0], target.workers[-1]
    nodes = [target.node_name(w) for w in target.workers]
    try:
        client.create("deployments", _backend_deployment(web, 2 * len(target.workers), target), namespace="default")
        client.create("services", _service(web), namespace="default")
        placed, took = wait_for("ready backends on every worker",
                                lambda: (lambda r: r if all(r.get(n) for n in nodes) else None)(
                                    _running_by_node(client, web)), target.pod_move_timeout, interval=0.5)
        report.step("backends ready after %.1fs: %s" % (took, ", ".join(
            "%s: %d" % (n, len(p)) for n, p in sorted(placed.items()))))
        client.create("pods", _client_pod(pod, web, target.node_name(home), target), namespace="default")
        log = ClientLog(client, pod)

        def steady():
            samples = log.refresh()
            answered = {b for b in backends(samples)}
            return recovered_at(samples, -1) is not None and len(answered) >= 2 and samples
        wait_for("steady traffic from %s to %s answered by 2 backends or more" % (pod, web), steady,
                 target.ready_timeout, interval=1.0)
        report.step("client %s on %s: traffic flowing (%d requests so far)" % (pod, home, len(log.samples)))

        faults = []
        steps = (("kill-leader", lambda: drills.kill_leader(target, report)),
                 ("partition", lambda: drills.partition(target, report)),
                 ("worker-loss", lambda: _worker_loss(target, report, client, victim)))
        for name, run_fault in steps:
            fault = FaultWindow(name, log.last_seq())
            faults.append(fault)
            report.step("fault %s begins at request %d" % (name, fault.start_seq))
            run_fault()
            fault.end_seq = log.last_seq()
            t0 = time.monotonic()
            try:
                fault.recovered_seq, _ = wait_for(
                    "traffic back after %s (%d successes in a row)" % (name, RECOVERY_RUN),
                    lambda: recovered_at(log.refresh(), fault.end_seq), target.pod_move_timeout, interval=1.0)
            except DrillFailed:
                pass                           # the verdict says so, with the figures
            report.figure("%s: fault undone to traffic back" % name, time.monotonic() - t0, "s")
        samples = log.refresh()
        for line in summary(samples, faults):
            report.step(line)
        report.figure("failed requests", 100.0 * (failed_fraction(samples) or 0.0), "%")
        report.figure("longest outage", longest_outage(samples), "s")
        by_backend = backends(samples)
        report.step("answers per backend: %s" % ", ".join("%s %d" % kv for kv in sorted(by_backend.items())))
        passed, reasons = verdict(samples, faults)
        if not passed:
            raise DrillFailed("; ".join(reasons))
    finally:
        for resource, name in (("pods", pod), ("services", web), ("deployments", web)):
            try:
                client.delete(resource, name, namespace="default", propagation_policy="Background")
            except (ApiError, ClientError):
                pass
        client.close()
    return report
