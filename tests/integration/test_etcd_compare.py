"""The write-gap comparison with etcd (bench/bench_failover_vs_etcd.py), short: 2 leader
SIGKILLs on each system. Asserts behaviour only, never timings (the machine is shared):
both systems elect a new leader, keep acknowledging writes after every kill, take the
killed member back, and lose no acknowledged write.

Needs Debian's etcd (`bash scripts/setup-etcd.sh`); fails, never skips, without it.
"""
import math
import os
import shutil
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench")
KILLS = 2


@pytest.fixture(scope="module")
def result():
    if not shutil.which("etcd"):
        pytest.fail("etcd is not installed (no `etcd` on PATH); this test runs a real 3-member etcd cluster: "
                    "run `bash scripts/setup-etcd.sh` first", pytrace=False)
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    import bench_failover_vs_etcd
    lines = []
    out = bench_failover_vs_etcd.compare(kills=KILLS, progress=lines.append)
    out["log"] = lines
    return out


@pytest.mark.parametrize("system", ["shepherd", "etcd"])
def test_each_kill_hit_a_leader_and_writes_resumed(result, system):
    res = result["systems"][system]
    log = "\n".join(result["log"])
    assert len(res["rows"]) == KILLS, "%s: %d of %d kills done:\n%s" % (system, len(res["rows"]), KILLS, log)
    for row in res["rows"]:
        assert row["gap"] is not None and math.isfinite(row["gap"]) and row["gap"] > 0, \
            "%s kill %d: no write acknowledged after killing %s:\n%s" % (system, row["kill"], row["victim"], log)
        assert row["acks_after_kill"] > 1, "%s kill %d: %d acks after the kill:\n%s" % (
            system, row["kill"], row["acks_after_kill"], log)
        assert row["new_leader"] is not None and row["new_leader"] != row["victim"], \
            "%s kill %d: leader after killing %s is %s:\n%s" % (system, row["kill"], row["victim"],
                                                                 row["new_leader"], log)
        assert row["new_term"] > row["term"], "%s kill %d: term %s -> %s" % (
            system, row["kill"], row["term"], row["new_term"])
        assert row["rejoin_s"] is not None, "%s kill %d: %s did not rejoin:\n%s" % (
            system, row["kill"], row["victim"], log)
    assert res["summary"]["all_recovered"], res["summary"]
    assert res["outcomes"]["ack"] > 0


@pytest.mark.parametrize("system", ["shepherd", "etcd"])
def test_no_acknowledged_write_lost_and_members_agree(result, system):
    res = result["systems"][system]
    assert res["missing"] == 0, "%s: %s acknowledged writes missing at the end" % (system, res["missing"])
    assert res["consistent"] is True, "%s: members differ at the end" % system


def test_side_by_side_figures(result):
    for system in ("shepherd", "etcd"):
        summary = result["systems"][system]["summary"]
        assert summary["median"] is not None and summary["max"] is not None
        assert summary["min"] <= summary["median"] <= summary["max"]
    assert result["ratio"]["median"] is not None and result["ratio"]["median"] > 0
    assert result["ratio"]["max"] is not None and result["ratio"]["max"] > 0
    assert "etcd" in result["machine"] and "nproc" in result["machine"]
    assert "SIGKILL" in result["method"]
