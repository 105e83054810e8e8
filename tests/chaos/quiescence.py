"""The end of a run: once every fault is healed and the workload stopped, wait until the
cluster is quiet and whole, then read the final state (history lines "final",
"final_generated", "quiescence") and check the cluster invariants the harness owns:
every replica at the same revision with the same store digest, each deployment with
exactly spec.replicas pods, no pod bound to a node that does not exist, and the fenced
rejection counter readable."""
import time

from shepherd_ha.client import ApiError

from .apps import APPS_NAMESPACE, DEPLOYMENTS
from .probes import CTL_DEPLOYMENT, CTL_NAMESPACE, live_pods
from .workload import GENERATED_LABEL, NAMESPACE, value_of

FENCED_METRIC = "shepherd_fsm_fenced_rejections"


def retry(fn, timeout=60.0, what="read"):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except ApiError as exc:
            if exc.code != 503 and exc.code < 500:
                raise
            last = exc
        except Exception as exc:  # noqa: BLE001 - the cluster may still be settling
            last = exc
        if time.monotonic() >= deadline:
            raise RuntimeError("%s failed for %.0f s: %s" % (what, timeout, last))
        time.sleep(0.5)


def final_values(client, keys):
    out = {}
    for key in keys:
        def read(key=key):
            try:
                return value_of(client.get("configmaps", key, namespace=NAMESPACE))
            except ApiError as exc:
                if exc.code == 404:
                    return None
                raise
        out[key] = retry(read, what="final read of %s" % key)
    return out


def generated_counts(client):
    items = retry(lambda: client.list("configmaps", namespace=NAMESPACE), what="list of generated objects")["items"]
    counts = {}
    for item in items:
        op = ((item.get("metadata") or {}).get("labels") or {}).get(GENERATED_LABEL)
        if op is not None:
            counts[op] = counts.get(op, 0) + 1
    return counts


def deployments_settled(client, timeout=90.0):
    """{name: {"want", "have"}} once every deployment has its pods (or at the timeout)."""
    targets = [(APPS_NAMESPACE, n) for n in DEPLOYMENTS] + [(CTL_NAMESPACE, CTL_DEPLOYMENT)]
    deadline = time.monotonic() + timeout
    while True:
        result = {}
        for ns, name in targets:
            try:
                want = client.get("deployments", name, namespace=ns)["spec"]["replicas"]
                have = len(live_pods(client, ns, name))
            except Exception:  # noqa: BLE001 - settling
                want = have = None
            result[name] = {"want": want, "have": have}
        if all(r["want"] is not None and r["want"] == r["have"] for r in result.values()) \
                or time.monotonic() >= deadline:
            return result
        time.sleep(0.5)


def pods_on_missing_nodes(client):
    nodes = {n["metadata"]["name"] for n in retry(lambda: client.list("nodes"), what="node list")["items"]}
    pods = retry(lambda: client.list("pods"), what="pod list")["items"]
    return [p["metadata"]["namespace"] + "/" + p["metadata"]["name"] for p in pods
            if (p.get("spec") or {}).get("nodeName") and p["spec"]["nodeName"] not in nodes]


def same_revision(cluster, timeout=60.0):
    """{"revisions", "digests"} of the first reading where every replica reports the same
    revision (then the digests must be equal too), or the last reading at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        states = cluster.states(digest=True, timeout=5.0)
        revisions = {i: s and s["revision"] for i, s in states.items()}
        digests = {i: s and s.get("digest") for i, s in states.items()}
        if (len(set(revisions.values())) == 1 and None not in revisions.values()) or time.monotonic() >= deadline:
            return {"revisions": revisions, "digests": digests}
        time.sleep(0.3)


def quiesce(cluster, client, say=print):
    """Wait for the cluster to be whole and quiet; returns the quiescence record."""
    cluster.wait_ready(120)
    say("  cluster whole again; waiting for the deployments to settle")
    deployments = deployments_settled(client)
    missing = pods_on_missing_nodes(client)
    say("  deployments %s; stopping the agents so the store goes quiet" % ", ".join(
        "%s %s/%s" % (n, d["have"], d["want"]) for n, d in sorted(deployments.items())))
    cluster.stop_agents()   # their lease renewals and status writes would move the revision forever
    revisions = same_revision(cluster)
    fenced = [cluster.metric(i, FENCED_METRIC) for i in cluster.ids()]
    fenced = [v for v in fenced if v is not None]
    return dict(revisions, deployments=deployments, pods_on_missing_nodes=len(missing),
                pods_on_missing_nodes_sample=missing[:5], fenced_rejections=int(max(fenced)) if fenced else None)


def quiescence_checks(q):
    """[(name, passed, detail)] of the cluster invariants."""
    if "error" in q:
        return [("the cluster became whole and quiet at the end", False, q["error"])]
    revs = set(q["revisions"].values())
    digests = set(q["digests"].values())
    return [
        ("same revision on every replica", len(revs) == 1 and None not in revs, str(q["revisions"])),
        ("same store digest on every replica", len(digests) == 1 and None not in digests,
         ", ".join("%s %s" % (i, (d or "none")[:12]) for i, d in sorted(q["digests"].items()))),
        ("each deployment has exactly spec.replicas pods",
         all(d["want"] is not None and d["want"] == d["have"] for d in q["deployments"].values()),
         ", ".join("%s %s/%s" % (n, d["have"], d["want"]) for n, d in sorted(q["deployments"].items()))),
        ("no pod bound to a missing node", q["pods_on_missing_nodes"] == 0,
         "%d %s" % (q["pods_on_missing_nodes"], q.get("pods_on_missing_nodes_sample") or "")),
        ("fenced rejection counter readable", q["fenced_rejections"] is not None,
         "%s controller writes refused for a stale epoch" % q["fenced_rejections"]),
    ]
