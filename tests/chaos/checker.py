"""The chaos checker: reads a run's history (format in tests/chaos/history.py) and says
whether Shepherd HA kept Raft's promise. Pure Python, no cluster.

  1. lost-writes      every acknowledged create/cas is there at the end (or a write that
                      may follow it is); every acknowledged delete stays deleted unless a
                      write that may follow it re-created the key
  2. duplicates       no create is applied twice, no failed op is applied, no read sees a
                      value that a failed op wrote or that nobody wrote
  3. linearizable     per key, the ok and unknown ops plus the final read are linearizable
                      as a register with create/cas/delete/read (WGL search, memoised)
  4. stale-reads      a read never returns a value older than one acknowledged before the
                      read began; read_local returns only values that were written, or null
  5. quiescence       every replica reports the same revision and store digest, every
                      deployment has what it wants, no pod is on a missing node
  6. fencing          the FSM rejected fenced writes when the harness says it fenced

A failed check prints the smallest piece of history that shows it.

    from tests.chaos.checker import check
    report = check(records)          # dicts as read from the JSONL file, a History, or a path
    print(report.render()); assert report.ok

    python3 -m tests.chaos.checker history.jsonl [--fencing-exercised]   # exit 1 on failure
"""
from __future__ import annotations

import argparse
import bisect
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from tests.chaos.history import History, HistoryError, Op, load, parse

DEFAULT_MAX_STEPS = 10_000_000  # per key (about 10 s);; a search that needs more is reported inconclusive
MAX_SHOWN = 5                   # failures rendered per check
MAX_WINDOW_LINES = 40           # ops rendered per piece of evidence


# ---------------------------------------------------------------------------------------
# Results

class FinalRead:
    """The read of a key after quiescence, shown and searched like an operation."""

    def __init__(self, key: str, value: str | None, invoke: float):
        self.id = "final"
        self.key, self.value = key, value
        self.invoke, self.complete = invoke, invoke + 1.0

    def describe(self, t0: float = 0.0) -> str:
        return f"final       read({self.key}) -> {self.value}  (after quiescence)"


@dataclass
class Evidence:
    """One failure: what is wrong and the few operations that show it."""
    message: str
    ops: list = field(default_factory=list)          # Op or FinalRead, in time order
    notes: list[str] = field(default_factory=list)   # context lines (not part of the proof)
    marked: set = field(default_factory=set)         # ids to point at with '>'

    def op_ids(self) -> list:
        return [op.id for op in self.ops]

    def render(self, t0: float) -> str:
        lines = [f"  - {self.message}"]
        shown = self.ops[-MAX_WINDOW_LINES:]       # the end is where it breaks
        if len(self.ops) > len(shown):
            lines.append(f"      ... {len(self.ops) - len(shown)} earlier ops not shown")
        for op in shown:
            pointer = ">" if op.id in self.marked else " "
            lines.append(f"    {pointer} {op.describe(t0)}")
        lines.extend(f"      {note}" for note in self.notes)
        return "\n".join(lines)


@dataclass
class CheckResult:
    name: str
    passed: bool
    counts: dict[str, Any] = field(default_factory=dict)
    failures: list[Evidence] = field(default_factory=list)
    inconclusive: list[str] = field(default_factory=list)   # a bound was hit: not a pass
    seconds: float = 0.0

    def render(self, t0: float) -> str:
        status = "PASS" if self.passed else ("INCONCLUSIVE" if self.inconclusive and not self.failures
                                             else "FAIL")
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        lines = [f"{status:<5} {self.name:<13} {counts}  ({self.seconds:.2f} s)"]
        for text in self.inconclusive:
            lines.append(f"  - INCONCLUSIVE: {text}")
        for evidence in self.failures[:MAX_SHOWN]:
            lines.append(evidence.render(t0))
        if len(self.failures) > MAX_SHOWN:
            lines.append(f"  ... and {len(self.failures) - MAX_SHOWN} more failures of this check")
        return "\n".join(lines)


