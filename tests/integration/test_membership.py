"""Membership change while serving, on real replica processes on loopback, under write load
recorded by the chaos workload and judged by the chaos checker: no acknowledged write lost,
none applied twice, linearizable, every member at the same revision and digest at the end.

add a 4th, remove one, replace a dead one (cp3 killed for good, cp4 at a new port, cp3
removed), remove the leader, grow 3 -> 5 -> 3 and restart everyone with their original
flags, and changes attempted while a majority is paused (refused, the cluster converges).
"""
import os
import signal
import subprocess
import sys
import time

import pytest
import requests

from shepherd_ha.cli import local_members
from shepherd_ha.client import Client
from tests.chaos import checker
from tests.chaos.quiescence import final_values, generated_counts
from tests.chaos.recorder import Recorder
from tests.chaos.workload import NAMESPACE, Workload

from .helpers import Cluster, assert_status, call, ensure_namespace, expect

LOAD_CLIENTS, LOAD_KEYS = 3, 6


def _quiet(*_args):
    pass


class Run:
    """A cluster plus the chaos workload recording a history, judged at the end."""

    def __init__(self, tmp_path, replicas=3, server_options=None, auth=False):
        self.cluster = Cluster(tmp_path / "cluster", replicas, server_options=server_options, auth=auth)
        self.lc = self.cluster.lc
        self.history = str(tmp_path / "history.jsonl")
        self.recorder = None
        self.workload = None

    def __enter__(self):
        self.cluster.start()
        return self

    def __exit__(self, *exc):
        if self.workload is not None and not self.workload.stop.is_set():
            self.workload.finish()
        if self.recorder is not None:
            self.recorder.close()
        self.lc.stop_all(timeout=5.0)

    def url(self, ident):
        return self.lc.replica(ident)["api"]

    def members(self, via=None):
        info = local_members.members(self.lc, via)
        return sorted(m["id"] for m in info["members"])

    def start_load(self, seed):
        ensure_namespace(self.url(self.lc.ids()[0]), NAMESPACE)
        self.recorder = Recorder(self.history)
        self.workload = Workload({i: self.url(i) for i in self.lc.ids()}, self.recorder, clients=LOAD_CLIENTS,
                                 keys=LOAD_KEYS, seed=seed, pace=0.01)
        self.workload.start()
        time.sleep(1.5)

    def leader(self, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.lc.leader()
            if leader:
                return leader
            time.sleep(0.1)
        raise AssertionError("no leader within %.0fs" % timeout)

    def finish_and_check(self, expected_members):
        """Stop the load, read the final state through the current members, run the checker."""
        time.sleep(1.5)             # writes go on after the last change
        errors = self.workload.finish()
        assert not errors, errors
        assert self.members() == sorted(expected_members)
        self.lc.wait_ready(60, ids=expected_members)
        admin = Client([self.url(i) for i in expected_members], timeout=2.5, retry_deadline=30.0)
        try:
            for key, value in sorted(final_values(admin, self.workload.keys).items()):
                self.recorder.line({"final": True, "key": key, "value": value})
            self.recorder.line({"final_generated": True, "op_ids": generated_counts(admin)})
        finally:
            admin.close()
        self.recorder.line({"quiescence": dict(same_state(self, expected_members), deployments={},
                                               pods_on_missing_nodes=0, fenced_rejections=0)})
        self.recorder.close()
        report = checker.check(self.history)
        assert report.ok, report.render()
        totals = self.recorder.outcome_totals()
        assert totals.get("ok", 0) > 50, "too little load to judge: %s" % totals
        return report


def same_state(run, ids, timeout=60.0):
    """Every member at one revision with one digest (waits for the last one to catch up)."""
    deadline = time.monotonic() + timeout
    while True:
        states = {}
        for ident in ids:
            try:
                states[ident] = call("GET", run.url(ident) + "/shepherd/v1/replica", params={"digest": "1"},
                                     timeout=5.0, headers=run.lc.auth_headers()).json()
            except (requests.RequestException, ValueError):
                states[ident] = None
        revisions = {i: s and s["revision"] for i, s in states.items()}
        if len(set(revisions.values())) == 1 and None not in revisions.values() or time.monotonic() >= deadline:
            return {"revisions": revisions, "digests": {i: s and s.get("digest") for i, s in states.items()}}
        time.sleep(0.3)


def objects_on(run, ident):
    body = expect(call("GET", run.url(ident) + "/api/v1/namespaces/%s/configmaps" % NAMESPACE,
                       params={"resourceVersion": "0"}, headers=run.lc.auth_headers()), 200)
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in body["items"]}


