"""The child PySyncObj forks to write a snapshot must die with its replica.

PySyncObj writes its full dump from a forked child (so the replica keeps serving).
If the replica is SIGKILLed meanwhile, the orphaned child lives on: it holds the
replica's inherited sockets (the restarted replica cannot bind its API port) and,
worse, it may finish later and replace the dump a restarted replica has written
since, with an older one, after that replica trimmed its journal to its own dump:
acknowledged writes would then be missing on the next start.

So every child forked in a replica process asks the kernel to SIGKILL it when its
parent dies (PR_SET_PDEATHSIG), and exits at once if the parent is already gone.
"""
import ctypes
import logging
import os
import signal
import sys

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_installed_for = None     # the PID that registered the hook
_prctl = None             # looked up once in the parent: the child only calls it


def _die_with_parent():
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != _installed_for:
        os._exit(1)       # the replica died between fork() and prctl(): nothing to write for


def install():
    """Make children forked from now on in this process die with it (Linux; elsewhere a no-op)."""
    global _installed_for, _prctl
    if not sys.platform.startswith("linux") or _installed_for == os.getpid():
        return False
    try:
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        log.warning("prctl not available: a snapshot child may outlive a killed replica")
        return False
    _installed_for = os.getpid()
    os.register_at_fork(after_in_child=_die_with_parent)
    return True