@dataclass
class Report:
    history: History
    results: list[CheckResult]

    @property
    def ok(self) -> bool:
        return all(result.passed for result in self.results)

    def result(self, name: str) -> CheckResult:
        return next(result for result in self.results if result.name == name)

    def failed_op_ids(self) -> set:
        return {op_id for result in self.results for ev in result.failures for op_id in ev.op_ids()}

    def render(self) -> str:
        ops = self.history.ops
        by_outcome = {o: sum(1 for op in ops if op.outcome == o) for o in ("ok", "fail", "unknown")}
        head = (f"chaos history: {len(ops)} ops ({by_outcome['ok']} ok, {by_outcome['fail']} fail, "
                f"{by_outcome['unknown']} unknown) on {len(self.history.keys())} keys; "
                f"times below are seconds from the first invoke")
        t0 = self.history.start_time()
        verdict = "ALL CHECKS PASSED" if self.ok else "CHECKS FAILED: " + ", ".join(
            r.name for r in self.results if not r.passed)
        return "\n".join([head] + [r.render(t0) for r in self.results] + [verdict])


def _ops_by_key(history: History) -> dict[str, list[Op]]:
    by_key: dict[str, list[Op]] = {}
    for op in history.ops:
        if op.key is not None and op.op != "create_generated":
            by_key.setdefault(op.key, []).append(op)
    return by_key


def _may_follow(later: Op, earlier: Op) -> bool:
    """True unless `later` finished before `earlier` began (then it cannot come after it)."""
    return later.end >= earlier.invoke


# ---------------------------------------------------------------------------------------
# 1. Lost writes

def check_lost_writes(history: History) -> CheckResult:
    result = CheckResult("lost-writes", True)
    writers = history.writers()
    writes = deletes = 0
    for key, ops in sorted(_ops_by_key(history).items()):
        acked = [op for op in ops if op.ok and op.op in ("create", "cas", "delete")]
        if not acked:
            continue
        if key not in history.finals:
            result.failures.append(Evidence(
                f"key {key} has {len(acked)} acknowledged writes but no final read; the harness "
                f"must write a {{\"final\": true, \"key\": \"{key}\", ...}} line for every key",
                ops=acked[-1:]))
            continue
        final_value = history.finals[key]
        final = FinalRead(key, final_value, max(op.invoke for op in ops))
        final_writer = writers.get(final_value) if final_value is not None else None
        if final_value is not None and (final_writer is None or final_writer.outcome == "fail"
                                        or final_writer.key != key):
            how = ("was never written" if final_writer is None or final_writer.key != key
                   else f"was written by failed op {final_writer.id}")
            result.failures.append(Evidence(
                f"key {key}: the final value {final_value!r} {how}, so the acknowledged writes "
                f"on {key} are lost; the last one:", ops=[acked[-1], final], marked={acked[-1].id}))
            continue
        deleters = [op for op in ops if op.op == "delete" and (op.unknown or (op.ok and op.deleted))]
        for op in acked:
            if op.op == "delete":
                deletes += 1
                if final_value is None or _may_follow(final_writer, op):
                    continue
                result.failures.append(Evidence(
                    f"acknowledged delete op {op.id} of {key} is undone: the final value was "
                    f"written by op {final_writer.id}, which finished before the delete began",
                    ops=[final_writer, op, final], marked={op.id}))
                continue
            writes += 1
            if final_value == op.value:
                continue
            if final_value is not None and _may_follow(final_writer, op):
                continue
            if final_value is None and any(_may_follow(d, op) for d in deleters):
                continue
            if final_value is None:
                why = "the key is absent at the end and no delete can come after it"
                evidence_ops = [op, final]
            else:
                why = (f"the final value was written by op {final_writer.id}, "
                       f"which finished before op {op.id} began")
                evidence_ops = [final_writer, op, final]
            result.failures.append(Evidence(f"acknowledged {op.op} op {op.id} of {key} is lost: {why}",
                                            ops=evidence_ops, marked={op.id}))
    generated = 0
    created = [op for op in history.ops if op.op == "create_generated" and op.ok]
    if created and history.final_generated is None:
        result.failures.append(Evidence(
            f"{len(created)} acknowledged create_generated ops but no final_generated line; the harness "
            f"must count the objects per chaos-op label at the end", ops=created[:1]))
    elif created:
        for op in created:
            generated += 1
            if history.final_generated.get(op.id, 0) == 0:
                result.failures.append(Evidence(
                    f"acknowledged create_generated op {op.id} left no object labelled chaos-op={op.id}",
                    ops=[op], marked={op.id}))
    result.counts = {"acked writes": writes, "acked deletes": deletes, "acked generated": generated}
    result.passed = not result.failures
    return result