def test_add_a_fourth_then_remove_one_under_writes(tmp_path):
    with Run(tmp_path) as run:
        run.start_load(seed=41)
        added = local_members.add_replica(run.lc, progress=_quiet)
        assert added == "r4"
        assert run.members() == ["r1", "r2", "r3", "r4"]
        info = local_members.members(run.lc)
        assert info["quorum"] == 3 and info["progressKnown"]
        # The view follows: every replica's cluster view lists r4 with its API URL.
        for ident in ("r1", "r4"):
            view = run.cluster.view(ident) if ident != "r4" else expect(call("GET", run.url("r4") + "/shepherd/v1/cluster"), 200)
            listed = {r["id"]: r for r in view["replicas"]}
            assert set(listed) == {"r1", "r2", "r3", "r4"}, view
            assert listed["r4"]["api"] == run.url("r4") and listed["r4"]["reachable"], listed["r4"]
        follower = next(i for i in ("r1", "r2", "r3") if i != run.leader())
        local_members.remove_replica(run.lc, follower, progress=_quiet)
        rest = [i for i in ("r1", "r2", "r3", "r4") if i != follower]
        run.finish_and_check(rest)
        state = same_state(run, rest)
        assert len(set(state["digests"].values())) == 1, state
        assert objects_on(run, "r4") == objects_on(run, rest[0])
        # PySyncObj's membership entries (a pickled TCPNode) went through the restricted
        # unpickler's membership path on every replica left, refused nowhere (restricted_pickle).
        for ident in rest:
            with open(run.lc._paths(ident)[2], errors="replace") as fh:
                logged = fh.read()
            assert "refused a Raft" not in logged, (ident, [l for l in logged.splitlines() if "refused a Raft" in l][:3])


def test_replace_a_replica_that_died_for_good(tmp_path):
    with Run(tmp_path) as run:
        run.start_load(seed=42)
        run.lc.kill("r3")          # destroyed: never comes back
        time.sleep(1.5)
        # Add first: with 2 of 3 up, a quorum of 3 of 4 would need the newcomer, which has no log.
        with pytest.raises(local_members.LocalClusterError) as err:
            local_members.add_replica(run.lc, progress=_quiet)
        assert "quorum 3 of 4" in str(err.value) and "force" in str(err.value), err.value
        assert run.members() == ["r1", "r2", "r3"] and "r4" not in run.lc.ids()
        # The safe order: the dead one out (quorum 2 of 2, both up), then the new one in (2 of 3).
        local_members.remove_replica(run.lc, "r3", progress=_quiet)
        assert run.members() == ["r1", "r2"]
        assert local_members.add_replica(run.lc, progress=_quiet) == "r4"
        assert run.members() == ["r1", "r2", "r4"]
        assert local_members.members(run.lc)["quorum"] == 2
        assert run.lc.replica("r4")["raft"] != "127.0.0.1:%d" % (run.lc.spec()["base_port"] + 103)
        run.finish_and_check(["r1", "r2", "r4"])
        assert objects_on(run, "r4") == objects_on(run, "r1")


def test_remove_the_leader_under_writes(tmp_path):
    with Run(tmp_path) as run:
        run.start_load(seed=43)
        leader = run.leader()
        local_members.remove_replica(run.lc, leader, progress=_quiet)
        rest = [i for i in ("r1", "r2", "r3") if i != leader]
        new_leader = run.leader()
        assert new_leader in rest
        run.finish_and_check(rest)


def test_grow_three_to_five_to_three_and_restart_with_the_original_flags(tmp_path):
    # A small compaction threshold: the membership must survive both the journal and the dump.
    with Run(tmp_path, server_options={"log_compaction_entries": 200}) as run:
        original = {i: open(os.path.join(run.lc.dir, i, "server.yaml")).read() for i in ("r1", "r2", "r3")}
        run.start_load(seed=44)
        assert local_members.add_replica(run.lc, progress=_quiet) == "r4"
        assert local_members.add_replica(run.lc, progress=_quiet) == "r5"
        assert local_members.members(run.lc)["quorum"] == 3
        local_members.remove_replica(run.lc, "r1", progress=_quiet)
        local_members.remove_replica(run.lc, "r2", progress=_quiet)
        run.finish_and_check(["r3", "r4", "r5"])
        # Everyone stops; r3 gets back the flags it was made with (peers r1, r2).
        run.lc.stop_all(timeout=5.0)
        assert os.path.exists(os.path.join(run.lc.dir, "r3", "data", "raft.dump")), \
            "no compaction happened: the restart would test the journal alone"
        with open(os.path.join(run.lc.dir, "r3", "server.yaml"), "w") as fh:
            fh.write(original["r3"])
        run.lc.start_all()
        run.lc.wait_ready(60)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if run.members(["r3"]) == ["r3", "r4", "r5"] and run.members(["r4"]) == ["r3", "r4", "r5"]:
                    break
            except Exception:  # noqa: BLE001 - settling
                pass
            time.sleep(0.3)
        assert run.members(["r3"]) == ["r3", "r4", "r5"]
        view = run.cluster.view("r3")
        assert sorted(r["id"] for r in view["replicas"]) == ["r3", "r4", "r5"], view


