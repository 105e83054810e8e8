"""Converging one container of a running pod: adopt an instance found after an
agent restart, kill it when its definition changed or its liveness probe failed,
and restart it per restartPolicy with the crash-loop backoff. Probe states belong to
one instance of the container (agent/prober.py runs them).

A mixin of PodManager (agent/pods.py), whose attributes it uses.
"""
from . import backoff as B
from . import labels as L
from . import status as S


class ContainerSyncMixin:
    def _sync_container(self, state, pod, c, cs, latest, policy, sandbox_id, now):
        """Converge one container; returns seconds until it needs another look, or None."""
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
            cs.gone = S.terminated(137, gone.started_at, S.rfc3339(), reason="ContainerMissing",
                                   message="the container was removed outside the agent",
                                   container_id="%s://%s" % (self.runtime.name, gone.id))["terminated"]
            cs.instance = None
            self._drop_probes(cs)
            if not B.should_restart(policy, 137):
                cs.final = True
                return None
            return self._start(state, pod, c, cs, cs.restart_count + 1, sandbox_id, cs.gone, now)

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
            self._ensure_probes(state, c, cs, latest)
            if cs.killing == latest.id:
                return None
            if latest.labels.get(L.SPEC_HASH) not in (None, L.spec_hash(c)):
                self._kill_async(state, cs, latest, "Killing",
                                 "Container %s definition changed, will be restarted" % name)
                return None
            if cs.liveness is not None and cs.probe_instance == latest.id and not cs.liveness.result:
                self._kill_async(state, cs, latest, "Error",
                                 "Container %s failed liveness probe, will be restarted: %s"
                                 % (name, cs.liveness.message))
                return None
            return None

        if latest is not None:          # exited (or dead)
            self._drop_probes(cs)
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
                started = S.parse_rfc3339(latest.started_at)
                finished = S.parse_rfc3339(latest.finished_at)
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
            return self._start(state, pod, c, cs, cs.restart_count + 1, sandbox_id,
                               self._terminated_of(latest, cs), now)

        # no instance at all
        if state.terminal or cs.final:
            return None
        if cs.retry_at is not None and now < cs.retry_at:
            return cs.retry_at - now
        if cs.instance is not None and cs.instance.ever_started:
            # its last instance was removed outside the agent after it exited
            return self._start(state, pod, c, cs, cs.restart_count + 1, sandbox_id,
                               self._terminated_of(cs.instance, cs), now)
        return self._start(state, pod, c, cs, cs.restart_count, sandbox_id, cs.last_terminated, now)

    def _ensure_probes(self, state, c, cs, info):
        if cs.probe_instance == info.id:
            return
        cs.probe_instance = info.id
        cs.readiness = cs.liveness = None
        if self.prober is None:
            return
        cs.readiness = self.prober.state_for(c.get("readinessProbe"), "readiness")
        cs.liveness = self.prober.state_for(c.get("livenessProbe"), "liveness")

    def _drop_probes(self, cs):
        cs.probe_instance = None
        cs.readiness = cs.liveness = None
