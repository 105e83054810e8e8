"""Restart decisions and backoff (pure), as the kubelet does them.

A container that exits is restarted according to the pod's restartPolicy:
Always restarts it, OnFailure only after a non-zero exit, Never not at all. The
first restart is immediate; each further one waits twice as long as the previous
(base 10 s, 20 s, 40 s, ... capped at 300 s), and the pod shows the container as
waiting with reason CrashLoopBackOff meanwhile. A container that ran for
`reset_after` seconds (default 600, kubelet's 2 x cap) before exiting starts the
sequence again. The doubling is shepherd_ha/backoff.py's, as every retry loop's.
"""
import dataclasses

from shepherd_ha.backoff import doubling

DEFAULT_BASE = 10.0
DEFAULT_CAP = 300.0
DEFAULT_RESET_AFTER = 600.0

RESTART_POLICIES = ("Always", "OnFailure", "Never")


def should_restart(policy, exit_code):
    """Whether a container that exited with exit_code is started again."""
    if policy == "Never":
        return False
    if policy == "OnFailure":
        return exit_code != 0
    return True      # Always, and anything unknown (validation refuses it anyway)


def delay(level, base=DEFAULT_BASE, cap=DEFAULT_CAP):
    """Seconds to wait before the restart at `level` (0: the first of a series)."""
    if level <= 0:
        return 0.0
    return doubling(base, cap, level - 1)


@dataclasses.dataclass
class Backoff:
    """The backoff of one container (or of image pulls / creation failures)."""
    base: float = DEFAULT_BASE
    cap: float = DEFAULT_CAP
    reset_after: float = DEFAULT_RESET_AFTER
    level: int = 0

    def next_delay(self, ran_for=None):
        """The delay before the next attempt after a failure, and count the failure.
        ran_for: how long the failed instance ran (a long run resets the series)."""
        if ran_for is not None and ran_for >= self.reset_after:
            self.level = 0
        d = delay(self.level, self.base, self.cap)
        self.level += 1
        return d

    def peek(self):
        """The delay next_delay() would give now, without counting."""
        return delay(self.level, self.base, self.cap)

    def reset(self):
        self.level = 0


def human_seconds(seconds):
    """10 -> '10s', 80 -> '1m20s', 300 -> '5m0s' (as kubelet prints durations)."""
    seconds = int(round(seconds))
    if seconds < 60:
        return "%ds" % seconds
    return "%dm%ds" % (seconds // 60, seconds % 60)
