"""The four failure drills of issue 6 (and, from service_traffic.py, the data plane's).
Each takes a Target and a Report, runs its fault with the background ConfigMap writer
going, prints what it did and measured, and raises DrillFailed with the reason when a
claim does not hold. They use only the Target
interface and the HTTP API, so VMs and network namespaces run the same code.
"""
import contextlib
import time
import uuid

from drill_kit import (DrillFailed, Writer, is_ready, leaders, linearizable_read_ok, replica_state, same_digest,
                       wait_caught_up, wait_for, wait_leader)
from shepherd_ha.client import ApiError, ClientError

BASELINE_WRITES = 10       # acknowledged writes before the fault: the writer works
WRITES_DURING_FAULT = 10   # acknowledged writes after the fault before we undo it


def _start_writer(target, report, drill):
    writer = Writer(target, drill).start()
    wait_for("%d writes acknowledged before the fault" % BASELINE_WRITES,
             lambda: len(writer.acked) >= BASELINE_WRITES, target.ready_timeout)
    report.step("background writer %s running (%d acknowledged so far)" % (writer.run_id, len(writer.acked)))
    return writer


@contextlib.contextmanager
def running_writer(target, report, drill):
    """The background writer for the body of a drill. When the body succeeds, every
    acknowledged write is read back and the replicas must agree on revision and digest."""
    writer = _start_writer(target, report, drill)
    try:
        yield writer
    except BaseException:
        writer.stop()
        writer.close()
        raise
    writer.stop()
    try:
        writer.check(report)
        revision_digest, _ = same_digest(target, target.control_planes, target.ready_timeout)
        report.step("every replica at the same revision and digest %s" % (next(iter(revision_digest)),))
    finally:
        writer.close()


def _hold(target, since):
    """Keep a fault in place until target.fault_hold seconds after `since`."""
    time.sleep(max(0.0, since + target.fault_hold - time.monotonic()))


def kill_leader(target, report):
    """Power off the leader's host: a new leader is elected, writes continue through the
    survivors, the old host comes back and catches up."""
    cps = target.control_planes
    leader, _ = wait_leader(target, cps, target.ready_timeout)
    others = [h for h in cps if h != leader]
    with running_writer(target, report, "kill-leader") as writer:
        report.step("leader is %s (replica %s): powering it off" % (leader, target.replica_id(leader)))
        t0 = time.monotonic()
        target.power_off(leader)
        new, _ = wait_leader(target, others, target.ready_timeout)
        report.step("new leader %s (replica %s)" % (new, target.replica_id(new)))
        report.figure("power-off to new ready leader", time.monotonic() - t0, "s")
        writer.first_ack_after(t0, target.ready_timeout)
        wait_for("%d writes acknowledged through the survivors" % WRITES_DURING_FAULT,
                 lambda: writer.acks_after(t0) >= WRITES_DURING_FAULT, target.ready_timeout)
        _hold(target, t0)
        report.figure("longest write gap (no acknowledged write)", writer.gap_around(t0), "s")
        report.step("%d writes acknowledged while %s is off" % (writer.acks_after(t0), leader))
        t1 = time.monotonic()
        report.step("powering %s on again" % leader)
        target.power_on(leader)
        caught = wait_caught_up(target, leader, others, target.boot_timeout + target.ready_timeout)
        report.figure("power-on to %s caught up" % leader, time.monotonic() - t1, "s")
        report.figure("catch-up once its API answered", caught, "s")
        final, _ = wait_leader(target, cps, target.ready_timeout)
        report.step("one leader among all control planes: %s" % final)
    return report


