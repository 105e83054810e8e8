"""Pod status as the agent reports it (pure): container states, phase, conditions.

Phase follows the kubelet's rules:
- Pending: a container has not started yet (waiting, never ran);
- Running: every container was created and one runs, or exited ones will restart;
- Succeeded: every container terminated with exit code 0 and none will restart;
- Failed: every container terminated, one with an error, and none will restart
  (restartPolicy Never; with OnFailure a failed container restarts, with Always
  every container restarts).
A pod that reached Succeeded or Failed stays there.
"""
import copy

OWNED_FIELDS = ("phase", "podIP", "podIPs", "hostIP", "startTime", "conditions", "containerStatuses",
                "reason", "message")
AGENT_CONDITIONS = ("Initialized", "ContainersReady", "Ready")
TERMINAL = ("Succeeded", "Failed")


def waiting(reason, message=None):
    state = {"reason": reason}
    if message:
        state["message"] = message
    return {"waiting": state}


def running(started_at):
    return {"running": {"startedAt": started_at}} if started_at else {"running": {}}


def terminated_reason(exit_code, oom_killed=False):
    if oom_killed:
        return "OOMKilled"
    return "Completed" if exit_code == 0 else "Error"


def terminated(exit_code, started_at=None, finished_at=None, reason=None, message=None, container_id=None,
               oom_killed=False):
    state = {"exitCode": int(exit_code if exit_code is not None else 0),
             "reason": reason or terminated_reason(exit_code, oom_killed)}
    if message:
        state["message"] = message
    if started_at:
        state["startedAt"] = started_at
    if finished_at:
        state["finishedAt"] = finished_at
    if container_id:
        state["containerID"] = container_id
    return {"terminated": state}


def container_status(name, image, state, ready=False, restart_count=0, last_state=None, image_id="",
                     container_id="", started=None):
    out = {"name": name, "image": image, "imageID": image_id or "", "ready": bool(ready),
           "restartCount": int(restart_count), "state": state, "lastState": last_state or {}}
    if container_id:
        out["containerID"] = container_id
    out["started"] = bool("running" in state) if started is None else bool(started)
    return out


# ---- pod ----

def pod_phase(restart_policy, statuses, previous=None):
    """The kubelet's phase for these container statuses (see the module doc)."""
    if previous in TERMINAL:
        return previous
    waiting_n = running_n = stopped = succeeded = 0
    for cs in statuses:
        state = cs.get("state") or {}
        if "running" in state:
            running_n += 1
        elif "terminated" in state:
            stopped += 1
            if state["terminated"].get("exitCode") == 0:
                succeeded += 1
        elif "waiting" in state:
            if (cs.get("lastState") or {}).get("terminated"):
                stopped += 1
            else:
                waiting_n += 1
        else:
            waiting_n += 1
    if not statuses:
        return "Pending"
    if waiting_n:
        return "Pending"
    if running_n:
        return "Running"
    if stopped:
        if restart_policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if restart_policy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


def _condition(existing, ctype, status, now, reason=None, message=None):
    old = next((c for c in existing if isinstance(c, dict) and c.get("type") == ctype), None)
    transition = old.get("lastTransitionTime") if old and old.get("status") == status else None
    cond = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": transition or now}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def pod_conditions(existing, statuses, phase, now):
    """Conditions with Initialized, ContainersReady and Ready computed; the others
    (PodScheduled from the scheduler) kept as they are, in their order."""
    existing = [c for c in (existing or []) if isinstance(c, dict)]
    unready = [cs["name"] for cs in statuses if not cs.get("ready")]
    if phase in TERMINAL:
        ready, reason, message = "False", "PodCompleted", None
    elif unready or not statuses:
        ready, reason = "False", "ContainersNotReady"
        message = "containers with unready status: [%s]" % " ".join(unready)
    else:
        ready, reason, message = "True", None, None
    init = "True"
    ours = {
        "Initialized": _condition(existing, "Initialized", init, now,
                                  "PodCompleted" if phase in TERMINAL else None),
        "ContainersReady": _condition(existing, "ContainersReady", ready, now, reason, message),
        "Ready": _condition(existing, "Ready", ready, now, reason, message),
    }
    out = []
    for cond in existing:
        if cond.get("type") in ours:
            out.append(ours.pop(cond["type"]))
        else:
            out.append(cond)
    for ctype in AGENT_CONDITIONS:
        if ctype in ours:
            out.append(ours[ctype])
    if not any(c.get("type") == "PodScheduled" for c in out):
        out.insert(0, {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
    return out


def build_pod_status(pod, statuses, phase, pod_ip, host_ip, start_time, now, reason=None, message=None):
    """The whole status the agent writes: the current status with the agent's fields
    replaced (others, e.g. nominatedNodeName, kept)."""
    current = copy.deepcopy(pod.get("status") or {})
    status = {k: v for k, v in current.items() if k not in OWNED_FIELDS}
    status["phase"] = phase
    status["conditions"] = pod_conditions(current.get("conditions"), statuses, phase, now)
    if host_ip:
        status["hostIP"] = host_ip
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    if start_time:
        status["startTime"] = start_time
    status["containerStatuses"] = statuses
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return status


def owned(status):
    status = status or {}
    return {k: status.get(k) for k in OWNED_FIELDS if status.get(k) is not None}


def differs(current, new):
    """Whether writing `new` would change the agent's fields of `current`."""
    return owned(current) != owned(new)


def merge_patch_for(current, new):
    """A merge patch body setting every agent field of `new` (lists are replaced
    whole); fields `current` has and `new` drops are set to null."""
    patch = owned(new)
    for key in owned(current):
        if key not in patch:
            patch[key] = None
    return {"status": patch}
