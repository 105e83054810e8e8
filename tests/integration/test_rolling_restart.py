"""`shepherd-ha local roll` on a 3-replica cluster under the chaos workload: every replica
restarted (followers first, the leader last, each caught up before the next), and the
recorded history passes the chaos checker: no acknowledged write lost, none applied twice,
linearizable registers, no stale reads; the longest write gap is printed."""
import time

import pytest

from shepherd_ha.cli.local_cluster import LocalClusterError
from shepherd_ha.cli.rolling_restart import roll, roll_order
from shepherd_ha.client import Client
from tests.chaos import quiescence
from tests.chaos.checker import check
from tests.chaos.recorder import Recorder
from tests.chaos.workload import NAMESPACE, Workload

from .helpers import call, ensure_namespace, expect


def _same_revision_and_digest(cluster, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        states = {i: expect(call("GET", cluster.url(i) + "/shepherd/v1/replica", params={"digest": "1"}), 200)
                  for i in cluster.ids}
        revisions = {i: s["revision"] for i, s in states.items()}
        if len(set(revisions.values())) == 1 or time.monotonic() > deadline:
            return {"revisions": revisions, "digests": {i: s["digest"] for i, s in states.items()}}
        time.sleep(0.3)


def test_local_roll_under_load_loses_no_acknowledged_write(make_cluster, tmp_path):
    cluster = make_cluster()
    urls = {i: cluster.url(i) for i in cluster.ids}
    ensure_namespace(urls["r1"], NAMESPACE)
    pids_before = {i: cluster.lc.pid(i) for i in cluster.ids}
    leader_before = cluster.leader()
    assert roll_order(cluster.lc)[-1] == leader_before
    history = str(tmp_path / "history.jsonl")
    recorder = Recorder(history)
    workload = Workload(urls, recorder, clients=3, keys=4, seed=17)
    lines = []
    workload.start()
    try:
        time.sleep(1.0)
        result = roll(cluster.lc, timeout=60.0, progress=lines.append)
        time.sleep(1.0)
    finally:
        errors = workload.finish()
    assert not errors, errors
    text = "\n".join(lines)
    # Every replica restarted exactly once, the leader last, each caught up before the next.
    assert result["order"][-1] == leader_before and sorted(result["order"]) == sorted(cluster.ids), text
    assert all(cluster.lc.pid(i) not in (None, pids_before[i]) for i in cluster.ids), text
    assert [s["id"] for s in result["steps"]] == result["order"]
    assert "[3/3] restarting %s (leader)" % leader_before in text
    assert text.count("applied the leader's commit index") == 3, text
    assert "longest write gap" in text and result["longest_gap"] is not None
    assert result["acked"] > 20 and result["failed"] == 0, text
    print(text)

    admin = Client(list(urls.values()), timeout=2.5, retry_deadline=30.0)
    try:
        for key, value in sorted(quiescence.final_values(admin, workload.keys).items()):
            recorder.line({"final": True, "key": key, "value": value})
        recorder.line({"final_generated": True, "op_ids": quiescence.generated_counts(admin)})
    finally:
        admin.close()
    recorder.line({"quiescence": _same_revision_and_digest(cluster)})
    recorder.close()
    report = check(history, fencing_exercised=False)
    assert report.ok, report.render()
    totals = recorder.outcome_totals()
    assert totals.get("ok", 0) > 50, totals

    # With a replica down, a roll would take a second one away: refused, naming it.
    cluster.kill("r3")
    with pytest.raises(LocalClusterError, match=r"replica\(s\) r3 not running: start them"):
        roll(cluster.lc, timeout=10.0, progress=lines.append)
