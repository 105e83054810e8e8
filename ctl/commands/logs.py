"""sheepctl logs POD [-c CONTAINER] [-f] [--tail N] [--timestamps] [-p]

Any replica serves a pod's logs (it proxies to the agent of the pod's node).  When
the replica dies mid-stream the command goes on through another one: the stream is
read with timestamps, so it resumes from the last line printed (sinceTime) and skips
what it already printed; nothing is shown twice.  A follow ends when the container
stops (or on Ctrl-C).
"""
import http.client
import re
import socket
import threading
import time
from datetime import datetime

import requests
import urllib3

from shepherd_ha.client import Client
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.streaming import response_chunks

from ..context import UserError, _ctl_version

TIMESTAMPS_HEADER = "Shepherd-Log-Timestamps"
LOGS_RETRY_DEADLINE = 5.0   # default: an unreachable agent is reported after this, not after 15 s
IDLE_CHECK = 15.0           # a follow silent this long asks its replica whether it is still alive
MAX_RESUMES = 20            # stream breaks survived in a row (without a line in between)

_STREAM_FAILURES = (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError,
                    requests.exceptions.Timeout, urllib3.exceptions.HTTPError, http.client.HTTPException,
                    OSError)
_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def register(sub, common):
    p = sub.add_parser("logs", parents=[common], help="print the logs of a container of a pod",
                       description="Print a container's output (stdout and stderr). Any replica answers; "
                                   "with -f the output is followed until the container stops or Ctrl-C, "
                                   "across replica failures.")
    p.add_argument("pod", metavar="POD", help="pod name (or pod/NAME)")
    p.add_argument("-c", "--container", help="container name (needed when the pod has several)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new output")
    p.add_argument("--tail", type=int, default=-1, metavar="N",
                   help="only the last N lines (default -1: all)")
    p.add_argument("-p", "--previous", action="store_true",
                   help="the previous instance of the container (after a restart)")
    p.add_argument("--timestamps", action="store_true", help="prefix each line with its RFC 3339 time")
    p.set_defaults(func=run)


def ts_key(text):
    """An RFC 3339 timestamp (up to nanoseconds) -> comparable (epoch seconds, nanoseconds), or None."""
    m = _TS.match(text or "")
    if not m:
        return None
    try:
        base = datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    except ValueError:
        return None
    return int(base.timestamp()), int((m.group(2) or "0").ljust(9, "0"))