# ---------------------------------------------------------------------------------------
# 2. Duplicates and phantoms

def check_duplicates(history: History) -> CheckResult:
    result = CheckResult("duplicates", True)
    by_id = {op.id: op for op in history.ops}
    generated = [op for op in history.ops if op.op == "create_generated"]
    counts = history.final_generated or {}
    for op in generated:
        n = counts.get(op.id, 0)
        if n > 1:
            result.failures.append(Evidence(f"create_generated op {op.id} was applied {n} times "
                                            f"({n} objects labelled chaos-op={op.id})", ops=[op], marked={op.id}))
        elif n >= 1 and op.outcome == "fail":
            result.failures.append(Evidence(f"create_generated op {op.id} failed but was applied "
                                            f"({n} object labelled chaos-op={op.id})", ops=[op], marked={op.id}))
    for op_id, n in sorted(counts.items()):
        if n > 0 and (op_id not in by_id or by_id[op_id].op != "create_generated"):
            result.failures.append(Evidence(f"{n} object(s) labelled chaos-op={op_id}, but the history has "
                                            f"no create_generated op {op_id}"))
    writers = history.writers()
    reads = [op for op in history.ops if op.op in ("read", "read_local") and op.ok and op.value is not None]
    finals = [FinalRead(key, value, 0.0) for key, value in sorted(history.finals.items()) if value is not None]
    for read in reads + finals:
        writer = writers.get(read.value)
        if writer is not None and writer.outcome == "fail":
            result.failures.append(Evidence(f"op {writer.id} failed (known not applied) but "
                                            f"{'the final read' if read.id == 'final' else f'op {read.id}'} "
                                            f"returned its value {read.value!r}",
                                            ops=[writer, read], marked={writer.id, read.id}))
        elif (writer is None or writer.key != read.key) and (read.id == "final" or read.op == "read"):
            # (read_local values are the stale-reads check's)
            result.failures.append(Evidence(f"{'the final read' if read.id == 'final' else f'op {read.id}'} "
                                            f"returned {read.value!r}, a value no op wrote to {read.key}",
                                            ops=[read], marked={read.id}))
    result.counts = {"generated ops": len(generated), "values observed": len(reads) + len(finals)}
    result.passed = not result.failures
    return result


# ---------------------------------------------------------------------------------------
# 3. Linearizability (Wing & Gong's search with Lowe's memoisation of (linearized set, state))

_INVALID = object()
_UNSEEN = "<a value nobody read>"   # not a str any op writes: values are op-made, this has spaces


class _Any:
    """Initial state of a window cut out of a longer history: one of a set of values."""

    def __repr__(self) -> str:
        return "<any earlier value>"


_ANY = _Any()


class _LinOp:
    __slots__ = ("source", "kind", "value", "expected", "deleted", "invoke", "end", "optional")

    def __init__(self, source, kind, value, expected, deleted, invoke, end, optional):
        self.source = source            # the Op (or FinalRead) shown in evidence
        self.kind, self.value, self.expected, self.deleted = kind, value, expected, deleted
        self.invoke, self.end = invoke, end
        self.optional = optional        # unknown (or pending in a prefix): may also not happen

    def pending(self) -> "_LinOp":
        return _LinOp(self.source, self.kind, self.value, self.expected, self.deleted,
                      self.invoke, math.inf, True)

    def writing(self, value) -> "_LinOp":
        return _LinOp(self.source, self.kind, value, self.expected, self.deleted,
                      self.invoke, self.end, self.optional)


