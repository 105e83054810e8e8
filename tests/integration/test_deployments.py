"""The deployment controller on a real 3-replica cluster (it runs on the leader).

No nodes are registered (but in one test): pods stay unscheduled, and the test plays the agents,
marking pods ready through the status subresource. Each test works in its own
namespace. Every wait is a bounded loop.

- a 6-replica deployment reaches 6 owned pods; scaling down keeps the ready ones;
- a rolling update, replayed from a watch of every pod change, never has fewer than
  replicas - maxUnavailable ready pods nor more than replicas + maxSurge pods;
  `sheepctl rollout status/history/undo` follow, list and undo it;
- `rollout status` exits 1 once the progress deadline passes;
- with 3 nodes registered, the scheduler (same leader) spreads 6 pods 2 per node;
- the leader is SIGKILLed mid-rollout: the new leader finishes it with exactly
  `replicas` pods, no duplicates and no extra revision.
"""
import contextlib
import io
import threading
import time

import pytest

from ctl.main import main as sheepctl
from shepherd_ha.client import ApiError, Client
from shepherd_ha.controllers.deployment_util import HASH_LABEL, template_hash
from shepherd_ha.model.times import now_rfc3339

from . import helpers
from .helpers import Watch, ensure_namespace, unique

pytestmark = pytest.mark.integration

WAIT = 30.0      # seconds any controller outcome may take to show up


# ---- helpers ----

def wait_for(what, predicate, timeout=WAIT, interval=0.05):
    return helpers.wait_for(what, predicate, timeout, interval)


def deployment_body(name, replicas, image="nginx:1.25", surge=1, unavailable=1, cause=None, **spec):
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": dict({"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                          "strategy": {"type": "RollingUpdate",
                                       "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}},
                          "template": {"metadata": {"labels": {"app": name}},
                                       "spec": {"containers": [{"name": "main", "image": image}]}}}, **spec)}
    if cause:
        body["metadata"]["annotations"] = {"kubernetes.io/change-cause": cause}
    return body


