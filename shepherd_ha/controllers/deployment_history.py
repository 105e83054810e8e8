"""A deployment's ReplicaSets as its revision history, and the migration from the
ControllerRevisions of older servers.

Each distinct pod template has one ReplicaSet `<deployment>-<pod-template-hash>`,
owned by the deployment (controller reference), labelled and selecting
`pod-template-hash`, annotated with `deployment.kubernetes.io/revision` and the
deployment's `kubernetes.io/change-cause` of its time: what `kubectl rollout
history` lists and `kubectl rollout undo` copies the template from. The template's
revision is the highest; a template come back (a rollback) takes the next number.

Migration. Older servers kept one ControllerRevision per template and owned the pods
directly. A pass that finds them turns each revision into a ReplicaSet of the same
hash and number, asked for as many replicas as it has pods, and moves those pods'
controller reference to it in the same atomic write (in chunks for big deployments:
each chunk raises the count by what it adopts), so the ReplicaSet controller never
sees a pod missing or extra and no pod restarts. Then the revisions are deleted.
"""
import copy

from shepherd_ha.store import commands
from shepherd_ha.store.stamping import stamp_new

from .deployment_util import (CHANGE_CAUSE_ANNOTATION, HASH_LABEL, REVISION_ANNOTATION, hash_of,
                              owner_reference, pod_name, revision_name)

ADOPT_CHUNK = 1000      # pods moved per atomic write (~1 KiB each: far below an entry's bound)


def revision_of(rs):
    try:
        return int(((rs.get("metadata") or {}).get("annotations") or {}).get(REVISION_ANNOTATION, 0))
    except (TypeError, ValueError):
        return 0


