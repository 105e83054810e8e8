"""The chaos checker catches each kind of broken promise and passes valid histories.

Pure: histories are written by hand or by a simulated register, no cluster."""
import heapq
import itertools
import json
import pathlib
import random
import subprocess
import sys
import time

import pytest

from tests.chaos.checker import _INVALID, _LinOp, _minimal_failure, _search, _step, check
from tests.chaos.history import HistoryError, parse, write_records

QUIET = {"quiescence": {"revisions": {"r1": 40, "r2": 40, "r3": 40},
                        "digests": {"r1": "ab12", "r2": "ab12", "r3": "ab12"},
                        "deployments": {"web": {"want": 3, "have": 3}},
                        "pods_on_missing_nodes": 0, "fenced_rejections": 2}}


def op(id, kind, key, value, invoke, complete, outcome="ok", process=None, **extra):
    record = {"id": id, "process": id if process is None else process, "op": kind, "key": key,
              "value": value, "invoke": invoke, "complete": complete, "outcome": outcome}
    record.update(extra)
    return record


def create(id, key, value, invoke, complete, outcome="ok", **kw):
    return op(id, "create", key, value, invoke, complete, outcome, **kw)


def cas(id, key, expected, value, invoke, complete, outcome="ok", **kw):
    return op(id, "cas", key, value, invoke, complete, outcome, expected=expected, **kw)


def delete(id, key, invoke, complete, outcome="ok", deleted=True, **kw):
    extra = {"deleted": deleted} if outcome == "ok" else {}
    return op(id, "delete", key, None, invoke, complete, outcome, **extra, **kw)


def read(id, key, value, invoke, complete, kind="read", **kw):
    return op(id, kind, key, value, invoke, complete, **kw)


def final(key, value):
    return {"final": True, "key": key, "value": value}


def failed_checks(report):
    return {r.name for r in report.results if not r.passed}