def _interchangeable(ops: list[_LinOp]) -> tuple[list[_LinOp], list[int]]:
    """Optional ops with the same effect are interchangeable: a linearization that applies a
    later-invoked one while an earlier-invoked twin is still unapplied can swap the two, so
    the search only applies twins in invoke order. An optional write whose value no op
    reads or expects has the same effect as any other such write with the same expected
    value: it writes a value nobody sees. Returns the ops (unseen values merged) and, per
    op, the index of its previous twin or -1."""
    observed = {op.value for op in ops if op.kind == "read"} | {op.expected for op in ops if op.kind == "cas"}
    ops = [op.writing(_UNSEEN) if op.optional and op.kind in ("create", "cas") and op.value not in observed
           else op for op in ops]
    previous_twin = [-1] * len(ops)
    last_of_class: dict[tuple, int] = {}
    for i in sorted(range(len(ops)), key=lambda i: (ops[i].invoke, i)):
        op = ops[i]
        if not op.optional:
            continue
        twin_class = (op.kind, op.expected, op.value, op.deleted)
        previous_twin[i] = last_of_class.get(twin_class, -1)
        last_of_class[twin_class] = i
    return ops, previous_twin


def _step(state, op: _LinOp, candidates: frozenset):
    """The register's next state after `op`, or _INVALID if `op` cannot happen in `state`."""
    kind = op.kind
    if state is _ANY:
        if kind == "read":
            return op.value if op.value in candidates else _INVALID
        if kind == "create":
            return op.value if None in candidates else _INVALID
        if kind == "cas":
            return op.value if op.expected in candidates else _INVALID
        if op.deleted is True:
            return None if any(c is not None for c in candidates) else _INVALID
        if op.deleted is False:
            return None if None in candidates else _INVALID
        return None
    if kind == "read":
        return state if state == op.value else _INVALID
    if kind == "create":
        return op.value if state is None else _INVALID
    if kind == "cas":
        return op.value if state is not None and state == op.expected else _INVALID
    if op.deleted is True:
        return None if state is not None else _INVALID
    if op.deleted is False:
        return None if state is None else _INVALID
    return None                         # unknown delete: empties the register either way


def _search(ops: list[_LinOp], initial=None, candidates: frozenset = frozenset([None]),
            max_steps: int = DEFAULT_MAX_STEPS) -> tuple[bool | None, int]:
    """Is there an order of `ops`, each placed between its invoke and end, in which every
    non-optional op is valid for the register? Returns (True | False | None=bound hit, steps).

    Lowe's iterative version of the Wing-Gong search: a doubly linked list of call and
    return entries in time order; linearize the first call whose step is valid and whose
    (linearized set, state) is new, restart from the head; at a return entry of an op not
    yet linearized, undo the last choice. Optional ops return at +inf, so reaching one of
    their return entries means every required op is linearized."""
    ops, previous_twin = _interchangeable(ops)
    n = len(ops)
    events = sorted([(op.invoke, 0, i) for i, op in enumerate(ops)] +
                    [(op.end, 1, i) for i, op in enumerate(ops)])
    head, tail = 0, 2 * n + 1
    nxt = list(range(1, 2 * n + 2)) + [tail]
    prv = [head] + list(range(0, 2 * n + 1))
    entry_op = [-1] * (2 * n + 2)
    entry_is_call = [False] * (2 * n + 2)
    return_of = [0] * (2 * n + 2)
    call_entry = [0] * n
    for pos, (_, is_return, i) in enumerate(events, start=1):
        entry_op[pos] = i
        entry_is_call[pos] = not is_return
        if is_return:
            return_of[call_entry[i]] = pos
        else:
            call_entry[i] = pos

    def lift(entry):
        for e in (entry, return_of[entry]):
            nxt[prv[e]] = nxt[e]
            prv[nxt[e]] = prv[e]

    def unlift(entry):
        for e in (return_of[entry], entry):
            nxt[prv[e]] = e
            prv[nxt[e]] = e

    linearized, state = 0, initial
    stack: list[tuple[int, Any, int]] = []
    seen: set = set()
    steps = 0
    entry = nxt[head]
    while entry != tail:
        steps += 1
        if steps > max_steps:
            return None, steps
        i = entry_op[entry]
        op = ops[i]
        if entry_is_call[entry]:
            new = _step(state, op, candidates)
            # An optional op that changes nothing is the same as leaving it out; twins go in order.
            if new is not _INVALID and not (op.optional and (
                    new == state or (previous_twin[i] >= 0 and not linearized >> previous_twin[i] & 1))):
                new_linearized = linearized | (1 << i)
                memo = (new_linearized, new)
                if memo not in seen:
                    seen.add(memo)
                    stack.append((entry, state, linearized))
                    linearized, state = new_linearized, new
                    lift(entry)
                    entry = nxt[head]
                    continue
            entry = nxt[entry]
        else:
            if op.optional:
                return True, steps
            if not stack:
                return False, steps
            entry, state, linearized = stack.pop()
            unlift(entry)
            entry = nxt[entry]
    return True, steps