class Env:
    def __init__(self, cluster, prefix="dep"):
        self.cluster = cluster
        self.urls = [cluster.url(i) for i in cluster.ids]
        self.client = Client(self.urls, timeout=5.0, retry_deadline=20.0)
        self.ns = unique(prefix)
        ensure_namespace(self.urls[0], self.ns)

    def close(self):
        self.client.close()

    def create(self, body):
        return self.client.create("deployments", body, namespace=self.ns)

    def deployment(self, name):
        return self.client.get("deployments", name, self.ns)

    def replica_sets(self, d):
        """The deployment's ReplicaSets (its controller reference), oldest revision first."""
        uid = d["metadata"]["uid"]
        items = self.client.list("replicasets", self.ns)["items"]
        owned = [r for r in items if any(ref.get("uid") == uid and ref.get("controller")
                                         for ref in r["metadata"].get("ownerReferences") or [])]
        return sorted(owned, key=lambda r: int(r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]))

    def pods(self, d):
        """Pods of the deployment's ReplicaSets."""
        uids = {r["metadata"]["uid"] for r in self.replica_sets(d)}
        items = self.client.list("pods", self.ns)["items"]
        return [p for p in items if any(r.get("uid") in uids and r.get("controller") and r.get("kind") == "ReplicaSet"
                                        for r in p["metadata"].get("ownerReferences") or [])]

    def mark_ready(self, pod):
        try:
            self.client.patch("pods", pod["metadata"]["name"], {"status": {
                "phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                    "lastTransitionTime": now_rfc3339()}]}},
                namespace=self.ns, subresource="status")
        except ApiError as exc:
            if exc.reason != "NotFound":      # deleted meanwhile by the controller: fine
                raise

    def ctl(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = sheepctl(["--server", ",".join(self.urls), "-n", self.ns] + list(argv))
        return rc, out.getvalue(), err.getvalue()

    def ready_pods_of_current_template(self, name):
        """Mark every not-ready pod of the deployment's current template ready; True when
        the rollout is complete (only current pods, all ready, status says so)."""
        d = self.deployment(name)
        h = template_hash(d["spec"]["template"])
        pods = self.pods(d)
        for pod in pods:
            if pod["metadata"]["labels"].get(HASH_LABEL) == h and not is_ready(pod):
                self.mark_ready(pod)
        st = d.get("status") or {}
        replicas = d["spec"]["replicas"]
        return (len(pods) == replicas and all(p["metadata"]["labels"].get(HASH_LABEL) == h and is_ready(p)
                                              for p in pods)
                and st.get("observedGeneration") == d["metadata"]["generation"]
                and st.get("updatedReplicas") == st.get("availableReplicas") == st.get("replicas") == replicas)

    def finish_rollout(self, name, timeout=WAIT):
        return wait_for("rollout of %s to complete" % name, lambda: self.ready_pods_of_current_template(name),
                        timeout, interval=0.1)

    def set_image(self, name, image, cause):
        d = self.deployment(name)
        d["spec"]["template"]["spec"]["containers"][0]["image"] = image
        d["metadata"].setdefault("annotations", {})["kubernetes.io/change-cause"] = cause
        return self.client.replace("deployments", d)


def is_ready(pod):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


@pytest.fixture
def env(cluster):
    e = Env(cluster)
    yield e
    e.close()


def replay_invariants(initial, events, owner_uids, replicas, surge, unavailable):
    """Apply the watch events one by one to the listed pods; check the bounds after each
    (`owner_uids`: the deployment's ReplicaSets)."""
    pods = {p["metadata"]["name"]: p for p in initial}
    worst_ready, most_pods, steps = replicas, 0, 0
    for event in events:
        if event.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
            continue
        obj = event["object"]
        name = obj["metadata"]["name"]
        if event["type"] == "DELETED":
            pods.pop(name, None)
        else:
            pods[name] = obj
        owned = [p for p in pods.values() if any(r.get("uid") in owner_uids for r in
                                                 p["metadata"].get("ownerReferences") or [])]
        ready = sum(1 for p in owned if is_ready(p))
        steps += 1
        worst_ready, most_pods = min(worst_ready, ready), max(most_pods, len(owned))
        assert len(owned) <= replicas + surge, "step %d: %d pods > %d + %d" % (steps, len(owned), replicas, surge)
        assert ready >= replicas - unavailable, "step %d: %d ready < %d - %d" % (steps, ready, replicas,
                                                                                 unavailable)
    return worst_ready, most_pods, steps


# ---- tests ----

def test_six_replicas_then_scaling_keeps_ready_pods(env):
    d = env.create(deployment_body("web", 6))
    pods = wait_for("6 pods", lambda: (lambda ps: ps if len(ps) == 6 else None)(env.pods(d)))
    h = template_hash(env.deployment("web")["spec"]["template"])
    for pod in pods:
        assert pod["metadata"]["name"].startswith("web-%s-" % h)
        assert pod["metadata"]["labels"] == {"app": "web", HASH_LABEL: h}
    keep = sorted(p["metadata"]["name"] for p in pods[:2])
    for pod in pods[:2]:
        env.mark_ready(pod)
    wait_for("2 ready in status", lambda: (env.deployment("web").get("status") or {}).get("readyReplicas") == 2)
    rc, out, err = env.ctl("scale", "deployment", "web", "--replicas", "2")
    assert rc == 0, err
    wait_for("scale down to 2", lambda: len(env.pods(d)) == 2)
    time.sleep(0.5)
    assert sorted(p["metadata"]["name"] for p in env.pods(d)) == keep, "not-ready pods went first"
    env.client.scale("deployments", "web", 5, namespace=env.ns)
    wait_for("scale up to 5", lambda: len(env.pods(d)) == 5)
    st = wait_for("status of 5", lambda: (lambda s: s if s.get("replicas") == 5 and
                                          s.get("readyReplicas") == 2 else None)(
        env.deployment("web").get("status") or {}))
    assert st["updatedReplicas"] == 5 and st["availableReplicas"] == 2 and st["unavailableReplicas"] == 3
    events = env.client.list("events", env.ns)["items"]
    reasons = [(e["reason"], e["message"]) for e in events if e["involvedObject"].get("name") == "web"]
    rs_name = "web-" + h
    assert ("ScalingReplicaSet", "Scaled up replica set %s from 0 to 6" % rs_name) in reasons
    assert ("ScalingReplicaSet", "Scaled down replica set %s from 6 to 2" % rs_name) in reasons
    rs_reasons = [(e["reason"], e["message"]) for e in events if e["involvedObject"].get("name") == rs_name
                  and e["involvedObject"].get("kind") == "ReplicaSet"]
    assert any(r == "SuccessfulCreate" and m.startswith("Created 6 pods: web-") for r, m in rs_reasons)
    assert any(r == "SuccessfulDelete" and m.startswith("Deleted 4 pods: ") for r, m in rs_reasons)
    # a stranger with matching labels is never adopted nor deleted
    stranger = env.client.create("pods", {"metadata": {"name": "stranger", "labels": {"app": "web"}},
                                          "spec": {"containers": [{"name": "c", "image": "x"}]}}, namespace=env.ns)
    env.client.scale("deployments", "web", 1, namespace=env.ns)
    wait_for("scale down to 1", lambda: len(env.pods(d)) == 1)
    assert env.client.get("pods", "stranger", env.ns)["metadata"]["uid"] == stranger["metadata"]["uid"]


def test_rolling_update_bounds_status_history_and_undo(env):
    replicas, surge, unavailable = 4, 1, 1
    d = env.create(deployment_body("web", replicas, surge=surge, unavailable=unavailable, cause="v1"))
    wait_for("4 pods", lambda: len(env.pods(d)) == 4)
    env.finish_rollout("web")
    listed = env.client.list("pods", env.ns)
    watch = Watch(env.urls[0], "/api/v1/namespaces/%s/pods" % env.ns,
                  resource_version=listed["metadata"]["resourceVersion"], timeout=120)
    try:
        env.set_image("web", "nginx:1.26", "v2")
        # `rollout status` follows live while a helper thread plays the agents
        stop = threading.Event()

        def agents():
            deadline = time.monotonic() + WAIT
            while not stop.is_set() and time.monotonic() < deadline:
                if env.ready_pods_of_current_template("web"):
                    return
                time.sleep(0.15)
        helper = threading.Thread(target=agents, daemon=True)
        helper.start()
        rc, out, err = env.ctl("rollout", "status", "deployment/web", "--timeout", str(WAIT))
        stop.set()
        helper.join(10)
        assert (rc, err) == (0, ""), out + err
        lines = out.splitlines()
        assert lines[-1] == 'deployment "web" successfully rolled out'
        assert len(lines) >= 2 and all(line.startswith(("Waiting for deployment", "deployment")) for line in lines)
        env.finish_rollout("web")
        time.sleep(0.3)      # the watch catches up
        rs_uids = {r["metadata"]["uid"] for r in env.replica_sets(d)}
        assert len(rs_uids) == 2, "one ReplicaSet per template"
        worst_ready, most_pods, steps = replay_invariants(listed["items"], watch.changes(), rs_uids, replicas, surge,
                                                          unavailable)
    finally:
        watch.close()
    assert steps >= 12, "every pod was replaced: %d changes seen" % steps
    assert worst_ready == replicas - unavailable and most_pods == replicas + surge, "the bounds were used"

    rc, out, err = env.ctl("rollout", "history", "deployment/web")
    assert rc == 0, err
    assert [line.split(None, 1) for line in out.splitlines()] == [
        ["deployment.apps/web"], ["REVISION", "CHANGE-CAUSE"], ["1", "v1"], ["2", "v2"]]
    first_hash = template_hash(deployment_body("web", 1)["spec"]["template"])

    rc, out, err = env.ctl("rollout", "undo", "deployment/web")
    assert (rc, out.strip()) == (0, "deployment.apps/web rolled back to revision 1"), err
    env.finish_rollout("web")
    d = env.deployment("web")
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    pods = env.pods(d)
    assert len(pods) == replicas
    rc, out, err = env.ctl("rollout", "history", "deployment/web")
    assert [line.split(None, 1) for line in out.splitlines()][2:] == [["2", "v2"], ["3", "v1"]]
    assert len({p["metadata"]["labels"][HASH_LABEL] for p in pods}) == 1
    rc, out, err = env.ctl("rollout", "undo", "deployment/web", "--to-revision", "2")
    assert rc == 0 and "rolled back to revision 2" in out
    env.finish_rollout("web")
    assert env.deployment("web")["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26"
    assert first_hash != template_hash(env.deployment("web")["spec"]["template"])


def node_body(name):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64"}},
            "spec": {"unschedulable": False},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Test",
                                       "message": "registered by the test",
                                       "lastTransitionTime": now_rfc3339()}]}}


