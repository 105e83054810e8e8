"""The status of a pod from what the agent knows of its containers, handed to the
status writer (status_writer.py) only when it differs from the stored one.

StatusReporter touches only the status writer (submit, drop) and the PodState it
is handed; it knows the runtime's name (container ids) and the node's address.
"""
import logging

from shepherd_ha.model.times import format_time

from . import spec as P
from . import status as S
from .status import TERMINAL

log = logging.getLogger(__name__)


def terminated_of(runtime_name, info, cs=None):
    """lastState/state `terminated` of an exited instance (why the agent killed it, if it did)."""
    message = reason = None
    if cs is not None and cs.kill_for == info.id:
        message, reason = cs.kill_message, cs.kill_reason
    term = S.terminated(info.exit_code, info.started_at, info.finished_at, reason=reason, message=message,
                        container_id="%s://%s" % (runtime_name, info.id), oom_killed=info.oom_killed)
    return term["terminated"]


class StatusReporter:
    def __init__(self, writer, runtime_name, address):
        self.writer = writer            # StatusWriter (submit, drop)
        self.runtime_name = runtime_name
        self.address = address

    def _terminated_of(self, info, cs=None):
        return terminated_of(self.runtime_name, info, cs)

    def container_statuses(self, state, pod):
        out = []
        for c in P.containers_of(pod):
            name = c.get("name")
            image = c.get("image") or ""
            cs = state.containers.get(name)
            if cs is None:
                out.append(S.container_status(name, image, S.waiting("ContainerCreating")))
                continue
            info = cs.instance
            cid = "%s://%s" % (self.runtime_name, info.id) if info is not None else ""
            image_id = ("%s://%s" % (self.runtime_name, info.image_id)) if info is not None and info.image_id else ""
            last = {"terminated": cs.last_terminated} if cs.last_terminated else {}
            if info is not None and info.running:
                ready = cs.killing != info.id and (cs.readiness is None or bool(cs.readiness.result))
                out.append(S.container_status(name, image, S.running(info.started_at), ready, cs.restart_count,
                                              last, image_id, cid, started=True))
            elif cs.waiting is not None and not (state.terminal or cs.final):
                reason, message = cs.waiting
                if info is not None and info.ever_started:
                    last = {"terminated": self._terminated_of(info, cs)}
                out.append(S.container_status(name, image, S.waiting(reason, message), False, cs.restart_count,
                                              last, image_id, cid))
            elif info is not None and info.ever_started:
                out.append(S.container_status(name, image, {"terminated": self._terminated_of(info, cs)}, False,
                                              cs.restart_count, last, image_id, cid))
            elif cs.gone:
                out.append(S.container_status(name, image, {"terminated": cs.gone}, False, cs.restart_count, last))
            else:
                out.append(S.container_status(name, image, S.waiting("ContainerCreating"), False,
                                              cs.restart_count, last))
        return out

    def report(self, state, pod, policy):
        statuses = self.container_statuses(state, pod)
        current = pod.get("status") or {}
        phase = S.pod_phase(policy, statuses, state.terminal or current.get("phase"))
        if phase in TERMINAL and not state.terminal:
            state.terminal = phase
            log.info("pod %s %s", state.key, phase)
        if not state.start_time:
            state.start_time = current.get("startTime") or format_time()
        now = format_time()
        status = S.build_pod_status(pod, statuses, phase, state.pod_ip, self.address, state.start_time, now)
        state.last_status = status
        if S.differs(current, status):
            self.writer.submit(state.uid, status)
        else:
            self.writer.drop(state.uid)
