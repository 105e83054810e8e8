"""Labels and names of the containers the agent creates (pure).

Every container carries its node, pod uid, namespace, pod name and container name,
so the agent finds its own containers after a restart (and only its own: it lists
by the node label and touches nothing else). More labels carry what the agent must
remember across its own restarts: the restart count, the state of the previous
instance (for `lastState`) and a hash of the container spec.
"""
import hashlib
import json
import re

NODE = "shepherd.io/node"
# The cluster of the agent that made the container (--cluster-id), set by the Docker
# runtime: two clusters on one engine may both have a node-1, and neither may adopt or
# remove the other's containers (runtime/docker_runtime.py filters on it).
CLUSTER = "shepherd.io/cluster-id"
POD_UID = "shepherd.io/pod-uid"
POD_NAMESPACE = "shepherd.io/pod-namespace"
POD_NAME = "shepherd.io/pod-name"
CONTAINER_NAME = "shepherd.io/container-name"
RESTART_COUNT = "shepherd.io/restart-count"     # instance number: 0 for the first, +1 per restart
SPEC_HASH = "shepherd.io/spec-hash"
SANDBOX = "shepherd.io/sandbox"                 # "true" on the network holder of a multi-container pod
LAST_EXIT_CODE = "shepherd.io/last-exit-code"   # the previous instance, for lastState
LAST_REASON = "shepherd.io/last-reason"
LAST_STARTED_AT = "shepherd.io/last-started-at"
LAST_FINISHED_AT = "shepherd.io/last-finished-at"
LAST_CONTAINER_ID = "shepherd.io/last-container-id"

SANDBOX_CONTAINER = "POD"     # container-name label of a sandbox (not a valid container name)

_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]")


def spec_hash(container_spec):
    """A short stable hash of one container's spec: a change (e.g. a new image)
    means the running container no longer matches and is replaced."""
    text = json.dumps(container_spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def container_name(node, namespace, pod, container, restart_count):
    """shepherd_<node>_<ns>_<pod>_<container>_<restart> (Docker's name alphabet)."""
    parts = [node, namespace or "default", pod, container, str(int(restart_count))]
    return "shepherd_" + "_".join(_UNSAFE.sub("-", p) for p in parts)


def container_labels(node, pod, container_name_, restart_count, container_spec=None, last=None):
    """The labels of one container of `pod`; last: the previous instance's terminated
    state ({exitCode, reason, startedAt, finishedAt, containerID}) or None."""
    meta = pod.get("metadata") or {}
    labels = {
        NODE: node,
        POD_UID: meta.get("uid") or "",
        POD_NAMESPACE: meta.get("namespace") or "default",
        POD_NAME: meta.get("name") or "",
        CONTAINER_NAME: container_name_,
        RESTART_COUNT: str(int(restart_count)),
    }
    if container_spec is not None:
        labels[SPEC_HASH] = spec_hash(container_spec)
    if last:
        if last.get("exitCode") is not None:
            labels[LAST_EXIT_CODE] = str(last["exitCode"])
        for key, label in (("reason", LAST_REASON), ("startedAt", LAST_STARTED_AT),
                           ("finishedAt", LAST_FINISHED_AT), ("containerID", LAST_CONTAINER_ID)):
            if last.get(key):
                labels[label] = str(last[key])
    return labels


def sandbox_labels(node, pod, attempt):
    labels = container_labels(node, pod, SANDBOX_CONTAINER, attempt)
    labels[SANDBOX] = "true"
    return labels


def restart_count_of(labels):
    try:
        return max(0, int((labels or {}).get(RESTART_COUNT, "0")))
    except ValueError:
        return 0


def last_state_of(labels):
    """The previous instance's terminated state recorded in a container's labels, or None."""
    labels = labels or {}
    if LAST_EXIT_CODE not in labels and LAST_FINISHED_AT not in labels:
        return None
    try:
        code = int(labels.get(LAST_EXIT_CODE, "0"))
    except ValueError:
        code = 0
    term = {"exitCode": code, "reason": labels.get(LAST_REASON) or ("Completed" if code == 0 else "Error")}
    if labels.get(LAST_STARTED_AT):
        term["startedAt"] = labels[LAST_STARTED_AT]
    if labels.get(LAST_FINISHED_AT):
        term["finishedAt"] = labels[LAST_FINISHED_AT]
    if labels.get(LAST_CONTAINER_ID):
        term["containerID"] = labels[LAST_CONTAINER_ID]
    return term


def is_sandbox(labels):
    return (labels or {}).get(SANDBOX) == "true"
