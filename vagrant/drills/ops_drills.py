"""The operations drills of issue 17: `roll` (restart every control plane one at a time
while writes go on) and `restore` (snapshot the cluster under writes, restore it into a
fresh cluster, compare every object). Like drills.py they use only the Target interface
and the HTTP API, so the VMs and the network namespaces run the same code.
"""
import contextlib
import io
import os
import shutil
import tempfile
import time

import requests

from drill_kit import (DrillFailed, PROBE_TIMEOUT, is_ready, replica_state, wait_for, wait_leader)
from drills import running_writer


def _leader_commit(target, hosts):
    leader = next((h for h in hosts if (replica_state(target, h) or {}).get("role") == "leader"), None)
    state = replica_state(target, leader) if leader else None
    return state["commitIndex"] if state else None


def roll(target, report):
    """Restart every control plane cleanly, followers first and the leader last; the next
    one only once the restarted one has applied the leader's commit index and every
    replica is ready. Writes go on throughout; the longest gap between acknowledged
    writes is the figure."""
    cps = target.control_planes
    leader, _ = wait_leader(target, cps, target.ready_timeout)
    order = [h for h in cps if h != leader] + [leader]
    with running_writer(target, report, "roll") as writer:
        t_start = time.monotonic()
        for number, host in enumerate(order, start=1):
            role = "leader" if host == leader else "follower"
            report.step("[%d/%d] restarting %s (replica %s, %s)" % (number, len(order), host,
                                                                   target.replica_id(host), role))
            t0 = time.monotonic()
            target.restart(host)
            wait_for("%s answers" % host, lambda: replica_state(target, host), target.boot_timeout)
            others = [h for h in cps if h != host]
            goal, _ = wait_for("a leader's commit index", lambda: _leader_commit(target, cps) or
                               _leader_commit(target, others), target.ready_timeout)
            _, caught = wait_for("%s applies the leader's commit index %d" % (host, goal),
                                 lambda: (replica_state(target, host) or {}).get("appliedIndex", -1) >= goal,
                                 target.ready_timeout)
            wait_for("every replica ready", lambda: all(is_ready(target, h) for h in cps), target.ready_timeout)
            report.figure("%s restart to caught up and all ready" % host, time.monotonic() - t0, "s")
            report.step("[%d/%d] %s applied commit index %d (%.1fs after it answered); every replica ready"
                        % (number, len(order), host, goal, caught))
        report.figure("longest write gap during the roll", writer.gap_around(t_start), "s")
        report.figure("writes acknowledged during the roll", writer.acks_after(t_start))
        final, _ = wait_leader(target, cps, target.ready_timeout)
        report.step("rolled %s; leader now %s" % (", ".join(order), final))
    return report


def _save_snapshot(target, path):
    """sheepctl cluster snapshot save PATH against the target; returns its output line."""
    from ctl.main import main as sheepctl
    argv = ["--server", ",".join(target.api_urls())]
    if target.token():
        argv += ["--token", target.token()]
    if target.ca_file():
        argv += ["--certificate-authority", target.ca_file()]     # the cluster CA: sheepctl verifies it
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = sheepctl(argv + ["cluster", "snapshot", "save", path])
    if code != 0:
        raise DrillFailed("sheepctl cluster snapshot save failed (%d): %s" % (code, err.getvalue().strip()[-300:]))
    return out.getvalue().strip()


def _objects_of(urls, headers, resources, verify=True):
    """{(resource, namespace, name): object} of a cluster, for the given resources (linearizable lists)."""
    from shepherd_ha.model.resources import RESOURCES
    found = {}
    for resource in resources:
        info = RESOURCES[resource]
        prefix = "/api/v1" if info.api_version == "v1" else "/apis/" + info.api_version
        reply = requests.get(urls[0] + prefix + "/" + resource, headers=headers, timeout=10 * PROBE_TIMEOUT,
                             verify=verify)
        if reply.status_code != 200:
            raise DrillFailed("listing %s on the restored cluster: %d %s" % (resource, reply.status_code,
                                                                          reply.text[:200]))
        for obj in reply.json().get("items") or []:
            meta = obj["metadata"]
            found[(resource, meta.get("namespace") or "", meta["name"])] = obj
    return found


def restore(target, report):
    """Save a snapshot while the writer runs, restore it into a fresh cluster, start it,
    and compare: every object of the snapshot there and equal, nothing else, every
    write acknowledged before the snapshot in it, the same store digest on every replica."""
    from shepherd_ha import snapshot_file
    from shepherd_ha.cli import restore as restore_cli
    work = tempfile.mkdtemp(prefix="shepherd-restore-drill-")
    fresh = None
    try:
        with running_writer(target, report, "restore") as writer:
            path = os.path.join(work, "cluster.snap")
            acked_before = dict(writer.acked)
            t0 = time.monotonic()
            line = _save_snapshot(target, path)
            report.figure("snapshot save", time.monotonic() - t0, "s")
            report.step(line)
            wait_for("writes acknowledged after the snapshot", lambda: writer.acks_after(t0) >= 5,
                     target.ready_timeout)
        snap = snapshot_file.read(path)
        report.figure("snapshot objects", snap.header["objects"])
        report.figure("snapshot bytes", os.path.getsize(path))
        names = {o["metadata"]["name"]: o for r, o in snap.objects if r == "configmaps"}
        missing = [n for n, v in acked_before.items() if (names.get(n) or {}).get("data", {}).get("value") != v]
        if missing:
            raise DrillFailed("%d write(s) acknowledged before the snapshot are not in it: %s"
                              % (len(missing), ", ".join(missing[:5])))
        report.step("all %d writes acknowledged before the snapshot are in it" % len(acked_before))
        t1 = time.monotonic()
        fresh = target.fresh_cluster_from(path, os.path.join(work, "restored"))
        report.figure("restore and start of the fresh cluster", time.monotonic() - t1, "s")
        report.step("fresh cluster %s up from the snapshot (%s)" % (fresh.cluster_id(), ", ".join(fresh.api_urls())))
        want = {(r, o["metadata"].get("namespace") or "", o["metadata"]["name"]): o for r, o in snap.objects}
        got = _objects_of(fresh.api_urls(), fresh.auth_headers(), sorted({r for r, _ in snap.objects}), fresh.verify)
        absent = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        changed = sorted(k for k in set(want) & set(got) if want[k] != got[k])
        if absent or extra or changed:
            raise DrillFailed("the restored cluster differs: %d missing (%s), %d extra (%s), %d changed (%s)" % (
                len(absent), absent[:3], len(extra), extra[:3], len(changed), changed[:3]))
        report.step("every one of the %d objects is there and equal, nothing else" % len(want))
        digest = restore_cli.started_digest(snap)
        states = [requests.get(u + "/shepherd/v1/replica", params={"digest": "1"}, headers=fresh.auth_headers(),
                               timeout=10 * PROBE_TIMEOUT, verify=fresh.verify).json() for u in fresh.api_urls()]
        seen = {(s.get("revision"), s.get("digest")) for s in states}
        if seen != {(snap.header["revision"], digest)}:
            raise DrillFailed("restored replicas report %s, the snapshot is revision %d digest %s"
                              % (sorted(seen), snap.header["revision"], digest[:12]))
        report.step("every restored replica at revision %d with the snapshot's digest %s"
                    % (snap.header["revision"], digest[:12]))
    finally:
        if fresh is not None:
            fresh.stop_all(timeout=5.0)
        shutil.rmtree(work, ignore_errors=True)
    return report


DRILLS = {"roll": roll, "restore": restore}
