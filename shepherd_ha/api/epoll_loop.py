"""waitress's event loop on epoll, telling the kernel only what changed.

waitress's own poll() loop (wasyncore.poll2) builds a new poll set of every open
connection on every turn, and the kernel then scans all of them: at 1,000 hollow
nodes (about 700 keep-alive connections per API worker) that loop held the worker's
GIL 44 % of the time, 18 % in poll2's own lines (py-spy --gil; docs/benchmarks.md).
This loop asks each channel the same readable()/writable() questions every turn, as
poll2 does, but keeps one epoll set and calls epoll.modify only for the channels
whose answer changed, and epoll_wait costs what is ready, not what is open.

A quiet connection (an agent's keep-alive between renewals: no request, nothing
buffered, nothing to close) is parked: left registered for reading and not asked
again until the kernel reports it, or until the next full pass (every
FULL_PASS_SECONDS), which sees what waitress's maintenance changed behind it (an idle
connection marked to close). Only the loop thread changes a quiet channel: a task
exists only while a request does. Between full passes a turn looks only at the
channels that are awake (not parked, or with an event since) and at those added to
the map since (`ChannelMap`, the map `serve` gives waitress): with ~700 parked
connections, copying the whole map on every turn was 5 % of an API worker's CPU at
1,000 hollow nodes (py-spy --gil, session 17).

Semantics kept from poll2: level-triggered; a channel that wants neither reading nor
writing is not in the set (so its hangup is seen once it asks again); the event bits
are poll's (EPOLLIN == POLLIN...), handed to wasyncore.readwrite unchanged.

One difference: an HTTP channel whose request's task is running is not polled for
writing while the task holds the channel's output lock (the task flushes its own
writes under it): handle_write would try the lock, fail and send nothing, and a
level-triggered loop would turn on that socket until the task lets go. Cheap turns
made that a spin (8 clients: 36,890 writable events for 384 responses) holding the
GIL the task needed. The task pulls waitress's trigger while it still holds the lock,
so nothing wakes the loop when it lets go: while any channel is skipped so, the loop
looks again within BUSY_RECHECK_SECONDS. Above the output high-water mark the task
waits on that lock for the loop to flush (waitress's _flush_outbufs_below_high_watermark),
so such a channel is polled for writing whoever holds the lock.
"""
import errno
import importlib.metadata
import select
import threading
import time

from waitress import wasyncore
from waitress.channel import HTTPChannel

# What wants_write reads of a waitress 3 HTTPChannel (handle_write's precondition);
# checked here, so an upgrade that moves them fails at import instead of spinning.
_WAITRESS = importlib.metadata.version("waitress")
if not _WAITRESS.startswith("3."):
    raise ImportError("api/epoll_loop.py reads waitress 3's HTTPChannel; found waitress %s" % _WAITRESS)
for _name in ("handle_write", "writable", "_flush_some_if_lockable", "_flush_outbufs_below_high_watermark",
              "request", "will_close", "close_when_flushed", "total_outbufs_len"):
    if not hasattr(HTTPChannel, _name):
        raise ImportError("api/epoll_loop.py: waitress's HTTPChannel has no %r any more" % _name)

_READ = select.EPOLLIN | select.EPOLLPRI
_WRITE = select.EPOLLOUT
FULL_PASS_SECONDS = 0.5
BUSY_RECHECK_SECONDS = 0.02


