"""`shepherd-ha local roll --dir DIR`: restart every replica, one at a time, while writes go on.

Followers first, the leader last (one election, not one per replica). Each replica is
stopped cleanly (SIGTERM: its store syncs and closes its Raft links, so the others
notice at once), started again, and the next one is only touched once this one has
applied everything the leader had committed when it came back, and every replica
answers /readyz: at no moment are two replicas down, so a 3-replica cluster keeps
its quorum throughout. A probe writes one ConfigMap every 50 ms through the failover
client; the longest time between two acknowledged writes is the write gap the roll
cost (the leader's restart: an election).
"""
import threading
import time
import uuid

from shepherd_ha.client import Client, ClientError

from .local_cluster import LocalClusterError

PROBE_NAMESPACE = "default"
PROBE_INTERVAL = 0.05


class WriteProbe:
    """Creates ConfigMaps one after another (deleted at the end) and keeps each ack's time."""

    def __init__(self, urls, token=None, cluster_id=None, ca_file=None):
        self.client = Client(urls, timeout=2.0, retry_deadline=4.0, token=token, cluster_id=cluster_id,
                             ca_file=ca_file)
        self.run_id = "roll-probe-%s" % uuid.uuid4().hex[:8]
        self.acked, self.failed = [], 0
        self.ack_times = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="roll-probe", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _run(self):
        seq = 0
        while not self._stop.is_set():
            seq += 1
            name = "%s-%05d" % (self.run_id, seq)
            try:
                self.client.create("configmaps", {"metadata": {"name": name, "labels": {"shepherd.io/roll-probe":
                                                                                      self.run_id}},
                                                  "data": {"seq": str(seq)}}, namespace=PROBE_NAMESPACE)
                self.acked.append(name)
                self.ack_times.append(time.monotonic())
            except (ClientError, OSError):
                self.failed += 1
            self._stop.wait(PROBE_INTERVAL)

    def longest_gap(self):
        times = list(self.ack_times)
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)

    def stop(self):
        self._stop.set()
        self._thread.join(15)

    def clean_up(self):
        """Delete the probe's ConfigMaps (best effort: they are labelled with the run)."""
        for name in self.acked:
            try:
                self.client.delete("configmaps", name, namespace=PROBE_NAMESPACE)
            except (ClientError, OSError):
                pass
        self.client.close()


def roll_order(cluster):
    """Replica ids, followers first and the leader last."""
    leader = cluster.leader()
    ids = cluster.ids()
    return [i for i in ids if i != leader] + ([leader] if leader in ids else [])


def _leader_commit(cluster):
    leader = cluster.leader()
    state = cluster.replica_status(leader, timeout=2.0) if leader else None
    return state["commitIndex"] if state else None


def wait_caught_up(cluster, ident, timeout):
    """Seconds until `ident` has applied what the leader had committed once `ident` answered."""
    start = time.monotonic()
    deadline = start + timeout
    goal = None
    while time.monotonic() < deadline:
        if goal is None and cluster.replica_status(ident, timeout=1.0) is not None:
            goal = _leader_commit(cluster)
        if goal is not None:
            state = cluster.replica_status(ident, timeout=1.0)
            if state and state.get("appliedIndex", -1) >= goal:
                return time.monotonic() - start, goal
        time.sleep(0.1)
    raise LocalClusterError("%s did not catch up within %.0fs (leader's commit index %s; see %s/%s/server.log)"
                            % (ident, timeout, goal, cluster.dir, ident))


def roll(cluster, timeout=60.0, progress=print, probe=True):
    """Restart every replica in roll_order; returns {"order", "longest_gap", "acked", "failed", "steps"}."""
    down = [i for i in cluster.ids() if not cluster.pid(i)]
    if down:
        raise LocalClusterError("replica(s) %s not running: start them (`shepherd-ha local start ID`) and let them "
                                "catch up first; restarting another one now could leave no quorum" % ", ".join(down))
    cluster.wait_ready(timeout, ids=cluster.ids())
    order = roll_order(cluster)
    writer = WriteProbe(cluster.api_urls(), cluster.token(), cluster.cluster_id(), cluster.ca_file).start() if probe else None
    steps = []
    try:
        for number, ident in enumerate(order, start=1):
            role = "leader" if number == len(order) else "follower"
            progress("[%d/%d] restarting %s (%s)" % (number, len(order), ident, role))
            t0 = time.monotonic()
            cluster.stop(ident)
            cluster.start(ident)
            caught, goal = wait_caught_up(cluster, ident, timeout)
            cluster.wait_ready(timeout, ids=cluster.ids())
            took = time.monotonic() - t0
            steps.append({"id": ident, "role": role, "seconds": took, "commitIndex": goal})
            progress("[%d/%d] %s back: applied the leader's commit index %d %.1fs after it answered; every "
                     "replica ready (%.1fs in all)" % (number, len(order), ident, goal, caught, took))
    finally:
        if writer is not None:
            writer.stop()
    result = {"order": order, "steps": steps, "longest_gap": writer.longest_gap() if writer else None,
              "acked": len(writer.acked) if writer else 0, "failed": writer.failed if writer else 0,
              "leader": cluster.leader()}
    if writer is not None:
        progress("writes during the roll: %d acknowledged, %d failed; longest write gap %.2fs"
                 % (result["acked"], result["failed"], result["longest_gap"]))
        writer.clean_up()
    return result
