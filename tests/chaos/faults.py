"""Fault injection (the nemesis). Each fault is injected, held, healed, and the cluster is
then given time to be whole again (every replica running and ready, a leader) before the
next one. Every fault heals before it returns, also when it raises.

Kinds:
  kill-leader   SIGKILL the leader; write gap and controller failover measured; restart it
  kill-random   SIGKILL a random replica (maybe the leader); restart it after a moment
  pause         scale a deployment (work for the leader's controllers), SIGSTOP the leader at
                once for longer than the election timeout, then SIGCONT: the deposed leader's
                controllers may write with their old epoch, which fencing must refuse. Whether
                they still had a write to make is a race, so with a controller probe the pause
                is repeated on the new leader (at most PAUSE_ATTEMPTS times, scaling up and
                down in turn) until a refused write is seen
  cut           isolate the leader from the other replicas (iptables in its namespace; clients
                still reach it), then heal; needs the cluster in network namespaces (root)
  full-restart  SIGKILL every replica at once, then start them all
"""
import random
import time

from .probes import CTL_BURST, CTL_LOW
from .quiescence import FENCED_METRIC

KINDS = ("kill-leader", "kill-random", "pause", "cut", "full-restart")
PAUSE_SECONDS = 3.0      # > election_timeout_max (2 s) and > leader_fallback (2 s)
PAUSE_ATTEMPTS = 8       # pauses per pause fault, until one catches a controller write to fence (the
                         # owner index made controller passes short: 4 missed once in CI)
FENCE_WAIT_SECONDS = 3.0  # after a pause, how long the resumed leader's fenced writes may take to show
CUT_SECONDS = 4.0        # > election_timeout_max + a pre-vote round, > leader_fallback (2 s)
DOWN_SECONDS = 1.0       # how long a randomly killed replica stays down
READY_TIMEOUT = 60.0


def schedule(leader_kills, kinds, others, seed):
    """The list of faults to inject: `leader_kills` kill-leader (when that kind is asked for)
    and `others` of each other kind asked for, shuffled with the seed."""
    plan = []
    for kind in kinds:
        plan += [kind] * (leader_kills if kind == "kill-leader" else others)
    random.Random(seed).shuffle(plan)
    return plan


