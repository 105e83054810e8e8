"""Converging one container of a running pod: adopt an instance found after an
agent restart, kill it when its definition changed or its liveness probe failed,
and restart it per restartPolicy with the crash-loop backoff. Probe states belong to
one instance of the container (agent/prober.py runs them).

ContainerSync touches the runtime (removing a never-started instance), the Event
sink, the starter (container_start.py), the stopper (container_stop.py) and the
prober; it updates the ContainerState it is handed.
"""
from shepherd_ha.model.times import format_time, parse_seconds

from . import backoff as B
from . import labels as L
from . import status as S
from .container_start import attach_probes, drop_probes
from .status_report import terminated_of


class ContainerSync:
    def __init__(self, runtime, events, starter, stopper, prober=None):
        self.runtime = runtime
        self.events = events
        self.starter = starter          # ContainerStarter
        self.stopper = stopper          # ContainerStopper
        self.prober = prober

    def _terminated_of(self, info, cs):
        return terminated_of(self.runtime.name, info, cs)

    def sync(self, state, pod, c, cs, latest, policy, sandbox_id, now, kept=None):
        """Converge one container; returns seconds until it needs another look, or None.
        `kept` is the exited instance kept before `latest` (for `logs --previous`)."""
        name = c.get("name")
        if latest is not None and latest.state == "created" and not latest.ever_started:
            # created and never started: the agent died between create and start, or a
            # refused start; it is started again from scratch
            self.runtime.remove(latest.id)
            latest = None
            if cs.instance is not None and not cs.instance.ever_started:
                cs.instance = None

        if latest is None and cs.instance is not None and cs.instance.running and not state.terminal:
            # the running instance vanished (removed outside the agent): it counts as killed
            gone = cs.instance
            cs.gone = S.terminated(137, gone.started_at, format_time(), reason="ContainerMissing",
                                   message="the container was removed outside the agent",
                                   container_id="%s://%s" % (self.runtime.name, gone.id))["terminated"]
            cs.instance = None
            drop_probes(cs)
            if not B.should_restart(policy, 137):
                cs.final = True
                return None
            return self.starter.start(state, pod, c, cs, cs.restart_count + 1, sandbox_id, cs.gone, now)

        if latest is not None:
            if cs.instance is None and cs.last_terminated is None:
                # adopted after an agent restart: its history is in its labels
                cs.last_terminated = L.last_state_of(latest.labels)
                cs.backoff.level = max(cs.backoff.level, L.restart_count_of(latest.labels))
            cs.restart_count = max(cs.restart_count, L.restart_count_of(latest.labels))
            cs.instance = latest
            cs.gone = None

        if latest is not None and latest.running:
            cs.waiting = None
            cs.final = None
            cs.retry_backoff.reset()
            attach_probes(self.prober, c, cs, latest)
            if cs.killing == latest.id:
                return None
            if latest.labels.get(L.SPEC_HASH) not in (None, L.spec_hash(c)):
                self.stopper.kill_async(state, cs, latest, "Killing",
                                 "Container %s definition changed, will be restarted" % name)
                return None
            if cs.liveness is not None and cs.probe_instance == latest.id and not cs.liveness.result:
                self.stopper.kill_async(state, cs, latest, "Error",
                                 "Container %s failed liveness probe, will be restarted: %s"
                                 % (name, cs.liveness.message))
                return None
            return None

        if latest is not None:          # exited (or dead)
            drop_probes(cs)
            if cs.killing == latest.id:
                cs.killing = None
            if state.terminal:
                return None
            exit_code = latest.exit_code if latest.exit_code is not None else 0
            if not B.should_restart(policy, exit_code):
                cs.final = True
                cs.waiting = None
                return None
            if cs.backoff_for != latest.id:
                started = parse_seconds(latest.started_at)
                finished = parse_seconds(latest.finished_at)
                ran_for = (finished - started) if started and finished else None
                cs.current_delay = cs.backoff.next_delay(ran_for)
                cs.retry_at = now + cs.current_delay
                cs.backoff_for = latest.id
                if cs.current_delay > 0 and not cs.retry_pending:
                    self.events.emit(pod, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)"
                                     % (name, state.name, state.namespace, state.uid), "Warning", name)
            if now < cs.retry_at:
                if cs.retry_pending:
                    return cs.retry_at - now      # a refused restart keeps its own reason
                cs.waiting = ("CrashLoopBackOff", "back-off %s restarting failed container=%s pod=%s_%s(%s)"
                              % (B.human_seconds(cs.current_delay), name, state.name, state.namespace, state.uid))
                return cs.retry_at - now
            if kept is not None:
                # `latest` becomes the previous instance: the one kept before it goes first,
                # so there are never three instances, not even between create and start
                self.runtime.remove(kept.id)
            return self.starter.start(state, pod, c, cs, cs.restart_count + 1, sandbox_id,
                               self._terminated_of(latest, cs), now)

        # no instance at all
        if state.terminal or cs.final:
            return None
        if cs.retry_at is not None and now < cs.retry_at:
            return cs.retry_at - now
        if cs.instance is not None and cs.instance.ever_started:
            # its last instance was removed outside the agent after it exited
            return self.starter.start(state, pod, c, cs, cs.restart_count + 1, sandbox_id,
                               self._terminated_of(cs.instance, cs), now)
        return self.starter.start(state, pod, c, cs, cs.restart_count, sandbox_id, cs.last_terminated, now)