def _key_ops(ops: list[Op], final: FinalRead | None) -> list[_LinOp]:
    """The ops the register search sees: ok and unknown create/cas/delete/read (failed ops
    did not happen; an unknown read says nothing), plus the final read."""
    lin = []
    for op in ops:
        if op.op not in ("create", "cas", "delete", "read") or op.outcome == "fail":
            continue
        if op.unknown and op.op == "read":
            continue
        lin.append(_LinOp(op, op.op, op.value, op.expected, op.deleted, op.invoke, op.end, op.unknown))
    if final is not None:
        lin.append(_LinOp(final, "read", final.value, None, None, final.invoke, final.complete, False))
    return lin


def _event_order(lin: list[_LinOp]) -> tuple[list[int], list[float]]:
    """Position of each op's call and return in the time-ordered events (calls first on ties)."""
    events = sorted([(op.invoke, 0, i) for i, op in enumerate(lin)] +
                    [(op.end, 1, i) for i, op in enumerate(lin)])
    call_pos, ret_pos = [0] * len(lin), [math.inf] * len(lin)
    for pos, (_, is_return, i) in enumerate(events):
        if is_return:
            ret_pos[i] = pos if not lin[i].optional else math.inf
        else:
            call_pos[i] = pos
    return call_pos, ret_pos


def _prefix(lin, call_pos, last) -> list[int]:
    """Indices of the ops whose call is at or before event `last`."""
    return [i for i in range(len(lin)) if call_pos[i] <= last]


def _as_prefix(lin, ret_pos, indices, last) -> list[_LinOp]:
    """The ops of a prefix ending at event `last`: ops still running become optional, and
    a read still running says nothing."""
    out = []
    for i in indices:
        if ret_pos[i] <= last:
            out.append(lin[i])
        elif lin[i].kind != "read":
            out.append(lin[i].pending())
    return out


def _minimal_failure(lin: list[_LinOp], max_steps: int):
    """The shortest failing prefix, then a late cut of it that still fails.
    Returns (window ops, the op whose completion cannot be linearized, the first op after
    the cut and the values the register may hold there; both None without a cut)."""
    call_pos, ret_pos = _event_order(lin)
    returns = sorted((ret_pos[i], i) for i in range(len(lin)) if ret_pos[i] != math.inf)

    def prefix_fails(j):
        last = returns[j][0]
        ops = _as_prefix(lin, ret_pos, _prefix(lin, call_pos, last), last)
        return _search(ops, max_steps=max_steps)[0] is False

    lo, hi = 0, len(returns) - 1            # the whole history (hi) is known to fail
    while lo < hi:
        mid = (lo + hi) // 2
        if prefix_fails(mid):
            hi = mid
        else:
            lo = mid + 1
    last, culprit = returns[hi]
    indices = _prefix(lin, call_pos, last)

    # Cut the prefix just before a call. Ops that finished before the cut are left out: in
    # any linearization they all come before the ops called after the cut, so the window
    # starts from one of the values the register can hold there (null or a value written
    # by an op called before the cut). Ops still running at the cut may or may not come
    # after it: they stay in the window as optional (a read among them says nothing).
    # Relaxing ops only makes a window easier to linearize, so a window that fails proves
    # the history fails.
    cuts = sorted({call_pos[i] for i in indices if call_pos[i] <= call_pos[culprit]})

    def window(cut):
        ops = []
        for i in indices:
            if call_pos[i] >= cut:
                ops.append(lin[i] if ret_pos[i] <= last else lin[i].pending())
            elif ret_pos[i] >= cut and lin[i].kind != "read":
                ops.append(lin[i].pending())
        ops = [op for op in ops if not (op.optional and op.kind == "read")]
        before = frozenset([None] + [lin[i].value for i in indices
                                     if call_pos[i] < cut and lin[i].kind in ("create", "cas")])
        return ops, before

    def window_fails(c):
        if c == 0:
            return True                     # the whole prefix, known to fail
        ops, before = window(cuts[c])
        return _search(ops, _ANY, before, max_steps)[0] is False

    lo, hi = 0, len(cuts) - 1               # a late cut that fails (lo always fails)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if window_fails(mid):
            lo = mid
        else:
            hi = mid - 1
    ops, before = window(cuts[lo])
    shown = sorted(ops, key=lambda op: op.invoke)
    if lo == 0:
        shown = sorted(_as_prefix(lin, ret_pos, indices, last), key=lambda op: op.invoke)
        return shown, lin[culprit], None, None
    first = next(lin[i] for i in indices if call_pos[i] == cuts[lo])
    return shown, lin[culprit], first, before