def test_six_replicas_spread_over_three_nodes(make_cluster):
    """With the scheduler on the same leader: bindings do not disturb the deployment,
    and its 6 pods land 2 per node. (A fresh cluster: its nodes' leases are not renewed,
    which the node lifecycle controller tolerates for its grace period, longer than this test.)"""
    env = Env(make_cluster(), "spread")
    try:
        ensure_namespace(env.urls[0], "kube-node-lease")
        for name in ("dn-1", "dn-2", "dn-3"):
            env.client.create("nodes", node_body(name))
            env.client.create("leases", {"metadata": {"name": name, "namespace": "kube-node-lease"},
                                         "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                                                  "renewTime": now_rfc3339()}}, namespace="kube-node-lease")
        d = env.create(deployment_body("web", 6))

        def placed():
            pods = env.pods(d)
            nodes = [p["spec"].get("nodeName") for p in pods]
            return nodes if len(pods) == 6 and all(nodes) else None
        nodes = wait_for("6 pods bound", placed, timeout=12)
        assert sorted(nodes.count(n) for n in set(nodes)) == [2, 2, 2], nodes
        env.finish_rollout("web", timeout=10)
        time.sleep(0.5)
        assert len(env.pods(d)) == 6, "bindings made the controller create nothing more"
    finally:
        env.close()


def test_rollout_status_fails_after_the_progress_deadline(env):
    env.create(deployment_body("stuck", 2, progressDeadlineSeconds=2))
    started = time.monotonic()
    rc, out, err = env.ctl("rollout", "status", "deployment/stuck", "--timeout", str(WAIT))
    elapsed = time.monotonic() - started
    assert rc == 1, out + err
    assert err.startswith('error: deployment "stuck" exceeded its progress deadline'), err
    assert 1.5 < elapsed < 15, elapsed
    events = [e for e in env.client.list("events", env.ns)["items"] if e["reason"] == "ProgressDeadlineExceeded"]
    assert events and events[0]["type"] == "Warning"
    cond = [c for c in env.deployment("stuck")["status"]["conditions"] if c["type"] == "Progressing"][0]
    assert (cond["status"], cond["reason"]) == ("False", "ProgressDeadlineExceeded")


def test_leader_killed_mid_rollout_finishes_with_exactly_replicas_pods(make_cluster):
    cluster = make_cluster()
    env = Env(cluster, "failover")
    try:
        replicas = 6
        d = env.create(deployment_body("web", replicas, surge=2, unavailable=1, cause="v1"))
        wait_for("6 pods", lambda: len(env.pods(d)) == replicas)
        env.finish_rollout("web")
        env.set_image("web", "nginx:1.26", "v2")
        new_hash = template_hash(env.deployment("web")["spec"]["template"])

        def mid_rollout():
            pods = env.pods(d)
            new = [p for p in pods if p["metadata"]["labels"][HASH_LABEL] == new_hash]
            for pod in new[:1]:
                if not is_ready(pod):
                    env.mark_ready(pod)
            return len(new) >= 2 and len(pods) > len(new)
        wait_for("a rollout half way", mid_rollout)
        leader = cluster.leader()
        cluster.kill(leader)
        new_leader = cluster.leader(timeout=20)
        assert new_leader != leader
        env.finish_rollout("web", timeout=45)
        time.sleep(1.5)       # and it stays that way: nothing more is created
        pods = env.pods(d)
        names = [p["metadata"]["name"] for p in pods]
        assert len(pods) == replicas and len(set(names)) == replicas
        assert {p["metadata"]["labels"][HASH_LABEL] for p in pods} == {new_hash}
        assert all(len(p["metadata"]["ownerReferences"]) == 1 for p in pods)
        everything = env.client.list("pods", env.ns)["items"]
        assert len(everything) == replicas, "no stray pods left in the namespace"
        d = env.deployment("web")
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
        revisions = [r["metadata"]["annotations"]["deployment.kubernetes.io/revision"] for r in env.replica_sets(d)]
        assert revisions == ["1", "2"], "no revision recorded twice"
        assert [r["spec"]["replicas"] for r in env.replica_sets(d)] == [0, replicas]
        st = d["status"]
        assert (st["replicas"], st["updatedReplicas"], st["readyReplicas"], st["availableReplicas"]) == \
            (replicas,) * 4
        rc, out, err = env.ctl("rollout", "status", "deployment/web", "--timeout", "10")
        assert rc == 0 and 'successfully rolled out' in out
    finally:
        env.close()
