"""Pure helpers of the deployment controller: template hash, names, ownership, pod
readiness and availability, rollout bounds, which pods go first.

No store access here, so everything can be tested on plain dicts.
"""
import copy
import hashlib
import json
import math
import pickle
import random

from shepherd_ha.model.defaults import apply_defaults
from shepherd_ha.model.times import parse_seconds
from shepherd_ha.store.stamping import stamp_new

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
CHANGE_CAUSE_ANNOTATION = "kubernetes.io/change-cause"
HASH_LABEL = "pod-template-hash"

# Kubernetes' "safe" alphabet (no vowels, no 0/1/3: no words, no look-alikes).
_SAFE = "bcdfghjklmnpqrstvwxz2456789"
HASH_LENGTH = 10
SUFFIX_LENGTH = 5
_MAX_NAME = 253

_random = random.SystemRandom()


# ---- hashes and names ----

def template_hash(template):
    """A stable short hash of a pod template: of its canonical JSON, so any change to
    the template (labels, annotations, spec) rolls, and key order never does."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    n = int.from_bytes(hashlib.sha256(data.encode("utf-8")).digest()[:8], "big")
    out = []
    for _ in range(HASH_LENGTH):
        n, r = divmod(n, len(_SAFE))
        out.append(_SAFE[r])
    return "".join(out)


def random_suffix(length=SUFFIX_LENGTH):
    return "".join(_random.choice(_SAFE) for _ in range(length))


def _name_base(name, room):
    """`name` cut to leave `room` characters, never ending in '-' or '.'."""
    base = name[:max(1, _MAX_NAME - room)]
    return base.rstrip("-.") or "x"


def revision_name(deployment_name, hash_):
    """Name of the ControllerRevision of one template: <deployment>-<hash>."""
    return "%s-%s" % (_name_base(deployment_name, len(hash_) + 1), hash_)


def pod_name(deployment_name, hash_, suffix=None):
    """<deployment>-<template hash>-<5 random characters>."""
    suffix = suffix or random_suffix()
    return "%s-%s-%s" % (_name_base(deployment_name, len(hash_) + len(suffix) + 2), hash_, suffix)


# ---- ownership ----

def controller_ref(obj):
    """The ownerReference with controller: true, or None."""
    for ref in ((obj or {}).get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def owner_reference(owner):
    """The controller ownerReference to a Deployment or a ReplicaSet."""
    meta = owner["metadata"]
    return {"apiVersion": "apps/v1", "kind": owner.get("kind") or "Deployment", "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


def hash_of(obj):
    return ((obj.get("metadata") or {}).get("labels") or {}).get(HASH_LABEL)


# ---- pods ----

def pod_prototype(deployment, hash_, template=None):
    """The pod a deployment's template (or `template`, e.g. a revision's) describes,
    defaulted, without name/uid."""
    meta = deployment["metadata"]
    if template is None:
        template = (deployment.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    labels[HASH_LABEL] = hash_
    pod_meta = {"namespace": meta.get("namespace") or "default", "labels": labels,
                "ownerReferences": [owner_reference(deployment)]}
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
           "spec": copy.deepcopy(template.get("spec") or {})}
    return apply_defaults("pods", pod)


def rs_pod_prototype(rs):
    """The pod a ReplicaSet's template describes, owned by it, defaulted, without name/uid."""
    meta = rs["metadata"]
    template = (rs.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    pod_meta = {"namespace": meta.get("namespace") or "default", "labels": dict(tmeta.get("labels") or {}),
                "ownerReferences": [owner_reference(dict(rs, kind="ReplicaSet"))]}
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
           "spec": copy.deepcopy(template.get("spec") or {})}
    return apply_defaults("pods", pod)


def new_pod(prototype, name):
    """A stamped pod from the prototype (its own copy of spec and status)."""
    meta = dict(prototype["metadata"], name=name, labels=dict(prototype["metadata"]["labels"]),
                ownerReferences=[dict(r) for r in prototype["metadata"]["ownerReferences"]])
    if "annotations" in meta:
        meta["annotations"] = dict(meta["annotations"])
    pod = {"apiVersion": prototype["apiVersion"], "kind": prototype["kind"], "metadata": meta,
           # pickle round trip: a fast deep copy, so no two pods share a nested object
           "spec": pickle.loads(pickle.dumps(prototype["spec"], pickle.HIGHEST_PROTOCOL)),
           "status": dict(prototype.get("status") or {})}
    return stamp_new(pod)