def check_linearizable(history: History, max_steps: int = DEFAULT_MAX_STEPS,
                       progress: Callable[[str], None] | None = None) -> CheckResult:
    result = CheckResult("linearizable", True)
    writers = history.writers()
    by_key = _ops_by_key(history)
    checked_ops = unknown_ops = most_steps = 0
    for key in sorted(set(by_key) | set(history.finals)):
        ops = by_key.get(key, [])
        final = None
        if key in history.finals:
            last = max([op.invoke for op in ops] + [op.complete for op in ops if op.complete is not None],
                       default=0.0)
            final = FinalRead(key, history.finals[key], last + 1.0)
        lin = _key_ops(ops, final)
        checked_ops += len(lin)
        unknown_ops += sum(1 for op in lin if op.optional)
        started = time.monotonic()
        verdict, steps = _search(lin, max_steps=max_steps)
        most_steps = max(most_steps, steps)
        if progress:
            progress(f"linearizable: key {key}: {len(lin)} ops, {steps} steps, "
                     f"{time.monotonic() - started:.2f} s: {({True: 'ok', False: 'FAILS', None: 'inconclusive'})[verdict]}")
        if verdict is None:
            result.inconclusive.append(
                f"key {key}: the search hit its bound of {max_steps} steps ({len(lin)} ops, "
                f"{sum(1 for op in lin if op.optional)} unknown); it is not known to be linearizable. "
                f"Raise --max-steps, or run shorter or with fewer unknown outcomes")
            continue
        if verdict:
            continue
        window, culprit, first, before = _minimal_failure(lin, max_steps)
        notes = []
        if first is not None:
            notes.append(f"earlier ops on {key} are left out: each finished before op {first.source.id} began; "
                         f"the register then held null or one of {len(before) - 1} values written before. "
                         f"Shown ops that began earlier may or may not come after that point")
        seen_values = {op.value for op in window if op.kind == "read"} | {op.expected for op in window}
        window_values = {op.value for op in window if op.kind in ("create", "cas")}
        for value in sorted(v for v in seen_values - window_values if v is not None)[:5]:
            writer = writers.get(value)
            if writer is not None:
                notes.append(f"{value!r} was written by: {writer.describe(history.start_time())}")
        result.failures.append(Evidence(
            f"key {key} is not linearizable: no order of these {len(window)} ops is a valid register "
            f"history once op {culprit.source.id} completes (ops marked '>' finish last; "
            f"'unknown' ops may or may not have happened)",
            ops=[op.source for op in window], notes=notes, marked={culprit.source.id}))
    result.counts = {"keys": len(set(by_key) | set(history.finals)), "ops": checked_ops,
                     "unknown": unknown_ops, "most steps": most_steps}
    result.passed = not result.failures and not result.inconclusive
    return result


# ---------------------------------------------------------------------------------------
# 4. Stale reads