def partition(target, report):
    """Cut the leader off from the other control planes (iptables inside its host): the
    majority elects a new leader, the isolated one stops serving linearizable reads and
    its controllers stop; healing leaves exactly one leader."""
    cps = target.control_planes
    leader, _ = wait_leader(target, cps, target.ready_timeout)
    others = [h for h in cps if h != leader]
    healed = False
    with running_writer(target, report, "partition") as writer:
        try:
            report.step("leader is %s: dropping all traffic between it and %s" % (leader, ", ".join(others)))
            t0 = time.monotonic()
            target.isolate(leader, others)
            new, _ = wait_leader(target, others, target.ready_timeout)
            report.step("majority elected %s" % new)
            report.figure("cut to new ready leader in the majority", time.monotonic() - t0, "s")
            writer.first_ack_after(t0, target.ready_timeout)
            wait_for("isolated %s refuses linearizable reads" % leader,
                                  lambda: not linearizable_read_ok(target, leader), target.ready_timeout)
            report.figure("cut to isolated replica refusing linearizable reads", time.monotonic() - t0, "s")

            def controllers_stopped():
                state = replica_state(target, leader)
                return state is not None and not (state.get("controllers") or {}).get("active")
            wait_for("controllers of isolated %s stop" % leader, controllers_stopped, target.ready_timeout)
            report.figure("cut to isolated replica's controllers stopped", time.monotonic() - t0, "s")
            wait_for("isolated %s stops claiming to lead" % leader,
                     lambda: (replica_state(target, leader) or {}).get("role") != "leader", target.ready_timeout)
            if not is_ready(target, leader):
                report.step("isolated %s reports not ready (no leader known)" % leader)
            wait_for("%d writes acknowledged by the majority" % WRITES_DURING_FAULT,
                     lambda: writer.acks_after(t0) >= WRITES_DURING_FAULT, target.ready_timeout)
            _hold(target, t0)
            report.figure("longest write gap (no acknowledged write)", writer.gap_around(t0), "s")
            report.step("%d writes acknowledged during the partition" % writer.acks_after(t0))
            t1 = time.monotonic()
            target.heal(leader)
            healed = True
            report.step("healed %s" % leader)

            def single_leader_everyone_ready():
                found = leaders(target, cps)
                return len(found) == 1 and all(is_ready(target, h) for h in cps) and next(iter(found))
            final, _ = wait_for("exactly one leader and every replica ready after heal", single_leader_everyone_ready,
                                target.ready_timeout)
            report.figure("heal to one leader, all ready", time.monotonic() - t1, "s")
            wait_caught_up(target, leader, [final], target.ready_timeout)
            report.step("one leader (%s); %s caught up" % (final, leader))
        finally:
            if not healed:
                target.heal(leader)
    return report


def _node_ready(node):
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _deployment(name, replicas, target):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "main", "image": target.workload_image,
                                                           "imagePullPolicy": "Never",
                                                           "command": list(target.workload_command),
                                                           "resources": {"requests": {"cpu": "10m",
                                                                                      "memory": "8Mi"}}}]}}}}


def _pods_by_node(client, name):
    """{node name: [running pod names]} of the deployment's live pods, and the count of others."""
    pods = client.list("pods", namespace="default", label_selector="app=%s" % name).get("items") or []
    running, other = {}, 0
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if pod["metadata"].get("deletionTimestamp") or (pod.get("status") or {}).get("phase") != "Running" or not node:
            other += 1
            continue
        running.setdefault(node, []).append(pod["metadata"]["name"])
    return running, other


def worker_loss(target, report):
    """Power off a worker running pods: its Node goes NotReady and the Deployment's pods
    run on the other worker; the worker comes back Ready."""
    if len(target.workers) < 2:
        raise DrillFailed("worker loss needs at least 2 workers, the target has %d" % len(target.workers))
    client = target.client(timeout=3.0, retry_deadline=10.0)
    name = "drill-wl-%s" % uuid.uuid4().hex[:6]
    try:
        _worker_loss(target, report, client, name)
    finally:
        try:
            client.delete("deployments", name, namespace="default", propagation_policy="Background")
        except (ApiError, ClientError):
            pass
        client.close()
    return report


