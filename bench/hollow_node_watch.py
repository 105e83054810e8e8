"""An agent-shaped pod watch for each hollow node, on asyncio: what 1,000 real agents
ask of the API (agent/pod_watch.py), from one process.

Each node lists the pods bound to it (fieldSelector spec.nodeName=N), then watches them
from the list's revision with bookmarks, on its home replica and with the agent's
User-Agent (so the server counts it in the agents' pool of watch slots). A watch that
ends (its timeoutSeconds, a replica going away) resumes from the last revision it saw,
on the next replica after a failure or a 429 (which also waits its Retry-After); a 410
lists again. Every pod event goes to `on_event(type, pod)`. Only the node agent's pod
watch is modelled: a real agent also watches nodes (pod network) and Services and
Endpoints (cluster DNS), which these do not add.
"""
import asyncio
import json
import logging
import time
from urllib.parse import quote

from async_http import AsyncConnection, HttpError, host_port

AGENT = "shepherd-agent/hollow"
WATCH_SECONDS = 300         # the server ends a watch after this; it resumes at once
READ_TIMEOUT = 30.0         # bookmarks come every 5 s: silence this long means the replica is gone
MIN_PAUSE = 0.2             # between two tries of one node's watch, whatever the server said
log = logging.getLogger("hollow_node_watch")


class WatchStats:
    def __init__(self):
        self.opened = 0
        self.events = 0
        self.relists = 0
        self.throttled = 0
        self.errors = 0
        self.crashes = 0        # bugs: an exception nobody expected (logged; the watch resumes)


class Expired(Exception):
    """The server answered 410: list again."""


async def follow_node(urls, node, home, on_event, stop, stats, timeout=10.0):
    """Watch `node`'s pods until `stop` (an asyncio.Event) is set."""
    rv, attempt = None, 0
    selector = quote("spec.nodeName=%s" % node, safe="")
    deadline = time.monotonic() + 24 * 3600        # bounded even if nobody stops us
    while not stop.is_set() and time.monotonic() < deadline:
        url = urls[(home + attempt) % len(urls)]
        pause = MIN_PAUSE
        try:
            if rv is None:
                rv = await _list(url, selector, on_event, timeout)
            rv = await _watch(url, selector, rv, on_event, stop, stats)
        except Expired:
            stats.relists += 1
            rv = None
        except _Throttled as exc:
            stats.throttled += 1
            attempt += 1                  # another replica, after the wait the server asked for
            pause = max(pause, min(10.0, exc.seconds))
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                HttpError, ValueError):      # transport and protocol; anything else is a bug (below)
            stats.errors += 1
            attempt += 1
            pause = 1.0
        except asyncio.CancelledError:
            raise
        except Exception:       # noqa: BLE001 - a bug here must not end this node's watch unseen
            stats.crashes += 1
            if stats.crashes <= 3:
                log.exception("watch of node %s failed", node)
            attempt += 1
            pause = 1.0
        await _pause(stop, pause)


class _Throttled(Exception):
    def __init__(self, seconds):
        super().__init__(seconds)
        self.seconds = seconds


async def _pause(stop, seconds):
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except asyncio.TimeoutError:
        pass


async def _list(url, selector, on_event, timeout):
    conn = AsyncConnection(url, timeout)
    try:
        code, body = await conn.request("GET", "/api/v1/pods?fieldSelector=%s" % selector)
    finally:
        conn.close()
    if code == 429:
        raise _Throttled(1.0)
    if code != 200:
        raise HttpError("list: HTTP %s" % code)
    listing = json.loads(body)
    for pod in listing.get("items") or []:
        on_event("ADDED", pod)
    return listing["metadata"]["resourceVersion"]


async def _watch(url, selector, rv, on_event, stop, stats):
    """Follow one watch to its end; the revision to resume from."""
    host, port = host_port(url)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), READ_TIMEOUT)
    try:
        writer.write(("GET /api/v1/pods?watch=1&allowWatchBookmarks=true&fieldSelector=%s&resourceVersion=%s"
                      "&timeoutSeconds=%d HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: %s\r\n\r\n"
                      % (selector, rv, WATCH_SECONDS, host, port, AGENT)).encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
        code = int(head.split(b" ", 2)[1])
        if code == 410:
            raise Expired()
        if code == 429:
            raise _Throttled(float(_header(head, b"retry-after") or 1.0))
        if code != 200 or b"chunked" not in head.lower():
            raise HttpError("watch: HTTP %d" % code)
        stats.opened += 1
        pending = b""
        while not stop.is_set():
            size_line = await asyncio.wait_for(reader.readuntil(b"\r\n"), READ_TIMEOUT)
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                return rv                        # the server ended it (timeoutSeconds)
            pending += (await asyncio.wait_for(reader.readexactly(size + 2), READ_TIMEOUT))[:-2]
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        raise Expired()
                    raise HttpError("watch error: %s" % obj.get("message"))
                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                if event.get("type") != "BOOKMARK":
                    stats.events += 1
                    on_event(event["type"], obj)
        return rv
    finally:
        writer.close()


def _header(head, name):
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().decode()
    return None