def ready_condition(pod):
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond
    return None


def is_ready(pod):
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def is_scheduled(pod):
    return bool((pod.get("spec") or {}).get("nodeName"))


def is_terminal(pod):
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def availability(pod, min_ready_seconds, now):
    """(available, seconds until it becomes available or None).

    Available = ready for at least minReadySeconds, counted from the Ready
    condition's lastTransitionTime (as Kubernetes does); a ready pod without a
    usable transition time counts as ready since now (it is re-checked then)."""
    if not is_ready(pod):
        return False, None
    if min_ready_seconds <= 0:
        return True, None
    since = parse_seconds(ready_condition(pod).get("lastTransitionTime"))
    if since is None:
        return False, float(min_ready_seconds)
    # an agent's clock ahead of ours never makes a pod wait longer than minReadySeconds
    left = min(since + min_ready_seconds - now, float(min_ready_seconds))
    if left <= 0:
        return True, None
    return False, left


# ---- rollout bounds ----

def resolve_bound(value, replicas, round_up):
    """An IntOrString rollout bound as a pod count: percentages of `replicas`, surge
    rounded up and unavailability rounded down (as Kubernetes does)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        exact = int(value[:-1]) * replicas / 100.0
        return int(math.ceil(exact)) if round_up else int(math.floor(exact))
    return 0


def rolling_bounds(spec, replicas):
    """(maxSurge, maxUnavailable) in pods for a RollingUpdate deployment."""
    strategy = spec.get("strategy") or {}
    rolling = strategy.get("rollingUpdate") or {}
    surge = resolve_bound(rolling.get("maxSurge", "25%"), replicas, True)
    unavailable = resolve_bound(rolling.get("maxUnavailable", "25%"), replicas, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1          # as Kubernetes: otherwise the rollout could never move
    return surge, min(unavailable, replicas)


def strategy_type(spec):
    return (spec.get("strategy") or {}).get("type") or "RollingUpdate"


def max_unavailable(spec, replicas):
    """What the Available condition tolerates: 0 for Recreate."""
    if strategy_type(spec) != "RollingUpdate":
        return 0
    return rolling_bounds(spec, replicas)[1]


# ---- which pods go first ----

def _created(pod):
    meta = pod.get("metadata") or {}
    return (meta.get("creationTimestamp") or "", meta.get("name") or "")


def deletion_order(pods, revision_of=None):
    """Pods in the order they should be deleted: (older revisions first, when
    revision_of is given), then unscheduled, then not ready, then newest."""
    ordered = sorted(pods, key=_created, reverse=True)               # newest first
    ordered.sort(key=lambda p: (is_scheduled(p), is_ready(p)))       # stable: keeps newest first
    if revision_of is not None:
        ordered.sort(key=revision_of)
    return ordered


def names_summary(names, limit=5):
    names = list(names)
    if len(names) <= limit:
        return ", ".join(names)
    return "%s and %d more" % (", ".join(names[:limit]), len(names) - limit)


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def pod_change_matters(pod, previous):
    """Whether a pod change can change what the controller does or reports: its
    existence, labels, owners, readiness or whether it finished. Bindings and other
    status details (PodScheduled, IPs) do not, and with thousands of pods being
    bound they would otherwise cost a pass each (deployments and replica sets alike)."""
    if pod is None or previous is None:
        return True
    meta, before = pod["metadata"], previous["metadata"]
    return (meta.get("labels") != before.get("labels")
            or meta.get("ownerReferences") != before.get("ownerReferences")
            or bool(meta.get("deletionTimestamp")) != bool(before.get("deletionTimestamp"))
            or is_terminal(pod) != is_terminal(previous)
            or ready_condition(pod) != ready_condition(previous))
