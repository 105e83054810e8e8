"""The short chaos setting, in the normal suite: 3 replicas in network namespaces, 10
leader SIGKILLs, 1 random SIGKILL, 1 pause, 1 cut and 1 full restart under 4 clients
for at least 60 s, then every check.
Needs root (network namespaces for the cut): without it the test fails and says so.

Also: a history that breaks the promise (tampered after the run) makes the harness
report FAIL; and a shorter run passes over the failure drills' netns target."""
import json
import os
import shutil
import tempfile

import pytest

from . import report, run
from .cluster import have_root

SHORT = ["--replicas", "3", "--leader-kills", "10", "--faults", "kill-leader,kill-random,pause,cut,full-restart",
         "--fault-count", "1", "--clients", "4", "--keys", "6", "--agents", "2", "--interval", "0.5",
         "--duration", "60", "--seed", "2026"]


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    assert have_root(), ("the chaos test runs each replica in its own network namespace to cut the leader "
                         "off, which needs root: run the suite as root")
    out = tmp_path_factory.mktemp("chaos")
    args = run.parse_args(SHORT + ["--out", str(out), "--report", str(out / "report.md")])
    result = run.run(args)
    run.print_summary(result)
    if not result["passed"]:
        # pytest rotates its temp dirs: keep the evidence where the failure message says
        kept = tempfile.mkdtemp(prefix="shepherd-chaos-failed-")
        shutil.copytree(str(out), kept, dirs_exist_ok=True)
        result["kept"] = kept
    return result, out


def test_short_chaos_run_passes_every_check(short_run):
    result, out = short_run
    failed = [(name, detail) for name, passed, detail in result["checks"] if not passed]
    assert not failed, "failed checks: %s (history and report kept in %s)\n%s" % (
        failed, result.get("kept"), result["checker_report"])
    assert result["passed"]
    assert "ALL CHECKS PASSED" in result["checker_report"]
    text = (out / "report.md").read_text()
    assert text.startswith("# Chaos run: PASS"), text[:200]


def test_short_chaos_run_really_injected_its_faults(short_run):
    result, _ = short_run
    by_kind = {}
    for rec in result["faults"]:
        by_kind.setdefault(rec["kind"], []).append(rec)
    assert {k: len(v) for k, v in by_kind.items()} == {"kill-leader": 10, "kill-random": 1, "pause": 1, "cut": 1,
                                                        "full-restart": 1}
    for rec in by_kind["kill-leader"]:
        assert rec["killed"] and rec["victim"] == rec["leader_before"], rec
        assert rec["term_after"] > rec["term_before"], rec
        assert rec.get("gap") is not None, "no write acknowledged after killing the leader: %s" % rec
    for rec in by_kind["pause"] + by_kind["cut"]:
        assert rec["leader_during"] not in (None, rec["victim"]), "no other leader while %s was out: %s" % (
            rec["victim"], rec)
    assert by_kind["pause"][0]["paused"]
    # The pause caught the leader's controllers with work: resumed and deposed, they wrote
    # with their old epoch, and the FSM refused it (check 6 requires it when exercised).
    assert by_kind["pause"][0]["controller_burst"], by_kind["pause"][0]
    assert by_kind["pause"][0]["fenced"] > 0, "no pause caught a controller write: %s" % by_kind["pause"][0]
    assert result["quiescence"]["fencing_exercised"] is True
    assert result["quiescence"]["fenced_rejections"] > 0, result["quiescence"]
    assert by_kind["cut"][0]["rules_removed"] > 0, "the cut left no iptables rules to heal"
    first_term = min(r["term_before"] for r in result["faults"])
    assert result["final_term"] >= first_term + 12, (first_term, result["final_term"])
    assert len({r["victim"] for r in by_kind["kill-leader"]}) >= 2, "the same replica led after every kill"
    f = result["figures"]
    assert f["operations"] > 500, f
    assert f["outcomes"].get("ok", 0) > f["operations"] // 2, f
    assert f["kill_to_first_controller_write"]["n"] >= 1, f