def rendered_section(text, check_name):
    """The lines of one check in a rendered report: its status line and its evidence."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[1:2] == [check_name])
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return "\n".join(lines[start:end])


def assert_caught(report, check_name, *op_ids):
    text = report.render()
    print(text)
    assert not report.ok
    assert check_name in failed_checks(report), text
    section = rendered_section(text, check_name)
    for op_id in op_ids:
        assert f"op {op_id} " in section, f"op {op_id} not named by {check_name}:\n{text}"


# --- each broken promise is caught ---------------------------------------------------------

def test_lost_write_is_caught():
    report = check([create(1, "a", "v1", 0.0, 1.0),
                    cas(2, "a", "v1", "v2", 2.0, 3.0),
                    read(3, "a", "v2", 4.0, 5.0),
                    final("a", "v1"), QUIET])
    assert_caught(report, "lost-writes", 2)
    assert "linearizable" in failed_checks(report)


def test_lost_write_to_absent_key_is_caught():
    report = check([create(1, "a", "v1", 0.0, 1.0), create(2, "b", "w1", 0.0, 1.0),
                    delete(3, "b", 2.0, 3.0), final("a", None), final("b", None), QUIET])
    assert_caught(report, "lost-writes", 1)
    assert [f.op_ids() for f in report.result("lost-writes").failures] == [[1, "final"]]


def test_undone_delete_is_caught():
    report = check([create(1, "a", "v1", 0.0, 1.0), delete(2, "a", 2.0, 3.0),
                    final("a", "v1"), QUIET])
    assert_caught(report, "lost-writes", 2, 1)


def test_duplicate_create_is_caught():
    report = check([op(5, "create_generated", None, "5", 0.0, None, "unknown"),
                    op(6, "create_generated", None, "6", 0.0, 1.0),
                    {"final_generated": True, "op_ids": {"5": 2, "6": 1}}, QUIET])
    assert_caught(report, "duplicates", 5)
    assert report.failed_op_ids() == {5}


def test_applied_failed_create_is_caught():
    report = check([op(7, "create_generated", None, "7", 0.0, 1.0, "fail", error="409"),
                    {"final_generated": True, "op_ids": {"7": 1}}, QUIET])
    assert_caught(report, "duplicates", 7)


def test_observed_failed_write_is_caught():
    report = check([create(1, "a", "v1", 0.0, 1.0),
                    cas(2, "a", "v1", "v2", 2.0, 3.0, "fail", error="503 not-applied"),
                    read(3, "a", "v2", 4.0, 5.0),
                    cas(4, "a", "v2", "v3", 6.0, 7.0),
                    final("a", "v3"), QUIET])
    assert_caught(report, "duplicates", 2, 3)


def test_stale_read_is_caught():
    report = check([create(1, "a", "v1", 0.0, 1.0),
                    cas(2, "a", "v1", "v2", 2.0, 3.0),
                    read(3, "a", "v1", 4.0, 5.0),
                    final("a", "v2"), QUIET])
    assert_caught(report, "stale-reads", 3, 1, 2)
    evidence = report.result("stale-reads").failures
    assert [e.op_ids() for e in evidence] == [[1, 2, 3]]


def test_stale_absent_read_is_caught():
    report = check([create(1, "a", "v1", 0.0, 1.0), delete(2, "a", 2.0, 3.0),
                    create(3, "a", "v2", 4.0, 5.0), read(4, "a", None, 6.0, 7.0),
                    final("a", "v2"), QUIET])
    assert_caught(report, "stale-reads", 4, 3)


def test_local_read_of_unwritten_value_is_caught():
    report = check([create(1, "a", "v1", 0.0, 1.0),
                    read(2, "a", "v0", 2.0, 3.0, kind="read_local"),
                    final("a", "v1"), QUIET])
    assert_caught(report, "stale-reads", 2)
    assert "linearizable" not in failed_checks(report)


def test_non_linearizable_pair_is_caught_with_a_small_window():
    # The cas v1 -> v2 runs long; one read sees v2, a later read sees v1 again. No single
    # check but linearizability sees it: op 2 had not been acknowledged before op 4 began.
    records = [create(1, "a", "v1", 0.0, 1.0)]
    t, next_id = 1.0, 10
    for _ in range(30):                     # unrelated history first: the window must leave it out
        records.append(read(next_id, "a", "v1", t + 0.1, t + 0.2))
        t, next_id = t + 0.3, next_id + 1
    records += [cas(2, "a", "v1", "v2", t + 1.0, t + 10.0),
                read(3, "a", "v2", t + 2.0, t + 3.0),
                read(4, "a", "v1", t + 4.0, t + 5.0),
                final("a", "v2"), QUIET]
    report = check(records)
    assert_caught(report, "linearizable", 3, 4)
    assert failed_checks(report) == {"linearizable"}
    [evidence] = report.result("linearizable").failures
    assert set(evidence.op_ids()) <= {2, 3, 4, 10 + 29}, evidence.op_ids()
    assert {3, 4} <= set(evidence.op_ids())


def test_two_reads_in_opposite_orders_are_caught():
    # Two concurrent CASes from x: a then b would need b's CAS to find x after a replaced it.
    report = check([create(1, "k", "x", 0.0, 1.0),
                    cas(2, "k", "x", "a", 2.0, 20.0), cas(3, "k", "x", "b", 2.0, None, "unknown"),
                    read(4, "k", "a", 3.0, 4.0), read(5, "k", "b", 5.0, 6.0),
                    final("k", "b"), QUIET])
    assert_caught(report, "linearizable", 4, 5)
    assert failed_checks(report) == {"linearizable"}


def test_digest_mismatch_is_caught():
    quiet = json.loads(json.dumps(QUIET))
    quiet["quiescence"]["digests"]["r3"] = "ffff"
    report = check([create(1, "a", "v1", 0.0, 1.0), final("a", "v1"), quiet])
    print(report.render())
    assert failed_checks(report) == {"quiescence"}
    assert "r3: ffff" in report.render()


def test_deployment_and_pod_facts_are_checked():
    quiet = json.loads(json.dumps(QUIET))
    quiet["quiescence"]["deployments"]["web"]["have"] = 2
    quiet["quiescence"]["pods_on_missing_nodes"] = 1
    report = check([quiet])
    assert failed_checks(report) == {"quiescence"}
    assert len(report.result("quiescence").failures) == 2


def test_unexercised_fencing_is_caught():
    quiet = json.loads(json.dumps(QUIET))
    quiet["quiescence"]["fenced_rejections"] = 0
    assert check([quiet]).ok
    report = check([quiet], fencing_exercised=True)
    assert failed_checks(report) == {"fencing"}


def test_missing_final_lines_fail_loudly():
    report = check([create(1, "a", "v1", 0.0, 1.0),
                    op(2, "create_generated", None, "2", 0.0, 1.0)])
    assert not report.ok
    text = report.render()
    assert "no final read" in text and "no final_generated line" in text and "no quiescence line" in text


def test_bad_lines_are_rejected_with_their_line_number():
    with pytest.raises(HistoryError, match="line 2: .*value 'v1' already written"):
        parse([create(1, "a", "v1", 0.0, 1.0), create(2, "b", "v1", 0.0, 1.0)])
    with pytest.raises(HistoryError, match="line 1: complete must be null exactly when"):
        parse([create(1, "a", "v1", 0.0, None)])
    with pytest.raises(HistoryError, match="line 1: cas needs 'expected'"):
        parse([op(1, "cas", "a", "v1", 0.0, 1.0)])


# --- valid histories pass ------------------------------------------------------------------

def test_concurrent_valid_history_passes():
    report = check([create(1, "a", "v1", 0.0, 3.0), read(2, "a", None, 0.5, 1.0),
                    read(3, "a", "v1", 1.0, 2.0), cas(4, "a", "v1", "v2", 1.5, 4.0),
                    read(5, "a", "v1", 3.5, 4.5), read(6, "a", "v2", 4.0, 5.0),
                    delete(7, "a", 5.0, 6.0), delete(8, "a", 5.5, 6.5, deleted=False),
                    create(9, "a", "v3", 7.0, 8.0, "fail", error="409"),
                    read(10, "a", "v1", 9.0, 9.5, kind="read_local"),
                    final("a", None), QUIET])
    print(report.render())
    assert report.ok, report.render()


def test_unknown_write_applied_late_passes():
    # op 2 timed out; its effect shows up long after, and also at the end.
    report = check([create(1, "a", "v1", 0.0, 1.0), cas(2, "a", "v1", "v2", 2.0, None, "unknown"),
                    read(3, "a", "v1", 5.0, 6.0), read(4, "a", "v2", 7.0, 8.0),
                    final("a", "v2"), QUIET])
    assert report.ok, report.render()


def test_unknown_write_not_applied_passes():
    report = check([create(1, "a", "v1", 0.0, 1.0), cas(2, "a", "v1", "v2", 2.0, None, "unknown"),
                    delete(3, "a", 2.5, None, "unknown"),
                    read(4, "a", "v1", 5.0, 6.0), cas(5, "a", "v1", "v3", 7.0, 8.0),
                    op(6, "create_generated", None, "6", 0.0, None, "unknown"),
                    op(7, "create_generated", None, "7", 0.0, None, "unknown"),
                    {"final_generated": True, "op_ids": {"6": 1}},
                    final("a", "v3"), QUIET])
    assert report.ok, report.render()


def test_unknown_write_cannot_undo_an_acknowledged_one():
    # Not applied before op 3 read v2, so it can only land later; v1 at the end is still lost.
    report = check([create(1, "a", "v1", 0.0, 1.0), cas(2, "a", "v1", "v2", 2.0, 3.0),
                    read(3, "a", "v2", 4.0, 5.0), create(4, "a", "v4", 0.5, None, "unknown"),
                    final("a", "v1"), QUIET])
    assert "linearizable" in failed_checks(report)


def test_search_bound_is_inconclusive_not_a_pass():
    # Any subset of 15 unknown creates (with unknown deletes between) may have happened before
    # the read at [1, 2], which none explains; later reads make every created value matter.
    ops = [_LinOp(None, "create", f"v{i}", None, None, 0.0, float("inf"), True) for i in range(15)]
    ops += [_LinOp(None, "delete", None, None, None, 0.0, float("inf"), True) for i in range(15)]
    ops.append(_LinOp(None, "read", "nope", None, None, 1.0, 2.0, False))
    ops += [_LinOp(None, "read", f"v{i}", None, None, 3.0 + i, 3.5 + i, False) for i in range(15)]
    verdict, steps = _search(ops, max_steps=1000)
    assert verdict is None and steps > 1000


def brute_force_linearizable(ops, initial=None):
    """Every subset of the optional ops, every order that respects real time: is one valid?"""
    optional = [i for i, o in enumerate(ops) if o.optional]
    for mask in range(1 << len(optional)):
        chosen = [i for i, o in enumerate(ops) if not o.optional] + \
                 [i for b, i in enumerate(optional) if mask >> b & 1]
        for order in itertools.permutations(chosen):
            if any(ops[b].end < ops[a].invoke for x, a in enumerate(order) for b in order[x + 1:]):
                continue
            state = initial
            for i in order:
                state = _step(state, ops[i], frozenset([None]))
                if state is _INVALID:
                    break
            else:
                return True
    return False


def random_small_history(rng):
    ops, values = [], []
    for i in range(rng.randint(2, 6)):
        kind = rng.choice(["create", "cas", "delete", "read", "read"])
        invoke = rng.uniform(0, 10)
        optional = kind != "read" and rng.random() < 0.3
        end = float("inf") if optional else invoke + rng.uniform(0, 4)
        value = expected = deleted = None
        if kind in ("create", "cas"):
            value = f"v{i}"
            expected = rng.choice(values + ["v9"]) if kind == "cas" else None
            values.append(value)
        elif kind == "read":
            value = rng.choice(values + [None])
        elif not optional:
            deleted = rng.random() < 0.5
        ops.append(_LinOp(None, kind, value, expected, deleted, invoke, end, optional))
    return ops


def test_search_agrees_with_brute_force_on_small_histories():
    rng = random.Random(7)
    verdicts = {True: 0, False: 0}
    for _ in range(1500):
        ops = random_small_history(rng)
        expected = brute_force_linearizable(ops)
        assert _search(ops)[0] is expected, [(o.kind, o.value, o.expected, o.deleted, o.invoke, o.end) for o in ops]
        verdicts[expected] += 1
        if not expected and any(not o.optional for o in ops):
            # The evidence window fails from every state the register may hold where it starts.
            window, culprit, first, before = _minimal_failure(ops, 10_000)
            assert culprit in window
            for state in (before or [None]):
                assert not brute_force_linearizable(window, state)
    assert min(verdicts.values()) > 200, verdicts   # both verdicts well represented


def test_cli_exit_codes(tmp_path):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    write_records(good, [create(1, "a", "v1", 0.0, 1.0), final("a", "v1"), QUIET])
    write_records(bad, [create(1, "a", "v1", 0.0, 1.0), final("a", None), QUIET])
    repo = pathlib.Path(__file__).resolve().parents[2]
    run = lambda path: subprocess.run([sys.executable, "-m", "tests.chaos.checker", str(path)],
                                      capture_output=True, text=True, timeout=60, cwd=repo)
    assert run(good).returncode == 0
    failed = run(bad)
    assert failed.returncode == 1 and "op 1 " in failed.stdout, failed.stdout + failed.stderr
    missing = run(tmp_path / "missing.jsonl")
    assert missing.returncode == 2 and "missing.jsonl" in missing.stderr


# --- a generated history from a simulated register -----------------------------------------

def simulate(seed, n_ops=2000, n_keys=10, processes=10, p_unknown=0.01, p_unavailable=0.02):
    """A history of `processes` clients on a correct register per key: every op takes effect
    at one instant between its invoke and completion, in order; an unknown op takes effect
    (or not) at some later time while its client has moved on."""
    rng = random.Random(seed)
    keys = [f"k{i:02d}" for i in range(n_keys)]
    state = {k: None for k in keys}
    held = {k: [None] for k in keys}                 # every value each key held, for stale local reads
    written = {k: [] for k in keys}
    known = [{} for _ in range(processes)]           # what each client last saw per key
    generated = {}
    events, seq, records = [], 0, []
    ids = itertools.count(1)

    def schedule(at, kind, payload):
        nonlocal seq
        heapq.heappush(events, (at, 0 if kind == "apply" else 1, seq, kind, payload))
        seq += 1

    def start(p, t):
        if len(records) + sum(1 for e in events if e[3] == "done") >= n_ops:
            return
        op_id = next(ids)
        kind = rng.choices(["create", "cas", "delete", "read", "read_local", "create_generated"],
                           [15, 35, 8, 30, 7, 5])[0]
        key = rng.choice(keys)
        rec = {"id": op_id, "process": p, "op": kind, "key": key, "value": None, "invoke": t}
        if kind == "cas":
            expected = known[p].get(key) or (rng.choice(written[key]) if written[key] else None)
            if expected is None:
                kind = rec["op"] = "create"
            else:
                rec["expected"] = expected
        if kind in ("create", "cas"):
            rec["value"] = f"p{p}-{op_id}"
            written[key].append(rec["value"])
        if kind == "create_generated":
            rec["key"], rec["value"] = None, str(op_id)
        duration = rng.expovariate(1 / 0.02)
        roll = rng.random()
        if roll < p_unknown:
            rec["outcome"] = "unknown"
            if rng.random() < 0.5:
                schedule(t + rng.uniform(0, 0.5), "apply", rec)
            schedule(t + 0.2, "done", rec)
        elif roll < p_unknown + p_unavailable:
            rec["outcome"], rec["error"] = "fail", "503 not-applied"
            schedule(t + duration, "done", rec)
        else:
            schedule(t + rng.uniform(0, duration), "apply", rec)
            schedule(t + duration, "done", rec)

    def apply(rec):
        kind, key, current = rec["op"], rec["key"], state.get(rec["key"])
        outcome = "ok"
        if kind == "create":
            outcome = "ok" if current is None else "fail"
        elif kind == "cas":
            outcome = "ok" if current == rec["expected"] else "fail"
        elif kind == "delete":
            rec["deleted"] = current is not None
        elif kind == "read":
            rec["value"] = current
        elif kind == "read_local":
            rec["value"] = rng.choice(held[key][-3:])
        elif kind == "create_generated":
            generated[rec["id"]] = 1
        if outcome == "ok" and kind in ("create", "cas"):
            state[key] = rec["value"]
            held[key].append(rec["value"])
        if kind == "delete" and current is not None:
            state[key] = None
            held[key].append(None)
        if rec.get("outcome") != "unknown":
            rec["outcome"] = outcome
            if outcome == "fail":
                rec["error"] = "409 conflict"

    for p in range(processes):
        start(p, rng.uniform(0, 0.01))
    while events:
        at, _, _, kind, rec = heapq.heappop(events)
        if kind == "apply":
            apply(rec)
            continue
        rec["complete"] = None if rec["outcome"] == "unknown" else at
        if rec["outcome"] != "ok":
            rec.pop("deleted", None)
            if rec["op"] in ("read", "read_local"):
                rec["value"] = None
        elif rec["op"] in ("read", "create", "cas"):
            known[rec["process"]][rec["key"]] = rec["value"]
        records.append(dict(rec))
        start(rec["process"], at + rng.uniform(0, 0.005))
    records += [final(k, state[k]) for k in keys]
    records.append({"final_generated": True, "op_ids": {str(k): v for k, v in generated.items()}})
    records.append(QUIET)
    return records


def test_generated_valid_history_passes():
    records = simulate(seed=5)
    ops = [r for r in records if "op" in r]
    assert len(ops) >= 2000
    started = time.monotonic()
    report = check(records)
    elapsed = time.monotonic() - started
    print(report.render())
    print(f"checked {len(ops)} ops on 10 keys in {elapsed:.2f} s")
    assert report.ok


def test_generated_hot_key_history_passes():
    """~500 ops on one key, 10 clients, a few unknowns: the size the brief asks to be quick."""
    records = simulate(seed=11, n_ops=1200, n_keys=1, p_unknown=0.02)
    started = time.monotonic()
    report = check(records)
    elapsed = time.monotonic() - started
    print(report.render())
    print(f"checked one hot key in {elapsed:.2f} s")
    assert report.ok


def break_history(records, how, rng):
    """Change a valid generated history in one way a broken cluster would; returns the op
    id the checker must name and the check that must fail."""
    ops = [r for r in records if "op" in r]
    finals = {r["key"]: r for r in records if r.get("final")}
    generated = next(r for r in records if r.get("final_generated"))["op_ids"]
    if how == "lost write":
        # The last acknowledged write of a key vanishes: the key ends with an older value.
        for key, line in finals.items():
            writes = [r for r in ops if r["key"] == key and r["op"] in ("create", "cas") and r["outcome"] == "ok"]
            if len(writes) >= 2 and line["value"] == writes[-1]["value"]:
                older = [w for w in writes if w["complete"] < writes[-1]["invoke"]]
                if older:
                    line["value"] = older[-1]["value"]
                    return writes[-1]["id"], "lost-writes"
    if how == "duplicate":
        target = rng.choice([r for r in ops if r["op"] == "create_generated" and r["outcome"] == "ok"])
        generated[str(target["id"])] = 2
        return target["id"], "duplicates"
    if how == "failed op applied":
        target = rng.choice([r for r in ops if r["op"] == "create_generated" and r["outcome"] == "fail"])
        generated[str(target["id"])] = 1
        return target["id"], "duplicates"
    if how == "phantom read":
        target = rng.choice([r for r in ops if r["op"] == "read" and r["outcome"] == "ok"])
        target["value"] = "never-written"
        return target["id"], "duplicates"
    raise AssertionError(f"could not break the history by {how}")


@pytest.mark.parametrize("how", ["lost write", "duplicate", "failed op applied", "phantom read"])
def test_generated_history_broken_is_caught(how):
    records = simulate(seed=21, n_ops=1000, n_keys=4)
    assert check(records).ok
    op_id, check_name = break_history(records, how, random.Random(3))
    report = check(records)
    assert_caught(report, check_name, op_id)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_history_with_a_stale_read_fails(seed):
    """Turn one read of the generated history into a read of an older value: caught."""
    records = simulate(seed=seed, n_ops=600, n_keys=3)
    by_value = {r["value"]: r for r in records if r.get("op") in ("create", "cas")}
    for r in records:
        if r.get("op") == "read" and r["outcome"] == "ok" and r["value"] in by_value:
            writer = by_value[r["value"]]
            if writer["complete"] is None or writer["complete"] >= r["invoke"]:
                continue
            older = [w for w in by_value.values() if w["key"] == r["key"] and w["outcome"] == "ok"
                     and w["complete"] is not None and w["complete"] < writer["invoke"] - 0.05
                     and w["value"] != writer.get("expected")]
            if older:
                r["value"] = older[-1]["value"]
                target = r["id"]
                break
    else:
        pytest.fail("no read to make stale")
    report = check(records)
    print(report.render())
    assert {"stale-reads", "linearizable"} <= failed_checks(report)
    assert target in report.failed_op_ids()