def _socket_of(resp):
    conn = getattr(resp.raw, "connection", None) or getattr(resp.raw, "_connection", None)
    sock = getattr(conn, "sock", None)
    if sock is None:
        fp = getattr(getattr(resp.raw, "_fp", None), "fp", None)
        sock = getattr(getattr(fp, "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


class _Watchdog:
    """While a follow is silent, asks its replica every `idle` seconds whether it is
    alive (/healthz); a replica that does not answer (paused, cut off) has its stream
    shut, so the follow resumes on another one."""

    def __init__(self, resp, server, idle, stop=None, verify=True):
        self.resp, self.server, self.idle, self.stop = resp, server, idle, stop
        self.verify = verify        # the cluster CA file (or True: the system's)
        self.last = time.monotonic()
        self.finished = threading.Event()
        self.tripped = False
        threading.Thread(target=self._run, name="logs-watchdog", daemon=True).start()

    def activity(self):
        self.last = time.monotonic()

    def _alive(self):
        try:
            with requests.Session() as s:
                s.trust_env = False
                s.verify = self.verify
                return s.get(self.server + "/healthz", timeout=min(5.0, self.idle)).status_code == 200
        except requests.RequestException:
            return False

    def _shut(self):
        self.tripped = True
        sock = _socket_of(self.resp)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _run(self):
        while not self.finished.wait(min(1.0, self.idle / 2)):
            if self.stop is not None and self.stop.is_set():
                self._shut()
                return
            if time.monotonic() - self.last >= self.idle:
                if self.finished.is_set():
                    return
                if not self._alive():
                    if not self.finished.is_set():
                        self._shut()
                    return
                self.last = time.monotonic()

    def done(self):
        self.finished.set()


class _Position:
    """What has been printed, to resume a broken stream without repeating lines."""

    def __init__(self):
        self.last_ts = None       # text of the newest timestamp printed
        self.last_key = None
        self.same = 0             # lines printed with exactly that timestamp
        self.lines = 0

    def printed(self, ts, key):
        self.lines += 1
        if key is None:
            return
        if key == self.last_key:
            self.same += 1
        else:
            self.last_ts, self.last_key, self.same = ts, key, 1


def stream_logs(client, namespace, pod, out, container=None, follow=False, tail=None, previous=False,
                timestamps=False, stop=None, err=None, idle_check=IDLE_CHECK):
    """Print the logs of a pod's container to `out` (text); returns when the stream
    ends (or `stop`, a threading.Event, is set).  Raises the client's errors."""
    path = RESOURCES["pods"].object_path(pod, namespace, "log")
    position = _Position()
    resumes = 0
    resumed_without_timestamps = False
    while True:
        params = {"timestamps": "true"}
        if container:
            params["container"] = container
        if follow:
            params["follow"] = "true"
        if previous:
            params["previous"] = "true"
        resuming = position.lines > 0
        if resuming and position.last_ts:
            params["sinceTime"] = position.last_ts
        elif resuming:
            params["tailLines"] = "0"        # no timestamps to resume from: new lines only
            resumed_without_timestamps = True
        elif tail is not None and tail >= 0:
            params["tailLines"] = str(tail)
        resp = client.request("GET", path, params=params, stream=True)
        stamped = resp.headers.get(TIMESTAMPS_HEADER, "").lower() == "true"
        watchdog = None
        if follow:
            sock = _socket_of(resp)
            if sock is not None:
                sock.settimeout(None)        # a quiet container is fine; the watchdog checks the replica
            watchdog = _Watchdog(resp, client.last_server, idle_check, stop, client.ca_file or True)
        skip_same = position.same if resuming and position.last_ts else 0
        before = position.lines
        try:
            buf = b""
            for chunk in response_chunks(resp):
                if watchdog is not None:
                    watchdog.activity()
                buf += chunk
                if b"\n" not in buf:
                    continue
                *lines, buf = buf.split(b"\n")
                skip_same = _emit(lines, out, stamped, timestamps, position, resuming, skip_same)
                if stop is not None and stop.is_set():
                    return
            if buf:
                _emit([buf], out, stamped, timestamps, position, resuming, skip_same)
            return
        except _STREAM_FAILURES as exc:
            if stop is not None and stop.is_set():
                return
            resumes = 0 if position.lines > before else resumes + 1
            if resumes > MAX_RESUMES:
                raise
            if err is not None:
                err.write("(the log stream from %s broke: %s; resuming)\n" % (client.last_server, type(exc).__name__))
                err.flush()
            if resumed_without_timestamps and err is not None:
                err.write("(the server gives no timestamps: lines written while resuming may be missing)\n")
            time.sleep(min(0.05 * resumes, 0.5))
        finally:
            if watchdog is not None:
                watchdog.done()
            resp.close()


def _emit(lines, out, stamped, show_timestamps, position, resuming, skip_same):
    """Print lines (bytes, without newline); returns how many lines stamped exactly
    position.last_ts are still to be skipped."""
    text = []
    for raw in lines:
        line = raw.decode("utf-8", "replace")
        ts = key = None
        if stamped:
            head, sep, rest = line.partition(" ")
            key = ts_key(head)
            if key is not None:
                ts = head
                if not show_timestamps:
                    line = rest if sep else ""
        if resuming and key is not None and position.last_key is not None:
            if key < position.last_key:
                continue
            if key == position.last_key and skip_same > 0:
                skip_same -= 1
                continue
            if key > position.last_key:
                skip_same = 0
        position.printed(ts, key)
        text.append(line + "\n")
    if text:
        out.write("".join(text))
        out.flush()
    return skip_same


def run(args, ctx):
    name = args.pod
    if "/" in name:
        kind, _, name = name.partition("/")
        if kind.lower() not in ("pod", "pods", "po") or not name:
            raise UserError("logs takes a pod: POD or pod/POD (got %r)" % args.pod)
    a = ctx.args
    deadline = a.retry_deadline if getattr(a, "retry_deadline", None) is not None else LOGS_RETRY_DEADLINE
    client = Client(ctx.settings.servers, timeout=getattr(a, "request_timeout", None) or 5.0,
                    retry_deadline=deadline, user_agent="sheepctl/%s" % _ctl_version, token=ctx.settings.token,
                    ca_file=ctx.settings.ca_file, client_cert=ctx.settings.client_cert)
    try:
        stream_logs(client, ctx.namespace, name, ctx.out, container=args.container, follow=args.follow,
                    tail=None if args.tail is None or args.tail < 0 else args.tail, previous=args.previous,
                    timestamps=args.timestamps, err=ctx.err)
    finally:
        client.close()
    return 0

