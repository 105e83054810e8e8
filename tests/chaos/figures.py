"""Figures of a run, from the fault records and the recorder's counts."""
import statistics

GAP_TARGET_MEDIAN, GAP_TARGET_MAX = 0.5, 1.5


def summary(values):
    values = [v for v in values if v is not None]
    if not values:
        return {"n": 0, "median": None, "p90": None, "max": None}
    ordered = sorted(values)
    return {"n": len(values), "median": statistics.median(values),
            "p90": ordered[max(0, -(-9 * len(ordered) // 10) - 1)], "max": max(values)}


def compute(faults, counts, duration):
    kills = [f for f in faults if f["kind"] == "kill-leader" and not f.get("skipped")]
    gaps = summary([f.get("gap") for f in kills])
    ctl = [f.get("controllers") or {} for f in kills]
    outcomes = {}
    per_op = {}
    for (op, outcome), n in counts.items():
        outcomes[outcome] = outcomes.get(outcome, 0) + n
        per_op.setdefault(op, {})[outcome] = n
    total = sum(outcomes.values())
    return {
        "write_gap": dict(gaps, missing=sum(1 for f in kills if f.get("gap") is None),
                          target_median=GAP_TARGET_MEDIAN, target_max=GAP_TARGET_MAX,
                          median_met=gaps["median"] is not None and gaps["median"] <= GAP_TARGET_MEDIAN,
                          max_met=gaps["max"] is not None and gaps["max"] <= GAP_TARGET_MAX),
        "kill_to_elected": summary([c.get("elected") for c in ctl]),
        "kill_to_controllers_active": summary([c.get("active") for c in ctl]),
        "kill_to_first_controller_write": summary([c.get("first_write") for c in ctl]),
        "operations": total, "ops_per_second": total / duration if duration else None,
        "outcomes": outcomes, "per_op": per_op, "duration": duration,
    }


def fmt(seconds):
    return "-" if seconds is None else "%.3f s" % seconds
