"""`shepherd-ha server`'s own process: no Raft, no HTTP; it runs the replica's processes.

- the store process (Raft, FSM, journal, group commit; store/store_service.py),
- N API workers (waitress + Flask over a RemoteReplica; the controllers in worker 0),
- with TLS, N terminators (shepherd_ha/tls/terminator.py): terminator i holds the API port
  (SO_REUSEPORT) and pipes to worker i's Unix socket; a process of its own, so the TLS
  I/O never waits for the GIL behind Flask.

Each child is forked from the supervisor once it has imported everything and
resolved the configuration (no exec): the children share those pages with it
(copy on write; gc.freeze() first, so the collector does not touch them), which is
most of an idle replica's memory, and a restart takes no new interpreter. Every
child asks the kernel to SIGKILL it when the supervisor dies (PR_SET_PDEATHSIG): a SIGKILLed server leaves
no process holding its ports. A dead API worker is restarted; a dead store process
is restarted too (it recovers from its journal) while the workers answer /readyz
503 "store process unreachable". A child that keeps dying (more than
MAX_RESTARTS within RESTART_WINDOW s) makes the whole replica exit 1, for its own
supervisor (systemd, the test harness) to see. SIGTERM/SIGINT: workers first, then
the store (a clean PySyncObj stop).
"""
import ctypes
import gc
import logging
import os
import signal
import socket
import sys
import time
import traceback

from shepherd_ha.store import local_protocol

log = logging.getLogger("shepherd_ha.supervisor")

STORE_START_TIMEOUT = 120.0       # the store replays its journal before it opens its socket
MAX_RESTARTS, RESTART_WINDOW = 5, 60.0
STOP_TIMEOUT = 10.0
POLL = 0.1

_prctl = None


def _die_with_parent(parent):
    if _prctl is not None:
        _prctl(1, signal.SIGKILL, 0, 0, 0)          # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)                                 # the supervisor died before prctl


class Forked:
    """A forked child, with the part of Popen's interface the supervisor uses."""

    def __init__(self, pid):
        self.pid, self.returncode = pid, None

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, sig):
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def socket_path(data_dir):
    """The store socket: in the data dir, or a private temp dir when that path is too
    long for a Unix socket (108 bytes)."""
    path = os.path.join(os.path.abspath(data_dir), "run", local_protocol.SOCKET_NAME)
    if len(path.encode()) < 100:
        return path
    import tempfile
    return os.path.join(tempfile.mkdtemp(prefix="shepherd-ha-"), local_protocol.SOCKET_NAME)


# On a saturated machine the store process (the Raft tick: a heartbeat late by the
# election timeout is an election) gets the CPU before the API (workers and their TLS
# terminators). Raising one's own niceness needs no privilege; at +3 a busy API thread
# weighs about half a nice-0 one. Lowering it (the store's -10: a busy thread of it
# weighs 18 API threads) needs root or CAP_SYS_NICE; without, the store keeps its
# niceness and the order still holds. At 1,000 hollow nodes the API workers kept 30-55
# threads runnable, and the store's tick waited behind them (gaps of 0.6-1.3 s).
# PySyncObj's dumps were written by a child the store forked, run at +10 after the API
# (run T); since run AB a thread of the store writes them at the store's priority (a
# lowered thread would hold the GIL the Raft tick waits for: dump_writer.py).
NICENESS = {"store": -10, "api": 3, "tls": 3}


def _set_priority(role):
    step = NICENESS.get(role, 0)
    if step:
        try:
            os.nice(step)
        except OSError as exc:
            log.warning("%s keeps its priority (nice %+d: %s)", role, step, exc)


class _Child:
    def __init__(self, name, role, worker=None):
        self.name, self.role, self.worker = name, role, worker
        self.proc = None
        self.deaths = []


class Supervisor:
    def __init__(self, child_main, api_workers, data_dir, tls=False):
        self.child_main = child_main      # (role, worker index, socket path) -> exit code, in the child
        self.path = socket_path(data_dir)
        self.store = _Child("store", "store")
        self.workers = [_Child("api-%d" % i, "api", i) for i in range(api_workers)]
        self.workers += [_Child("tls-%d" % i, "tls", i) for i in range(api_workers if tls else 0)]
        self.stopping = False

    def _spawn(self, child):
        global _prctl
        if _prctl is None and sys.platform.startswith("linux"):
            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:                      # the child: never returns into the supervisor
            code = 1
            try:
                _die_with_parent(parent)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                # A terminal's Ctrl-C reaches the whole group: the supervisor alone handles it
                # (workers, then the store), or it might restart a child that stopped first.
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                _set_priority(child.role)
                code = self.child_main(child.role, child.worker or 0, self.path)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code or 0)
        child.proc = Forked(pid)
        log.info("started %s (pid %d)", child.name, pid)

    def _store_listening(self):
        try:
            local_protocol.connect(self.path, timeout=1.0).close()
            return True
        except (OSError, EOFError, local_protocol.ProtocolError):
            return False

    def _wait_store(self):
        """Exit code of a store that died while starting, or None once its socket answers."""
        deadline = time.monotonic() + STORE_START_TIMEOUT
        while time.monotonic() < deadline and not self.stopping:
            code = self.store.proc.poll()
            if code is not None:
                return code
            if self._store_listening():
                return None
            time.sleep(POLL)
        return None if self.stopping else 1

    def run(self):
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        gc.collect()
        gc.freeze()                       # what the children inherit stays shared
        self._spawn(self.store)
        code = self._wait_store()
        if code is not None:
            log.error("the store process exited (%d) before it served its socket", code)
            self._stop_all()              # a store still starting when the wait ran out goes too
            return code or 1
        if self.stopping:
            self._stop_all()
            return 0
        for worker in self.workers:
            self._spawn(worker)
        started = time.monotonic()
        while not self.stopping:
            time.sleep(POLL)
            for child in [self.store] + self.workers:
                code = child.proc.poll()
                if code is None or self.stopping:
                    continue
                if code == 2 and time.monotonic() - started < 15:
                    log.error("%s could not start (exit 2): stopping the replica", child.name)
                    self._stop_all()
                    return 2
                now = time.monotonic()
                child.deaths = [t for t in child.deaths if now - t < RESTART_WINDOW] + [now]
                if len(child.deaths) > MAX_RESTARTS:
                    log.error("%s died %d times within %.0f s: stopping the replica", child.name,
                              len(child.deaths), RESTART_WINDOW)
                    self._stop_all()
                    return 1
                log.warning("%s (pid %d) exited with %d: restarting it", child.name, child.proc.pid, code)
                self._spawn(child)
        self._stop_all()
        return 0

    def _on_signal(self, signum, frame):
        if not self.stopping:
            log.info("signal %d: stopping the replica's processes", signum)
        self.stopping = True

    def _stop_all(self):
        for group in (self.workers, [self.store]):
            live = [c.proc for c in group if c.proc is not None and c.proc.poll() is None]
            for proc in live:
                proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            for proc in live:
                if proc.wait(max(0.1, deadline - time.monotonic())) is None:
                    proc.kill()
                    proc.wait(5.0)


def reuse_port_socket(host, port):
    """A listening socket that N workers bind together (the kernel spreads connections)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(1024)
    return sock