def _canonical(value):
    """`value` without None and {} members: what a Go client's round trip adds to a template
    (`creationTimestamp: null`, `resources: {}`) means nothing."""
    if isinstance(value, dict):
        out = {k: _canonical(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {}}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def has_template(rs, template, spec_hash):
    """Whether `rs` is the ReplicaSet of a deployment's `template` (of hash `spec_hash`):
    the same hash, or the same template once the hash label and what means nothing are
    set aside (kubectl rollout undo sends the ReplicaSet's template through Go structs)."""
    if hash_of(rs) == spec_hash:
        return True
    theirs = copy.deepcopy((rs.get("spec") or {}).get("template") or {})
    labels = (theirs.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
    return _canonical(theirs) == _canonical(template or {})


def new_replica_set(store, d, hash_, template, number, replicas, cause):
    """A stamped ReplicaSet of `template` for deployment `d` (not yet written)."""
    name = revision_name(d["metadata"]["name"], hash_)
    namespace = d["metadata"].get("namespace") or "default"
    if store.get("replicasets", namespace, name) is not None:    # a stranger's (e.g. a deleted namesake's)
        name = pod_name(d["metadata"]["name"], hash_)
    template = copy.deepcopy(template or {})
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = dict(tmeta.get("labels") or {}, **{HASH_LABEL: hash_})
    selector = copy.deepcopy((d.get("spec") or {}).get("selector") or {})
    selector["matchLabels"] = dict(selector.get("matchLabels") or {}, **{HASH_LABEL: hash_})
    annotations = {REVISION_ANNOTATION: str(number)}
    if cause:
        annotations[CHANGE_CAUSE_ANNOTATION] = cause
    meta = {"name": name, "namespace": namespace, "labels": dict(tmeta["labels"]), "annotations": annotations,
            "ownerReferences": [owner_reference(d)]}
    spec = {"replicas": replicas, "minReadySeconds": (d.get("spec") or {}).get("minReadySeconds") or 0,
            "selector": selector, "template": template}
    return stamp_new({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta, "spec": spec})


def with_revision(rs, number, cause):
    """`rs` renumbered and with the change cause, or None when nothing changes."""
    annotations = dict(rs["metadata"].get("annotations") or {})
    before = dict(annotations)
    annotations[REVISION_ANNOTATION] = str(number)
    if cause:
        annotations[CHANGE_CAUSE_ANNOTATION] = cause
    if annotations == before:
        return None
    return dict(rs, metadata=dict(rs["metadata"], annotations=annotations))


def adopt_op(pod, rs):
    """Move `pod`'s controller reference (to the deployment) over to `rs`."""
    meta = pod["metadata"]
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("controller") is not True]
    refs.append(owner_reference(dict(rs, kind="ReplicaSet")))
    return commands.update("pods", meta.get("namespace"), meta["name"], dict(pod, metadata=dict(meta, ownerReferences=refs)),
                           precondition={"resourceVersion": meta["resourceVersion"]})


def migrate(ctl, d, revisions, legacy_pods, replica_sets):
    """Turn `revisions` (ControllerRevisions of `d`) into ReplicaSets and move
    `legacy_pods` (pods `d` owns directly) to them. Returns what it did, or None."""
    by_hash = {hash_of(rs): rs for rs in replica_sets}
    pods_by_hash = {}
    for pod in legacy_pods:
        pods_by_hash.setdefault(hash_of(pod), []).append(pod)
    done = []
    for rev in sorted(revisions, key=lambda r: r.get("revision", 0)):
        hash_ = hash_of(rev)
        pods = pods_by_hash.pop(hash_, [])
        rs = by_hash.get(hash_)
        chunks = [pods[i:i + ADOPT_CHUNK] for i in range(0, len(pods), ADOPT_CHUNK)] or [[]]
        for chunk in chunks:
            if rs is None:
                cause = ((rev.get("metadata") or {}).get("annotations") or {}).get(CHANGE_CAUSE_ANNOTATION)
                rs = new_replica_set(ctl.store, d, hash_, (rev.get("data") or {}).get("template"),
                                     rev.get("revision", 0), len(chunk), cause)
                first = commands.create("replicasets", rs)
            elif chunk:
                spec = dict(rs["spec"], replicas=(rs["spec"].get("replicas") or 0) + len(chunk))
                first = commands.update("replicasets", rs["metadata"]["namespace"], rs["metadata"]["name"],
                                        dict(rs, spec=spec),
                                        precondition={"resourceVersion": rs["metadata"]["resourceVersion"]})
            else:
                continue
            result = ctl.write([first] + [adopt_op(p, rs) for p in chunk])
            rs = result["results"][0]["object"]
        by_hash[hash_] = rs
        done.append("revision %s is replica set %s with %d pods" % (rev.get("revision"), rs["metadata"]["name"],
                                                                    len(pods)))
    leftover = [p for pods in pods_by_hash.values() for p in pods]
    ops = [commands.delete("controllerrevisions", r["metadata"]["namespace"], r["metadata"]["name"],
                           precondition={"uid": r["metadata"]["uid"]}) for r in revisions]
    # Pods of a template no revision recorded (none should exist) move to its ReplicaSet
    # if there is one; the rest are released to the garbage collector's judgement.
    for pod in leftover:
        rs = by_hash.get(hash_of(pod))
        if rs is not None:
            spec = dict(rs["spec"], replicas=(rs["spec"].get("replicas") or 0) + 1)
            result = ctl.write([commands.update("replicasets", rs["metadata"]["namespace"], rs["metadata"]["name"],
                                                dict(rs, spec=spec),
                                                precondition={"resourceVersion": rs["metadata"]["resourceVersion"]}),
                                adopt_op(pod, rs)])
            by_hash[hash_of(pod)] = result["results"][0]["object"]
        else:
            meta = pod["metadata"]
            refs = [r for r in meta.get("ownerReferences") or [] if r.get("controller") is not True]
            new_meta = dict(meta, ownerReferences=refs) if refs else {k: v for k, v in meta.items()
                                                                        if k != "ownerReferences"}
            ops.append(commands.update("pods", meta.get("namespace"), meta["name"], dict(pod, metadata=new_meta),
                                       precondition={"resourceVersion": meta["resourceVersion"]}))
            done.append("released pod %s (no revision of its template)" % meta["name"])
    if ops:
        ctl.write_many([[op] for op in ops])
        if revisions:
            done.append("removed %d controller revisions" % len(revisions))
    return "; ".join(done) or None


def history_to_delete(spec, olds):
    """Old ReplicaSets beyond revisionHistoryLimit that are scaled to 0 with no pods left,
    oldest first (`olds`: Scales)."""
    limit = spec.get("revisionHistoryLimit", 10)
    if limit is None:
        return []
    ordered = sorted(olds, key=lambda s: s.revision)
    excess = len(ordered) - limit
    if excess <= 0:
        return []
    return [s for s in ordered if s.replicas == 0 and s.pods == 0][:excess]