class _LatestStart:
    """Among ops sorted by completion: the one that started last of those that completed before t."""

    def __init__(self, ops: list[Op]):
        self.ops = sorted(ops, key=lambda op: op.complete)
        self.completes = [op.complete for op in self.ops]
        self.best: list[Op] = []
        for op in self.ops:
            self.best.append(op if not self.best or op.invoke > self.best[-1].invoke else self.best[-1])

    def before(self, t: float) -> Op | None:
        n = bisect.bisect_left(self.completes, t)
        return self.best[n - 1] if n else None


def check_stale_reads(history: History) -> CheckResult:
    result = CheckResult("stale-reads", True)
    writers = history.writers()
    reads = local_reads = 0
    for key, ops in sorted(_ops_by_key(history).items()):
        acked = [op for op in ops if op.ok and op.op in ("create", "cas", "delete")]
        changes_value = _LatestStart(acked)                                  # moves away from a value
        creates_value = _LatestStart([op for op in acked if op.op != "delete"])  # moves away from null
        null_sources = [op for op in ops if op.op == "delete" and (op.unknown or (op.ok and op.deleted))]
        for read in ops:
            if read.op == "read_local" and read.ok:
                local_reads += 1
                writer = writers.get(read.value)
                if read.value is not None and (writer is None or writer.outcome == "fail" or writer.key != key):
                    how = "no op wrote" if writer is None or writer.key != key else f"failed op {writer.id} wrote"
                    result.failures.append(Evidence(f"read_local op {read.id} returned {read.value!r}, "
                                                    f"which {how} to {key}",
                                                    ops=[op for op in (writer, read) if op is not None and op.key == key],
                                                    marked={read.id}))
                continue
            if read.op != "read" or not read.ok:
                continue
            reads += 1
            if read.value is not None:
                source = writers.get(read.value)
                if source is None or source.outcome == "fail" or source.key != key:
                    continue                        # a phantom: the duplicates check reports it
                newer = changes_value.before(read.invoke)
                if newer is not None and newer.invoke > source.end:
                    result.failures.append(Evidence(
                        f"stale read: op {read.id} returned {read.value!r} of op {source.id}, but op {newer.id} "
                        f"began after op {source.id} finished and was acknowledged before op {read.id} began",
                        ops=[source, newer, read], marked={read.id}))
                continue
            newer = creates_value.before(read.invoke)
            if newer is None:
                continue
            sources = [d for d in null_sources if d.invoke <= read.end]
            if any(newer.invoke <= d.end for d in sources):
                continue                            # some delete may have emptied it after `newer`
            # Show the delete that could have emptied the key last: `newer` began after it finished.
            latest = max(sources, key=lambda d: d.end, default=None)
            shown = [op for op in (latest, newer, read) if op is not None]
            result.failures.append(Evidence(
                f"stale read: op {read.id} found {key} absent, but op {newer.id} wrote it "
                + (f"after delete op {latest.id} finished " if latest else "")
                + f"and was acknowledged before op {read.id} began",
                ops=shown, marked={read.id}))
    result.counts = {"reads": reads, "local reads": local_reads}
    result.passed = not result.failures
    return result


# ---------------------------------------------------------------------------------------
# 5 and 6. Cluster facts at quiescence, measured by the harness

def _all_equal(name: str, per_replica: Any, result: CheckResult) -> None:
    if not isinstance(per_replica, dict) or not per_replica:
        result.failures.append(Evidence(f"quiescence has no {name} per replica; the harness must "
                                        f"report {{\"{name}\": {{\"r1\": ..., ...}}}}"))
        return
    silent = sorted(replica for replica, value in per_replica.items() if value is None)
    if silent:
        result.failures.append(Evidence(f"no {name} from {', '.join(silent)} at quiescence "
                                        f"(the replica did not answer)"))
    groups: dict[str, list[str]] = {}
    for replica, value in sorted(per_replica.items()):
        groups.setdefault(str(value), []).append(replica)
    if len(groups) > 1:
        spread = "; ".join(f"{', '.join(replicas)}: {value}" for value, replicas in groups.items())
        result.failures.append(Evidence(f"replicas disagree on {name} at quiescence: {spread}"))


