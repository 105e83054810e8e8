"""The chaos history: one JSON object per line, written by the harness, read by the checker.

Times are seconds of one monotonic clock shared by all client threads of a run.

Operation line (one per completed or abandoned operation):
  {"id": 17, "process": 3, "op": "create" | "cas" | "delete" | "read" | "read_local" | "create_generated",
   "key": "k07",            # register = ConfigMap name (null for create_generated)
   "value": "p3-17",        # create/cas: the value written, unique in the run; reads: the value
                            # returned or null (absent); delete: null; create_generated: the op id
   "expected": "p1-9",      # cas only: the value the CAS replaces
   "invoke": 12.345, "complete": 12.401,      # complete is null exactly when outcome is unknown
   "outcome": "ok" | "fail" | "unknown",      # fail: known not applied; unknown: may have applied
   "deleted": true | false, # ok delete only: true = removed an object, false = it was absent (404)
   "replica": "r2", "error": "..."}           # informational

Final lines, written after quiescence:
  {"final": true, "key": "k07", "value": "p3-17" | null}     # a linearizable read of each key
  {"final_generated": true, "op_ids": {"17": 1, ...}}        # objects per chaos-op=<id> label
  {"quiescence": {"revisions": {"r1": 123, ...}, "digests": {"r1": "ab..", ...},
                  "deployments": {"web": {"want": 5, "have": 5}},
                  "pods_on_missing_nodes": 0, "fenced_rejections": 3}}

Each key is a register holding a value or null: create(v) needs null; cas(e, v) needs e;
delete empties it (deleted=false when it was already empty); read returns it; read_local
(resourceVersion=0) may be stale.

`load` reads a file and `parse` turns decoded lines into a `History`, rejecting a line that
breaks the format with an error naming the line and the field.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

WRITE_KINDS = ("create", "cas")
KINDS = ("create", "cas", "delete", "read", "read_local", "create_generated")
OUTCOMES = ("ok", "fail", "unknown")


class HistoryError(ValueError):
    """A history line that does not follow the format; the message names the line and the fix."""


@dataclass(frozen=True)
class Op:
    id: int
    process: int
    op: str
    key: str | None
    value: str | None
    invoke: float
    complete: float | None          # None when the outcome is unknown
    outcome: str
    expected: str | None = None     # cas only
    deleted: bool | None = None     # delete only, when ok
    replica: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @property
    def unknown(self) -> bool:
        return self.outcome == "unknown"

    @property
    def end(self) -> float:
        """Completion time; an unknown op may take effect at any time after its invoke."""
        return math.inf if self.complete is None else self.complete

    @property
    def is_write(self) -> bool:
        return self.op in WRITE_KINDS

    def describe(self, t0: float = 0.0) -> str:
        """One line a person can read: id, process, call, outcome, interval, replica."""
        if self.op == "create":
            call = f"create({self.key}, {self.value})"
        elif self.op == "cas":
            call = f"cas({self.key}, {self.expected} -> {self.value})"
        elif self.op == "delete":
            result = "" if self.deleted is None else (" removed" if self.deleted else " absent")
            call = f"delete({self.key}){result}"
        elif self.op == "create_generated":
            call = f"create_generated(chaos-op={self.value})"
        else:
            call = f"{self.op}({self.key}) -> {self.value}"
        end = "?" if self.complete is None else f"{self.complete - t0:.3f}"
        text = f"op {self.id:<6} p{self.process:<3} {call:<42} {self.outcome:<7} [{self.invoke - t0:.3f}, {end}]"
        if self.replica:
            text += f" {self.replica}"
        if self.error:
            text += f"  ({self.error})"
        return text

    def to_record(self) -> dict[str, Any]:
        record = {"id": self.id, "process": self.process, "op": self.op, "key": self.key,
                  "value": self.value, "invoke": self.invoke, "complete": self.complete,
                  "outcome": self.outcome}
        if self.op == "cas":
            record["expected"] = self.expected
        if self.op == "delete" and self.deleted is not None:
            record["deleted"] = self.deleted
        if self.replica is not None:
            record["replica"] = self.replica
        if self.error is not None:
            record["error"] = self.error
        return record


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)
    finals: dict[str, str | None] = field(default_factory=dict)     # key -> final value
    final_generated: dict[int, int] | None = None                   # op id -> object count
    quiescence: dict[str, Any] | None = None

    def keys(self) -> list[str]:
        return sorted({op.key for op in self.ops if op.key is not None} | set(self.finals))

    def start_time(self) -> float:
        return min((op.invoke for op in self.ops), default=0.0)

    def writers(self) -> dict[str, Op]:
        """Value -> the create/cas op that wrote it (values are unique in a run)."""
        return {op.value: op for op in self.ops if op.is_write}


def _bad(line_no: int, message: str) -> HistoryError:
    return HistoryError(f"history line {line_no}: {message}")


def _op_from_record(record: dict, line_no: int) -> Op:
    for name in ("id", "process", "op", "invoke", "outcome"):
        if name not in record:
            raise _bad(line_no, f"operation has no {name!r}; every op line needs id, process, op, "
                                f"key, value, invoke, complete and outcome")
    kind, outcome = record["op"], record["outcome"]
    if kind not in KINDS:
        raise _bad(line_no, f"op {kind!r} is not one of {', '.join(KINDS)}")
    if outcome not in OUTCOMES:
        raise _bad(line_no, f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
    complete = record.get("complete")
    if (complete is None) != (outcome == "unknown"):
        raise _bad(line_no, "complete must be null exactly when the outcome is unknown "
                            f"(outcome {outcome!r}, complete {complete!r})")
    if complete is not None and complete < record["invoke"]:
        raise _bad(line_no, f"complete {complete} is before invoke {record['invoke']}")
    key = record.get("key")
    if kind != "create_generated" and not isinstance(key, str):
        raise _bad(line_no, f"{kind} needs a string key, got {key!r}")
    value = record.get("value")
    if kind in WRITE_KINDS and not isinstance(value, str):
        raise _bad(line_no, f"{kind} needs the written value as a string, got {value!r}")
    if kind == "create_generated" and value is None:
        raise _bad(line_no, "create_generated needs its op id as value")
    if kind == "cas" and not isinstance(record.get("expected"), str):
        raise _bad(line_no, f"cas needs 'expected', the value read before, got {record.get('expected')!r}")
    deleted = record.get("deleted")
    if kind == "delete" and outcome == "ok" and not isinstance(deleted, bool):
        raise _bad(line_no, "an ok delete needs 'deleted': true (it removed an object) or false (404)")
    return Op(id=int(record["id"]), process=int(record["process"]), op=kind, key=key,
              value=None if value is None else str(value), invoke=float(record["invoke"]),
              complete=None if complete is None else float(complete), outcome=outcome,
              expected=record.get("expected") if kind == "cas" else None,
              deleted=deleted if kind == "delete" and outcome == "ok" else None,
              replica=record.get("replica"), error=record.get("error"))


def parse(records: Iterable[dict]) -> History:
    """Decoded JSONL lines (dicts, in file order) -> History; HistoryError on a bad line."""
    history = History()
    seen_ids: dict[int, int] = {}
    written: dict[str, int] = {}
    for line_no, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise _bad(line_no, f"expected a JSON object, got {type(record).__name__}")
        if record.get("final") is True:
            if not isinstance(record.get("key"), str):
                raise _bad(line_no, "a final line needs the key it read")
            history.finals[record["key"]] = record.get("value")
        elif record.get("final_generated") is True:
            op_ids = record.get("op_ids")
            if not isinstance(op_ids, dict):
                raise _bad(line_no, "final_generated needs op_ids: {op id: object count}")
            try:
                history.final_generated = {int(k): int(v) for k, v in op_ids.items()}
            except (TypeError, ValueError):
                raise _bad(line_no, "final_generated op_ids must map op ids to object counts, "
                                    f"e.g. {{\"17\": 1}}; got {op_ids!r}"[:300]) from None
        elif "quiescence" in record:
            if not isinstance(record["quiescence"], dict):
                raise _bad(line_no, "quiescence must be an object")
            history.quiescence = record["quiescence"]
        else:
            op = _op_from_record(record, line_no)
            if op.id in seen_ids:
                raise _bad(line_no, f"op id {op.id} already used on line {seen_ids[op.id]}; ids must be unique")
            seen_ids[op.id] = line_no
            if op.is_write:
                if op.value in written:
                    raise _bad(line_no, f"value {op.value!r} already written on line {written[op.value]}; "
                                        f"written values must be unique in a run")
                written[op.value] = line_no
            history.ops.append(op)
    return history


def read_records(path: str) -> list[dict]:
    """The decoded lines of a JSONL file; blank lines are skipped."""
    records = []
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise HistoryError(f"{path} line {line_no}: not JSON ({exc}); "
                                   f"the history is one JSON object per line") from None
    return records


def load(path: str) -> History:
    return parse(read_records(path))


def write_records(path: str, records: Iterable[dict | Op]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            if isinstance(record, Op):
                record = record.to_record()
            handle.write(json.dumps(record, sort_keys=True) + "\n")