def _worker_loss(target, report, client, name):
    nodes = {w: target.node_name(w) for w in target.workers}
    replicas = 2 * len(target.workers)
    wait_for("every worker's node Ready", lambda: all(_node_ready(client.get("nodes", n)) for n in nodes.values()),
             target.ready_timeout, interval=0.3)
    client.create("deployments", _deployment(name, replicas, target), namespace="default")
    report.step("deployment %s with %d replicas created" % (name, replicas))

    def all_running():
        running, _ = _pods_by_node(client, name)
        return running if sum(map(len, running.values())) == replicas else None
    placed, took = wait_for("%d pods Running" % replicas, all_running, target.pod_move_timeout, interval=0.3)
    report.step("pods Running after %.1fs: %s" % (took, _placement(placed)))
    victim = max(target.workers, key=lambda w: len(placed.get(nodes[w], [])))
    survivors = [nodes[w] for w in target.workers if w != victim]
    with running_writer(target, report, "worker-loss"):
        report.step("powering off worker %s (node %s, %d pods)" % (victim, nodes[victim], len(placed[nodes[victim]])))
        t0 = time.monotonic()
        target.power_off(victim)
        wait_for("node %s not Ready" % nodes[victim], lambda: not _node_ready(client.get("nodes", nodes[victim])),
                 target.node_not_ready_timeout, interval=0.2)
        report.figure("power-off to node NotReady", time.monotonic() - t0, "s")

        def moved():
            running, _ = _pods_by_node(client, name)
            on_survivors = sum(len(running.get(n, [])) for n in survivors)
            return on_survivors == replicas and not running.get(nodes[victim]) and running
        final, _ = wait_for("all %d pods Running on %s" % (replicas, ", ".join(survivors)), moved,
                            target.pod_move_timeout, interval=0.3)
        report.figure("power-off to all pods Running elsewhere", time.monotonic() - t0, "s")
        report.step("pods now: %s" % _placement(final))
        t1 = time.monotonic()
        target.power_on(victim)
        wait_for("node %s Ready again" % nodes[victim], lambda: _node_ready(client.get("nodes", nodes[victim])),
                 target.boot_timeout + target.ready_timeout, interval=0.3)
        report.figure("power-on to node Ready", time.monotonic() - t1, "s")


def _placement(running):
    return ", ".join("%s: %d" % (node, len(pods)) for node, pods in sorted(running.items()))


def full_restart(target, report):
    """Power off every host at once and start them all again: the cluster comes back and
    every acknowledged object is there."""
    cps = target.control_planes
    wait_leader(target, cps, target.ready_timeout)
    with running_writer(target, report, "full-restart") as writer:
        hosts = target.hosts()
        before = _configmap_names(target)
        report.step("%d ConfigMaps in the store; powering off every host: %s" % (len(before), ", ".join(hosts)))
        acked_before = len(writer.acked)
        for host in hosts:   # each power-off is immediate (SIGKILL / virsh destroy)
            target.power_off(host)
        wait_for("no control plane answering", lambda: not any(replica_state(target, h) for h in cps),
                 target.boot_timeout)
        report.step("all off (%d writes acknowledged before); powering every host on" % acked_before)
        t0 = time.monotonic()
        target.power_on_many(hosts)
        report.figure("power-on of every host", time.monotonic() - t0, "s")
        t1 = time.monotonic()
        leader, _ = wait_leader(target, cps, target.boot_timeout + target.ready_timeout)
        wait_for("every replica ready", lambda: all(is_ready(target, h) for h in cps), target.ready_timeout)
        report.figure("power-on to a leader and every replica ready", time.monotonic() - t1, "s")
        report.figure("power-on to next acknowledged write",
                      writer.first_ack_after(t1, target.ready_timeout), "s")
        report.step("leader %s; writes acknowledged again" % leader)
        with target.client(timeout=3.0, retry_deadline=target.ready_timeout) as client:
            wait_for("every worker's node Ready again",
                     lambda: all(_node_ready(client.get("nodes", target.node_name(w))) for w in target.workers),
                     target.boot_timeout + target.ready_timeout, interval=0.3)
        report.figure("power-on to every worker node Ready", time.monotonic() - t1, "s")
        missing = before - _configmap_names(target)
        if missing:
            raise DrillFailed("%d ConfigMap(s) that existed before the restart are gone: %s"
                              % (len(missing), ", ".join(sorted(missing)[:5])))
        report.step("all %d ConfigMaps from before the restart are back" % len(before))
    return report


def _configmap_names(target):
    with target.client(timeout=3.0, retry_deadline=target.ready_timeout) as client:
        items = client.list("configmaps", namespace="default").get("items") or []
    return {item["metadata"]["name"] for item in items}


from service_traffic import service_traffic  # noqa: E402 - it runs kill_leader and partition above

DRILLS = {"kill-leader": kill_leader, "partition": partition, "worker-loss": worker_loss,
          "full-restart": full_restart, "service-traffic": service_traffic}