def check_quiescence(history: History, required: bool = True) -> CheckResult:
    result = CheckResult("quiescence", True)
    q = history.quiescence
    if q is None:
        if required:
            result.failures.append(Evidence("no quiescence line; the harness must write "
                                            "{\"quiescence\": {...}} after the cluster settles"))
        result.passed = not result.failures
        return result
    _all_equal("revisions", q.get("revisions"), result)
    _all_equal("digests", q.get("digests"), result)
    deployments = q.get("deployments") or {}
    for name, counts in sorted(deployments.items()):
        want, have = counts.get("want"), counts.get("have")
        if want != have:
            result.failures.append(Evidence(f"deployment {name} wants {want} pods but has {have} at quiescence"))
    missing = q.get("pods_on_missing_nodes")
    if missing:
        sample = q.get("pods_on_missing_nodes_sample") or []
        result.failures.append(Evidence(f"{missing} pod(s) are bound to nodes that do not exist"
                                        + (f": {', '.join(map(str, sample))}" if sample else "")))
    result.counts = {"replicas": len(q.get("revisions") or {}), "deployments": len(deployments),
                     "pods on missing nodes": "not measured" if missing is None else missing}
    result.passed = not result.failures
    return result


def check_fencing(history: History, fencing_exercised: bool | None = None) -> CheckResult:
    result = CheckResult("fencing", True)
    q = history.quiescence or {}
    if fencing_exercised is None:
        fencing_exercised = bool(q.get("fencing_exercised", False))
    rejections = q.get("fenced_rejections")
    result.counts = {"exercised": fencing_exercised, "fenced rejections": rejections}
    if fencing_exercised and not (isinstance(rejections, int) and rejections > 0):
        result.failures.append(Evidence(
            f"fencing was exercised but the FSM reports {rejections!r} fenced rejections: either no "
            f"old-epoch write reached it or fencing did not reject it"))
    result.passed = not result.failures
    return result


# ---------------------------------------------------------------------------------------

def check(records: History | Iterable[dict] | str, *, fencing_exercised: bool | None = None,
          require_quiescence: bool = True, max_steps: int = DEFAULT_MAX_STEPS,
          progress: Callable[[str], None] | None = None) -> Report:
    """Run every check on a history: decoded JSONL records, a History, or a file path."""
    if isinstance(records, str):
        history = load(records)
    elif isinstance(records, History):
        history = records
    else:
        history = parse(records)
    checks = [
        lambda: check_lost_writes(history),
        lambda: check_duplicates(history),
        lambda: check_linearizable(history, max_steps, progress),
        lambda: check_stale_reads(history),
        lambda: check_quiescence(history, require_quiescence),
        lambda: check_fencing(history, fencing_exercised),
    ]
    results = []
    for run in checks:
        started = time.monotonic()
        result = run()
        result.seconds = time.monotonic() - started
        results.append(result)
        if progress:
            progress(f"{result.name}: {'pass' if result.passed else 'FAIL'} ({result.seconds:.2f} s)")
    return Report(history, results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.chaos.checker",
                                     description="Check a chaos run's history (JSONL); exit 1 if a check fails.")
    parser.add_argument("history", help="the run's history.jsonl")
    parser.add_argument("--fencing-exercised", action="store_true",
                        help="the run exercised fencing: require fenced_rejections > 0")
    parser.add_argument("--no-quiescence", action="store_true",
                        help="do not require the quiescence line (histories of runs without a cluster)")
    parser.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS,
                        help=f"bound of the linearizability search per key (default {DEFAULT_MAX_STEPS})")
    parser.add_argument("-v", "--verbose", action="store_true", help="print progress per key")
    args = parser.parse_args(argv)
    progress = (lambda line: print(line, file=sys.stderr, flush=True)) if args.verbose else None
    try:
        report = check(args.history, fencing_exercised=True if args.fencing_exercised else None,
                       require_quiescence=not args.no_quiescence, max_steps=args.max_steps,
                       progress=progress)
    except (HistoryError, OSError) as exc:
        print(f"checker: {exc}", file=sys.stderr)
        return 2
    print(report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
