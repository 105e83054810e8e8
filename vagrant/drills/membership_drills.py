"""Membership drills: replace a replica that died for good, and grow 3 -> 5 -> 3, under the
background writer. The changes go through the API (POST/DELETE /shepherd/v1/members, as
`sheepctl cluster add-replica/remove-replica` sends them); the target only starts a new
host with `--join` and retires a removed one. After every step the drill reads the
membership and checks the quorum is what the member count says.
"""
import time

import requests

from drill_kit import DrillFailed, wait_for, wait_leader
from drills import WRITES_DURING_FAULT, running_writer

CHANGE_TIMEOUT = 60.0


def _call(target, method, path, body=None, timeout=CHANGE_TIMEOUT):
    """One request to the first control plane that answers; (status, body)."""
    errors = []
    for host in target.control_planes:
        try:
            reply = requests.request(method, target.api_url(host) + path, json=body, headers=target.headers(),
                                     timeout=timeout, verify=target.verify())
        except requests.RequestException as exc:
            errors.append("%s: %s" % (host, type(exc).__name__))
            continue
        try:
            return reply.status_code, reply.json()
        except ValueError:
            return reply.status_code, {"message": reply.text[:300]}
    raise DrillFailed("no control plane answered %s %s (%s)" % (method, path, "; ".join(errors)))


def membership(target):
    status, body = _call(target, "GET", "/shepherd/v1/members", timeout=5.0)
    if status != 200:
        raise DrillFailed("GET /shepherd/v1/members: %d %s" % (status, body.get("message")))
    return body


def _check_quorum(target, report, expected_ids):
    info = membership(target)
    ids = sorted(m["id"] for m in info["members"])
    if ids != sorted(expected_ids):
        raise DrillFailed("members are %s, expected %s" % (ids, sorted(expected_ids)))
    if info["quorum"] != len(ids) // 2 + 1:
        raise DrillFailed("quorum %s reported for %d members" % (info["quorum"], len(ids)))
    report.step("members %s: quorum %d of %d" % (", ".join(ids), info["quorum"], len(ids)))
    return info


def _change(target, method, path, body=None, retry_for=CHANGE_TIMEOUT):
    """A change, retried while the answer is a 503 that says 'not now' (leadership moving)."""
    deadline = time.monotonic() + retry_for
    while True:
        status, answer = _call(target, method, path, body)
        if status == 200 or status != 503 or time.monotonic() >= deadline:
            return status, answer
        time.sleep(0.5)


def add(target, report, host, t0):
    entry = target.member_entry(host)
    status, answer = _change(target, "POST", "/shepherd/v1/members", entry)
    if status != 200:
        raise DrillFailed("adding %s (%s) refused: %d %s" % (host, entry["id"], status, answer.get("message")))
    report.figure("add %s answered" % entry["id"], time.monotonic() - t0, "s")

    def caught_up():
        row = next((m for m in membership(target)["members"] if m["id"] == entry["id"]), None)
        return row is not None and (row.get("caughtUp") or row.get("self"))
    _, waited = wait_for("%s caught up with the leader" % entry["id"], caught_up, target.ready_timeout + 60)
    report.figure("%s added to caught up" % entry["id"], waited, "s")
    target.admitted(host)
    return entry["id"]


def remove(target, report, host):
    ident = target.replica_id(host)
    t0 = time.monotonic()
    status, answer = _change(target, "DELETE", "/shepherd/v1/members/" + ident)
    if status not in (200, 404):     # 404: an earlier attempt that timed out did it
        raise DrillFailed("removing %s refused: %d %s" % (ident, status, answer.get("message")))
    report.figure("remove %s answered" % ident, time.monotonic() - t0, "s")
    target.retire(host)
    return ident


def replace_replica(target, report):
    """cp3 is destroyed for good; cp4 at a new address replaces it. Adding first is refused
    (2 of 3 up: a quorum of 3 of 4 would need cp4 before it holds anything), so the dead one
    goes first (2 of 2 up), then cp4 comes in (2 of 3); writes go on; cp4 holds everything."""
    cps = list(target.control_planes)
    victim = cps[-1]
    with running_writer(target, report, "replace-replica") as writer:
        report.step("destroying %s (replica %s) for good" % (victim, target.replica_id(victim)))
        t0 = time.monotonic()
        target.power_off(victim)
        survivors = [h for h in cps if h != victim]
        wait_leader(target, survivors, target.ready_timeout)
        new = target.start_control_plane()
        report.step("%s started with --join (replica %s)" % (new, target.replica_id(new)))
        status, answer = _call(target, "POST", "/shepherd/v1/members", target.member_entry(new))
        if status == 200:
            raise DrillFailed("adding %s while %s is dead was accepted: the quorum of 4 needs the newcomer"
                              % (new, victim))
        report.step("add before remove refused as it should: %d %s" % (status, answer.get("message")))
        remove(target, report, victim)
        _check_quorum(target, report, [target.replica_id(h) for h in survivors])
        add(target, report, new, time.monotonic())
        _check_quorum(target, report, [target.replica_id(h) for h in target.control_planes])
        wait_for("%d writes acknowledged since %s died" % (WRITES_DURING_FAULT, victim),
                 lambda: writer.acks_after(t0) >= WRITES_DURING_FAULT, target.ready_timeout)
        report.figure("longest write gap (no acknowledged write)", writer.gap_around(t0), "s")
    # running_writer checked every acknowledged write and one digest on every member, cp4 included
    report.step("%s holds every acknowledged write (same revision and digest as the others)" % new)
    return report


def grow_shrink(target, report):
    """Grow 3 -> 5 (two new hosts joined and added one at a time) and shrink back to 3 (the
    leader and one more removed), under the writer, checking the quorum at every step."""
    original = list(target.control_planes)
    with running_writer(target, report, "grow-shrink") as writer:
        t0 = time.monotonic()
        for _ in range(2):
            host = target.start_control_plane()
            ident = add(target, report, host, time.monotonic())
            report.step("%s (replica %s) joined" % (host, ident))
            _check_quorum(target, report, [target.replica_id(h) for h in target.control_planes])
        leader, _ = wait_leader(target, target.control_planes, target.ready_timeout)
        gone = [leader] + [h for h in original if h != leader][:1]
        for host in gone:
            report.step("removing %s (replica %s)%s" % (host, target.replica_id(host),
                                                        " - the leader" if host == leader else ""))
            remove(target, report, host)
            wait_leader(target, target.control_planes, target.ready_timeout)
            _check_quorum(target, report, [target.replica_id(h) for h in target.control_planes])
        wait_for("%d writes acknowledged across the changes" % WRITES_DURING_FAULT,
                 lambda: writer.acks_after(t0) >= WRITES_DURING_FAULT, target.ready_timeout)
        report.figure("longest write gap (no acknowledged write)", writer.gap_around(t0), "s")
    return report


DRILLS = {"replace-replica": replace_replica, "grow-shrink": grow_shrink}