class Nemesis:
    """Injects faults through the cluster's own fault methods only (kill, kill_all, restart,
    pause, resume, isolate, heal, can_cut; ChaosCluster), never its processes or files, so
    another cluster (VMs behind the drills' Target) can stand in by offering the same."""

    def __init__(self, cluster, gap_probe=None, ctl_probe=None, say=print, seed=0):
        self.cluster = cluster
        self.gap_probe = gap_probe
        self.ctl_probe = ctl_probe
        self.say = say
        self.rng = random.Random(seed)
        self.records = []

    def inject(self, kind):
        """Inject one fault and heal it; returns its record (also kept in self.records)."""
        method = getattr(self, "_" + kind.replace("-", "_"))
        started = time.monotonic()
        lead = self.cluster.leader(15.0)
        rec = {"kind": kind, "term_before": lead["term"] if lead else None,
               "leader_before": lead["id"] if lead else None}
        try:
            rec.update(method(lead))
        finally:
            ready_from = time.monotonic()
            restarted = self.cluster.ensure_running()     # a heal step that failed: make it whole
            if restarted:
                rec["restarted_by_harness"] = restarted
            try:
                self.cluster.wait_ready(READY_TIMEOUT)
                rec["ready"] = True
            except Exception as exc:  # noqa: BLE001 - recorded, and the run fails on it
                rec["ready"] = False
                rec["error"] = str(exc)[:300]
                rec["states"] = self.cluster.brief_states()
                for ident, line in sorted(rec["states"].items()):
                    self.say("    %s: %s" % (ident, line))
            rec["ready_after_heal"] = time.monotonic() - ready_from
        after = self.cluster.leader(5.0)
        rec["leader_after"] = after["id"] if after else None
        rec["term_after"] = after["term"] if after else None
        rec["seconds"] = time.monotonic() - started
        self.records.append(rec)
        return rec

    # ---- kinds ----

    def _kill_leader(self, lead):
        if lead is None:
            return {"skipped": "no leader"}
        victim = lead["id"]
        phases = {}
        mark = time.monotonic()

        def phase(name):
            nonlocal mark
            now = time.monotonic()
            phases[name] = round(now - mark, 3)
            mark = now
        if self.gap_probe is not None:
            self.gap_probe.wait_flowing(20.0)
        phase("probe flowing")
        token = None
        if self.ctl_probe is not None:
            try:
                token = self.ctl_probe.arm(victim)
            except Exception as exc:  # noqa: BLE001 - the kill still happens; this figure is missing
                self.say("    controller probe not armed: %s" % exc)
                token = None
        phase("controller probe armed")
        t_kill = time.monotonic()
        killed = self.cluster.kill(victim)
        if token is not None:
            self.ctl_probe.fire()
        out = {"victim": victim, "killed": killed, "phases": phases}
        if self.gap_probe is not None:
            out["gap"] = self.gap_probe.gap_around(t_kill)
        phase("kill and first ack")
        if token is not None:
            out["controllers"] = self.ctl_probe.measure(token, lead["term"], t_kill)
        phase("controller failover measured")
        self.cluster.restart(victim)
        phase("victim restarted")
        return out

    def _kill_random(self, lead):
        victim = self.rng.choice(self.cluster.ids())
        killed = self.cluster.kill(victim)
        time.sleep(DOWN_SECONDS)
        self.cluster.restart(victim)
        return {"victim": victim, "killed": killed, "was_leader": bool(lead and lead["id"] == victim)}

    def _pause(self, lead):
        if lead is None:
            return {"skipped": "no leader"}
        attempts = []
        for n in range(PAUSE_ATTEMPTS):
            if n:     # the last pause healed: whole again, then the same fault on the new leader
                self.cluster.wait_ready(READY_TIMEOUT)
                lead = self.cluster.leader(15.0)
                if lead is None:
                    break
            attempts.append(self._pause_once(lead, CTL_BURST if n % 2 == 0 else CTL_LOW))
            last = attempts[-1]
            # Whether a resumed leader's controllers still had a write to make is a race with
            # how fast they finish the burst; repeat (bounded) until one was caught and fenced.
            if self.ctl_probe is None or not last["controller_burst"] or last["fenced"]:
                break
        return dict(attempts[-1], attempts=len(attempts),
                    fenced=sum(a["fenced"] for a in attempts),
                    victims=[a["victim"] for a in attempts],
                    leaders_during=[a["leader_during"] for a in attempts])

    def _pause_once(self, lead, burst_to):
        victim = lead["id"]
        fenced_before = self._fenced_count()
        burst = self.ctl_probe.burst(burst_to) if self.ctl_probe is not None else False
        paused = self.cluster.pause(victim)
        try:
            time.sleep(PAUSE_SECONDS)
            during = self.cluster.leader_of({i: s for i, s in self.cluster.states().items() if i != victim})
        finally:
            if paused:
                self.cluster.resume(victim)
        fenced = 0
        deadline = time.monotonic() + FENCE_WAIT_SECONDS
        while paused and burst and fenced == 0 and time.monotonic() < deadline:
            fenced = max(0, self._fenced_count() - fenced_before)
            time.sleep(0.1)
        return {"victim": victim, "paused": paused, "seconds_paused": PAUSE_SECONDS, "controller_burst": burst,
                "burst_to": burst_to, "leader_during": during["id"] if during else None, "fenced": fenced}

    def _fenced_count(self):
        """Controller writes refused for a stale epoch, as the replica that saw most reports it."""
        values = [self.cluster.metric(i, FENCED_METRIC) for i in self.cluster.ids()]
        return int(max((v for v in values if v is not None), default=0))

    def _cut(self, lead):
        if not self.cluster.can_cut:
            raise RuntimeError("a cut needs the cluster in network namespaces (root)")
        if lead is None:
            return {"skipped": "no leader"}
        victim = lead["id"]
        self.cluster.isolate(victim)
        try:
            time.sleep(CUT_SECONDS)
            during = self.cluster.leader_of({i: s for i, s in self.cluster.states().items() if i != victim})
            victim_state = self.cluster.state(victim)
        finally:
            removed = self.cluster.heal(victim)
        return {"victim": victim, "seconds_cut": CUT_SECONDS, "rules_removed": removed,
                "leader_during": during["id"] if during else None,
                "victim_role_during": victim_state.get("role") if victim_state else None}

    def _full_restart(self, lead):
        ids = self.cluster.ids()
        self.cluster.kill_all()
        time.sleep(0.5)
        for ident in ids:
            self.cluster.restart(ident)
        return {"victims": ids}