def test_a_change_during_a_partition_is_refused_and_the_cluster_converges(tmp_path):
    with Run(tmp_path, auth=True) as run:
        lc = run.lc
        leader = run.leader()
        followers = [i for i in lc.ids() if i != leader]
        headers = lc.auth_headers()
        node_token = lc.node_token("member-test-node")
        # Not an admin: 403, whatever the cluster's state.
        assert_status(call("DELETE", run.url(leader) + "/shepherd/v1/members/" + followers[0],
                           headers={"Authorization": "Bearer " + node_token}), 403)
        # One follower paused: removing the other would leave the quorum 2 of 2 with one up.
        lc.signal(followers[0], signal.SIGSTOP)
        try:
            time.sleep(1.5)
            body = assert_status(call("DELETE", run.url(followers[1]) + "/shepherd/v1/members/" + followers[1],
                                      headers=headers), 503)
            assert "quorum is 2 of 2" in body["message"], body
            # Adding while one of three is away: the quorum of four would need the newcomer.
            body = assert_status(call("POST", run.url(leader) + "/shepherd/v1/members", headers=headers,
                                      json={"id": "r9", "raft": "127.0.0.1:1", "api": run.url(leader),
                                            "force": False}), 409)
            assert "not r9" in body["message"] or "does not answer" in body["message"], body
            # A majority paused: no leader, the change fails fast with a 503 naming the fix.
            lc.signal(followers[1], signal.SIGSTOP)
            time.sleep(2.0)
            started = time.monotonic()
            reply = call("DELETE", run.url(leader) + "/shepherd/v1/members/" + followers[0], headers=headers,
                         timeout=60)
            assert reply.status_code == 503, reply.text
            assert time.monotonic() - started < 30
            assert_status(reply, 503)
        finally:
            for ident in followers:
                lc.signal(ident, signal.SIGCONT)
        lc.wait_ready(60)
        assert run.members() == ["r1", "r2", "r3"]
        state = same_state(run, ["r1", "r2", "r3"])
        assert len(set(state["digests"].values())) == 1, state
        # Whole again: the same removal now goes through.
        local_members.remove_replica(lc, followers[1], progress=_quiet)
        assert run.members() == sorted([leader, followers[0]])



def _sheepctl(config, *argv):
    """Run sheepctl in a subprocess (its own stdout); (code, output)."""
    proc = subprocess.run([sys.executable, "-m", "ctl.main", "--config", config] + list(argv),
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def test_sheepctl_add_status_remove_and_a_join_under_a_taken_id(tmp_path):
    with Run(tmp_path, auth=True) as run:
        lc = run.lc
        config = os.path.join(lc.dir, "config")
        # A replica that is not running is not added (it would be a voter that never answers).
        code, out = _sheepctl(config, "cluster", "add-replica", "r9", "--raft", "127.0.0.1:1",
                              "--api", "http://127.0.0.1:9", "--wait", "0")
        assert code == 1 and "does not answer" in out and "--join" in out, out
        member = local_members.start_new_replica(lc, progress=_quiet)
        term = lc.replica_status(run.leader())["term"]
        time.sleep(2.0)      # several election timeouts: a joiner that campaigned would have a term by now
        assert lc.replica_status("r4")["term"] == 0, lc.replica_status("r4")
        code, out = _sheepctl(config, "cluster", "add-replica", member["id"], "--raft", member["raft"],
                              "--api", member["api"])
        assert code == 0, out
        # Added and caught up without an election: the joiner stayed passive until contacted.
        assert lc.replica_status(run.leader())["term"] == term
        assert lc.replica_status("r4")["term"] == term
        assert "replica r4 added (quorum now 3 of 4)" in out and "replica r4 caught up" in out, out
        code, out = _sheepctl(config, "cluster", "status")
        assert code == 0, out
        assert "MEMBER" in out and "CAUGHT-UP" in out and "quorum: 3 of 4" in out, out
        assert any(line.split()[:1] == ["r4"] and member["raft"] in line for line in out.splitlines()), out
        # Adding it again: 409 naming the fix.
        code, out = _sheepctl(config, "cluster", "add-replica", "r4", "--raft", member["raft"], "--api",
                              member["api"], "--wait", "0")
        assert code == 1 and "already a member" in out, out
        # A new server joining under r4's id at another address is refused before it starts.
        proc = subprocess.run([sys.executable, "-m", "shepherd_ha.cli.main", "server", "--id", "r4",
                               "--raft-address", "127.0.0.1:1", "--api-bind", "127.0.0.1:2",
                               "--data-dir", str(tmp_path / "dup"), "--raft-password-file",
                               os.path.join(lc.dir, "raft-password"), "--raft-salt", lc.spec()["raft_salt"],
                               "--join", run.url("r1"), "--insecure-http"],     # this cluster is plain HTTP
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "already a member at Raft %s" % member["raft"] in proc.stderr, proc.stderr
        code, out = _sheepctl(config, "cluster", "remove-replica", "r4")
        assert code == 0 and "replica r4 removed (quorum now 2 of 3)" in out, out
        local_members.retire_replica(lc, "r4")
        assert run.members() == ["r1", "r2", "r3"]
        code, out = _sheepctl(config, "cluster", "remove-replica", "r4")
        assert code == 1 and "not a member" in out, out