def _tampered(src, dst, change):
    records = [json.loads(line) for line in open(src)]
    change(records)
    with open(dst, "w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    return str(dst)


def test_a_broken_history_makes_the_harness_report_fail(short_run, tmp_path):
    result, _ = short_run
    history = result["history"]
    records = [json.loads(line) for line in open(history)]
    acked = {r["key"] for r in records if r.get("op") in ("create", "cas") and r.get("outcome") == "ok"}
    key = sorted(acked)[0]

    def lose_the_writes(recs):
        for r in recs:
            if r.get("final") and r["key"] == key:
                r["value"] = "p999-never-written"
    lost = _tampered(history, tmp_path / "lost.jsonl", lose_the_writes)
    checks, text = run.judge(lost, result["quiescence"], result["faults"])
    assert not checks[0][1], "the checker passed a history whose final value of %s was never written" % key
    assert key in text

    ok_generated = next(r["id"] for r in records if r.get("op") == "create_generated" and r["outcome"] == "ok")

    def apply_twice(recs):
        for r in recs:
            if r.get("final_generated"):
                r["op_ids"][str(ok_generated)] = 2
    dup = _tampered(history, tmp_path / "dup.jsonl", apply_twice)
    checks, text = run.judge(dup, result["quiescence"], result["faults"])
    assert not checks[0][1] and str(ok_generated) in text

    split = dict(result["quiescence"], digests=dict(result["quiescence"]["digests"], r1="0" * 64))
    checks, _ = run.judge(history, split, result["faults"])
    assert not all(c[1] for c in checks)

    # A pause fault that paused two leaders in turn, the first never replaced while out.
    faults = [dict(r) for r in result["faults"]]
    pause = next(r for r in faults if r["kind"] == "pause")
    pause.update(victims=[pause["victim"]] * 2, leaders_during=[pause["victim"], pause["leader_during"]])
    replaced = {name: ok for name, ok, _ in run.judge(history, result["quiescence"], faults)[0]}
    assert replaced["paused or cut-off leaders were replaced while out"] is False

    failed = dict(result, checks=checks, passed=all(c[1] for c in checks))
    path = tmp_path / "report.md"
    report.write(failed, str(path))
    assert path.read_text().startswith("# Chaos run: FAIL")
    assert os.path.getsize(path) > 0


def test_the_same_run_goes_over_the_drills_target():
    """`--target netns`: the replicas and workers of the failure drills' target (each host its own
    namespace), its faults the target's (power-off, SIGSTOP, iptables in the host), every check."""
    assert have_root(), "the netns target needs root: run the suite as root"
    out = tempfile.mkdtemp(prefix="shepherd-chaos-target-")
    args = run.parse_args(["--target", "netns", "--leader-kills", "2",
                           "--faults", "kill-leader,pause,cut,full-restart",
                           "--clients", "2", "--keys", "4", "--interval", "0.5", "--seed", "7", "--out", out])
    result = run.run(args)
    run.print_summary(result)
    failed = [(name, detail) for name, passed, detail in result["checks"] if not passed]
    assert not failed, "failed checks: %s (history in %s)\n%s" % (failed, out, result["checker_report"])
    shutil.rmtree(out, ignore_errors=True)
    kinds = sorted(r["kind"] for r in result["faults"])
    assert kinds == ["cut", "full-restart", "kill-leader", "kill-leader", "pause"], kinds
    assert result["target"] == "netns" and result["netns"] and result["replicas"] == 3
    for rec in result["faults"]:
        assert rec["ready"], rec
        if rec["kind"] in ("pause", "cut"):
            assert rec["leader_during"] not in (None, rec["victim"]), rec
        if rec["kind"] == "kill-leader":
            assert rec["killed"] and rec["term_after"] > rec["term_before"], rec
