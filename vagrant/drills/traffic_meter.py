"""The service-traffic drill's meter (pure): the client pod's log lines -> samples ->
the fraction of failed requests, the outages, and whether traffic came back after
each fault.

The client pod prints one line per request: `SEQ UPTIME ok backend=POD` or `SEQ
UPTIME fail`, UPTIME from the worker's /proc/uptime (monotonic, 10 ms steps). Every
time here is the client's own clock, so a skew between the VMs and the host running
the drill changes nothing; faults are marked by the last sequence number seen when
they started and ended.
"""
import dataclasses
from typing import List, Optional

RECOVERY_RUN = 5          # this many successes in a row after a fault: traffic is back


@dataclasses.dataclass(frozen=True)
class Sample:
    seq: int
    at: float             # seconds, the client's clock
    ok: bool
    backend: Optional[str] = None


def parse_lines(text):
    """Samples of the log text, in sequence order; lines that are not samples (a torn
    last line, a shell message) are skipped, as are repeats of a sequence number."""
    out = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[2] not in ("ok", "fail"):
            continue
        try:
            seq, at = int(parts[0]), float(parts[1])
        except ValueError:
            continue
        backend = None
        if parts[2] == "ok":
            if len(parts) < 4 or not parts[3].startswith("backend="):
                continue                      # an answer from something that is not our backend
            backend = parts[3][len("backend="):]
        out.setdefault(seq, Sample(seq, at, parts[2] == "ok", backend))
    return [out[k] for k in sorted(out)]


@dataclasses.dataclass(frozen=True)
class Outage:
    start: float          # the last success before it (or its first failure when none was before)
    end: Optional[float]  # the next success; None while it lasts
    failed: int           # failed requests in it

    def length(self, now=None):
        end = self.end if self.end is not None else now
        return None if end is None else max(0.0, end - self.start)


def outages(samples):
    out, last_ok, failed, first_fail = [], None, 0, None
    for s in samples:
        if s.ok:
            if failed:
                out.append(Outage(last_ok if last_ok is not None else first_fail, s.at, failed))
            last_ok, failed, first_fail = s.at, 0, None
        else:
            if not failed:
                first_fail = s.at
            failed += 1
    if failed:
        out.append(Outage(last_ok if last_ok is not None else first_fail, None, failed))
    return out


def failed_fraction(samples):
    return (sum(1 for s in samples if not s.ok) / len(samples)) if samples else None


def longest_outage(samples):
    """Seconds of the longest stretch without a successful request (an open one counts
    up to the last sample); 0.0 when nothing failed."""
    now = samples[-1].at if samples else None
    return max([o.length(now) for o in outages(samples)] or [0.0])


def recovered_at(samples, after_seq, run=RECOVERY_RUN):
    """The sequence number ending the first `run` successes in a row after `after_seq`,
    or None while traffic has not come back."""
    streak = 0
    for s in samples:
        if s.seq <= after_seq:
            continue
        streak = streak + 1 if s.ok else 0
        if streak >= run:
            return s.seq
    return None


@dataclasses.dataclass
class FaultWindow:
    name: str
    start_seq: int                  # the last sequence number seen when the fault began
    end_seq: Optional[int] = None   # ... when it was undone
    recovered_seq: Optional[int] = None


def window(samples, fault):
    """The samples from the fault's start to its recovery (or to the end)."""
    last = fault.recovered_seq if fault.recovered_seq is not None else float("inf")
    return [s for s in samples if fault.start_seq < s.seq <= last]


def verdict(samples, faults, baseline_run=RECOVERY_RUN):
    """(passed, reasons): traffic flowed before the first fault and came back after
    every fault (RECOVERY_RUN successes in a row after it was undone)."""
    reasons = []
    first = faults[0].start_seq if faults else (samples[-1].seq if samples else 0)
    if recovered_at([s for s in samples if s.seq <= first], -1, baseline_run) is None:
        reasons.append("no steady traffic before the first fault (%d successes in a row needed)" % baseline_run)
    for fault in faults:
        if fault.end_seq is None:
            reasons.append("%s was not undone" % fault.name)
        elif recovered_at(samples, fault.end_seq) is None:
            reasons.append("traffic did not recover after %s" % fault.name)
    return not reasons, reasons


def backends(samples):
    """{backend: answered requests}."""
    out = {}
    for s in samples:
        if s.ok:
            out[s.backend] = out.get(s.backend, 0) + 1
    return out


def summary(samples, faults) -> List[str]:
    """Lines for the report: overall and per fault."""
    lines = ["%d requests, %.2f%% failed, longest outage %.2f s" % (
        len(samples), 100.0 * (failed_fraction(samples) or 0.0), longest_outage(samples))]
    for fault in faults:
        part = window(samples, fault)
        lines.append("%s: %d requests, %.2f%% failed, longest outage %.2f s, %s" % (
            fault.name, len(part), 100.0 * (failed_fraction(part) or 0.0), longest_outage(part),
            "recovered" if fault.recovered_seq is not None else "NOT recovered"))
    return lines