class EpollLoop:
    """What a waitress server calls as `self.asyncore`: `loop` is ours, the rest
    (dispatcher, readwrite...) is wasyncore's."""

    def __getattr__(self, name):
        return getattr(wasyncore, name)

    def loop(self, timeout=30.0, use_poll=False, map=None, count=None):
        state = LoopState()
        try:
            while map and (count is None or count > 0):
                self.turn(state, map, timeout)
                if count is not None:
                    count -= 1
        finally:
            state.epoll.close()

    @staticmethod
    def turn(state, map, timeout):
        epoll, registered, parked, awake = state.epoll, state.registered, state.parked, state.awake
        now = time.monotonic()
        added = getattr(map, "take_added", None)
        full = now >= state.next_full_pass or added is None
        if full:
            parked.clear()
            awake.clear()
            state.next_full_pass = now + FULL_PASS_SECONDS
            if added is not None:
                added()
            candidates = list(map.items())
        else:
            candidates = [(fd, map.get(fd)) for fd in awake.keys() | added()]
        busy = False
        for fd, obj in candidates:
            if obj is None:                  # closed since: the full pass forgets its registration
                awake.pop(fd, None)
                continue
            if parked.get(fd) is obj:
                continue
            flags = 0
            if obj.readable():
                flags |= _READ
            want = wants_write(obj)
            if want is BUSY:
                busy = True
            elif want:
                flags |= _WRITE
            if flags == _READ and _quiet(obj):
                parked[fd] = obj
                awake.pop(fd, None)
            else:
                awake[fd] = obj
            known = registered.get(fd)
            if known is not None and known[0] is obj and known[1] == flags:
                continue
            if known is not None:
                _forget(epoll, fd)       # another channel on a reused fd, or new interest
            if flags:
                try:
                    epoll.register(fd, flags)
                except FileExistsError:  # still in the set under an old channel's close: take it over
                    epoll.modify(fd, flags)
                except OSError as exc:   # closed under us: the map drops it soon
                    if exc.errno not in (errno.EBADF, errno.ENOENT):
                        raise
                    registered.pop(fd, None)
                    continue
            registered[fd] = (obj, flags)
        if full:
            for fd in [fd for fd in registered if fd not in map]:
                _forget(epoll, fd)
                del registered[fd]
        if busy:
            timeout = BUSY_RECHECK_SECONDS if timeout is None else min(timeout, BUSY_RECHECK_SECONDS)
        try:
            ready = epoll.poll(timeout if timeout is not None else -1)
        except InterruptedError:
            return
        for fd, flags in ready:
            parked.pop(fd, None)
            obj = map.get(fd)
            if obj is not None:
                awake[fd] = obj              # asked again next turn
                wasyncore.readwrite(obj, flags)


class LoopState:
    def __init__(self):
        self.epoll = select.epoll()
        self.registered = {}             # fd -> (channel, flags) as the kernel has it
        self.parked = {}                 # fd -> quiet channel not asked again until an event
        self.awake = {}                  # fd -> channel asked on every turn (not parked)
        self.next_full_pass = 0.0


class ChannelMap(dict):
    """waitress's socket map (fd -> channel) noting the descriptors added to it, so a
    turn between full passes need not look at every channel. wasyncore adds a channel
    with `map[fd] = channel`; it may run on another thread (a channel made by a task),
    hence the swap under a lock."""

    def __init__(self):
        super().__init__()
        self._added = set()
        self._lock = threading.Lock()

    def __setitem__(self, fd, channel):
        super().__setitem__(fd, channel)
        with self._lock:
            self._added.add(fd)

    def take_added(self):
        """The descriptors added since the last call."""
        with self._lock:
            added, self._added = self._added, set()
        return added


def _quiet(obj):
    """An HTTP channel with no request, nothing buffered and nothing to close: only an
    event on its socket (or the loop thread's maintenance) changes what it wants."""
    return (isinstance(obj, HTTPChannel) and not obj.requests and obj.request is None and not obj.total_outbufs_len
            and not obj.will_close and not obj.close_when_flushed and getattr(obj, "lingering_until", None) is None)


BUSY = "busy"     # wants to write, but its task holds the output lock: look again soon


def wants_write(obj):
    """True or False: obj.writable(); BUSY for an HTTP channel whose running task holds
    its output lock below the high-water mark (handle_write would send nothing)."""
    if not obj.writable() or obj.accepting:
        return False
    if not isinstance(obj, HTTPChannel) or not obj.requests:
        return True
    if obj.total_outbufs_len > obj.adj.outbuf_high_watermark:
        return True                  # the task waits on the lock for us to flush
    lock = obj.outbuf_lock
    if lock.acquire(False):
        lock.release()
        return True
    return BUSY


def _forget(epoll, fd):
    try:
        epoll.unregister(fd)
    except OSError:                      # never registered (flags 0) or already closed
        pass


EPOLL_LOOP = EpollLoop()
