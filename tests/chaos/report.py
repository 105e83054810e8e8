"""The one-page markdown report of a run, and its console summary."""
import datetime
import os
import platform

from .figures import fmt


def machine():
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((l.split(":", 1)[1].strip() for l in fh if l.startswith("model name")), "unknown")
    except OSError:
        model = "unknown"
    load = os.getloadavg()
    return "%d cores (%s), Python %s, %s; load average %.1f/%.1f/%.1f at the end" % (
        os.cpu_count(), model, platform.python_version(), platform.platform(), *load)


def revision():
    """The commit under test (and whether shepherd_ha/ has local changes)."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        sha = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "shepherd_ha", "agent"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + (" + local changes in shepherd_ha/ or agent/" if dirty else "")


def render(result):
    f = result["figures"]
    lines = ["# Chaos run: %s" % ("PASS" if result["passed"] else "FAIL"), ""]
    lines.append("%s UTC; %s; %d replicas %s; %d client processes on %d keys; seed %s; %.0f s of workload." % (
        datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), result["command"], result["replicas"],
        "on the VMs of the Vagrant target" if result.get("target") == "vagrant" else
        "in network namespaces" if result["netns"] else "on loopback", result["clients"], result["keys"],
        result["seed"], f["duration"]))
    lines += ["", "Machine: " + result["machine"], "", "Code: commit " + result.get("revision", "unknown"),
              "", "## Operations", ""]
    lines.append("%d operations, %.1f ops/s; outcomes: %s." % (
        f["operations"], f["ops_per_second"] or 0, ", ".join("%s %d" % kv for kv in sorted(f["outcomes"].items()))))
    lines += ["", "| op | ok | fail | unknown |", "|---|---|---|---|"]
    for op, by in sorted(f["per_op"].items()):
        lines.append("| %s | %d | %d | %d |" % (op, by.get("ok", 0), by.get("fail", 0), by.get("unknown", 0)))
    lines += ["", "## Faults", ""]
    kinds = {}
    for rec in result["faults"]:
        kinds.setdefault(rec["kind"], []).append(rec)
    lines += ["| fault | count | leader changed | all healed and ready |", "|---|---|---|---|"]
    for kind, recs in sorted(kinds.items()):
        changed = sum(1 for r in recs if r.get("leader_after") and r.get("leader_after") != r.get("leader_before"))
        lines.append("| %s | %d | %d | %s |" % (kind, len(recs), changed,
                                                "yes" if all(r.get("ready") for r in recs) else "NO"))
    terms = [r["term_before"] for r in result["faults"] if r.get("term_before") is not None]
    if terms:
        lines.append("")
        lines.append("Raft term went from %d to %s." % (min(terms), result.get("final_term")))
    lines += ["", "## Checks", ""]
    for name, passed, detail in result["checks"]:
        lines.append("- %s **%s**%s" % (name, "passed" if passed else "FAILED", (": " + detail) if detail else ""))
    if result.get("checker_report"):
        lines += ["", "```", result["checker_report"].strip()[:3000], "```"]
    g = f["write_gap"]
    lines += ["", "## Figures", "",
              "| figure | median | p90 | max | n |", "|---|---|---|---|---|"] + [
              "| %s | %s | %s | %s | %d |" % (label, fmt(f[key]["median"]), fmt(f[key]["p90"]), fmt(f[key]["max"]),
                                             f[key]["n"])
              for label, key in (("write gap after a leader SIGKILL (HTTP API)", "write_gap"),
                                 ("leader SIGKILL -> new leader elected (polled)", "kill_to_elected"),
                                 ("leader SIGKILL -> new leader's controllers active (polled)",
                                  "kill_to_controllers_active"),
                                 ("leader SIGKILL -> first write of the new leader's controllers",
                                  "kill_to_first_controller_write"))] + [
              "",
              "Write gap target: median <= %.1f s (%s), max <= %.1f s (%s)%s." % (
                  g["target_median"], "met" if g["median_met"] else "NOT met", g["target_max"],
                  "met" if g["max_met"] else "NOT met",
                  "; %d kill(s) with no ack within 20 s" % g["missing"] if g["missing"] else "")]
    if result.get("etcd"):
        lines += ["", "etcd comparison: " + result["etcd"]]
    lines += ["", "History: `%s`" % result["history"], ""]
    return "\n".join(lines)


def write(result, path):
    with open(path, "w") as fh:
        fh.write(render(result))
