"""Container probes: exec, httpGet and tcpSocket, and the state of one probe over time.

run_probe(probe_spec, runtime, pod_ip, container_id) runs one probe once and returns
(ok, message); it never raises.  ProbeState keeps the schedule and thresholds of
one probe of one container (Kubernetes semantics):

- nothing runs before initialDelaySeconds after the container started (`start(now)`);
- then one run every periodSeconds (a slow probe does not make later runs pile up:
  missed ticks are dropped, like a ticker);
- the result flips to failure after failureThreshold consecutive failures and back to
  success after successThreshold consecutive successes;
- a readiness (or startup) probe starts as failed, a liveness probe as succeeded.

The agent owns the clock: every method takes `now` (time.monotonic() in the agent,
a fake clock in tests).
"""
import http.client
import ipaddress
import socket
import ssl

DEFAULTS = {"initialDelaySeconds": 0, "timeoutSeconds": 1, "periodSeconds": 10,
            "successThreshold": 1, "failureThreshold": 3}
KINDS = ("liveness", "readiness", "startup")
USER_AGENT = "shepherd-probe/1"
MAX_MESSAGE = 200           # characters of command output or HTTP body kept in a message
MAX_BODY = 10 * 1024        # bytes of an HTTP answer read at most


def _number(spec, key):
    value = (spec or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return DEFAULTS[key]
    return value


def _short(data):
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    data = " ".join(str(data or "").split())
    return data if len(data) <= MAX_MESSAGE else data[:MAX_MESSAGE] + "..."


def resolve_port(port, container=None, resolver=None):
    """A probe's port (number, digits, or the name of a container port) -> int.
    Raises ValueError with a message a person can act on."""
    if isinstance(port, bool):
        raise ValueError("port %r is not a port number or name" % (port,))
    if isinstance(port, int):
        number = port
    elif isinstance(port, str) and port.isdigit():
        number = int(port)
    elif isinstance(port, str) and port:
        number = None
        if resolver is not None:
            number = resolver(port)
        if number is None:
            for p in (container or {}).get("ports") or []:
                if isinstance(p, dict) and p.get("name") == port:
                    number = p.get("containerPort")
                    break
        if number is None:
            raise ValueError("the container has no port named %r" % port)
        if not isinstance(number, int) or isinstance(number, bool):
            raise ValueError("port %r resolves to %r, not a port number" % (port, number))
    else:
        raise ValueError("port %r is not a port number or name" % (port,))
    if not 0 < number < 65536:
        raise ValueError("port %d is out of range (1-65535)" % number)
    return number


def _url_host(host):
    try:
        if ipaddress.ip_address(host).version == 6:
            return "[%s]" % host
    except ValueError:
        pass
    return host


def run_probe(probe_spec, runtime, pod_ip, container_id, container=None, resolver=None):
    """Run one probe once: (ok, message).  Never raises.

    container: the container's spec (to resolve named ports); resolver: optional
    callable name -> port number (tried first).
    """
    try:
        return _run(probe_spec or {}, runtime, pod_ip, container_id, container, resolver)
    except Exception as exc:  # noqa: BLE001 - a probe must never take the agent down
        return False, "probe error: %s: %s" % (type(exc).__name__, _short(str(exc)))


def needs_pod_ip(spec):
    """True for an httpGet or tcpSocket probe without its own host: it cannot run (nor
    fail) before the pod has an address."""
    spec = spec if isinstance(spec, dict) else {}
    if isinstance(spec.get("exec"), dict):
        return False
    return any(isinstance(spec.get(kind), dict) and not spec[kind].get("host") for kind in ("httpGet", "tcpSocket"))


def _run(spec, runtime, pod_ip, container_id, container, resolver):
    timeout = _number(spec, "timeoutSeconds") or DEFAULTS["timeoutSeconds"]
    if isinstance(spec.get("exec"), dict):
        return _exec(spec["exec"], runtime, container_id, timeout)
    for kind, fn in (("httpGet", _http_get), ("tcpSocket", _tcp_socket)):
        action = spec.get(kind)
        if isinstance(action, dict):
            host = action.get("host") or pod_ip
            if not host:
                return False, "%s probe: the pod has no IP address yet" % kind
            try:
                port = resolve_port(action.get("port"), container, resolver)
            except ValueError as exc:
                return False, "%s probe: %s" % (kind, exc)
            return fn(action, host, port, timeout)
    return False, "the probe has no exec, httpGet or tcpSocket action"


def _exec(action, runtime, container_id, timeout):
    command = action.get("command")
    if not command or not isinstance(command, list):
        return False, "exec probe: no command"
    if not container_id:
        return False, "exec probe: the container is not running"
    try:
        exit_code, output = runtime.exec(container_id, [str(c) for c in command], timeout)
    except TimeoutError:
        return False, "exec probe %s timed out after %ss" % (_short(" ".join(map(str, command))), timeout)
    except Exception as exc:  # noqa: BLE001
        return False, "exec probe %s failed: %s" % (_short(" ".join(map(str, command))), _short(str(exc)) or
                                                   type(exc).__name__)
    if exit_code == 0:
        return True, _short(output)
    text = _short(output)
    if exit_code is None:
        return False, "exec probe timed out after %ss%s" % (timeout, ": " + text if text else "")
    return False, "exec probe exited with code %s%s" % (exit_code, ": " + text if text else "")


def _http_get(action, host, port, timeout):
    path = action.get("path") or "/"
    if not path.startswith("/"):
        path = "/" + path
    scheme = (action.get("scheme") or "HTTP").upper()
    url = "%s://%s:%d%s" % (scheme.lower(), _url_host(host), port, path)
    if scheme == "HTTPS":
        # Like Kubernetes: probes do not verify certificates.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    elif scheme == "HTTP":
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    else:
        return False, "httpGet probe: scheme %r is not HTTP or HTTPS" % action.get("scheme")
    headers = {"User-Agent": USER_AGENT, "Accept": "*/*", "Connection": "close"}
    for h in action.get("httpHeaders") or []:
        if isinstance(h, dict) and h.get("name"):
            headers[str(h["name"])] = str(h.get("value", ""))
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        body = resp.read(MAX_BODY)
        code = resp.status
    except socket.timeout:
        return False, "GET %s: timed out after %ss" % (url, timeout)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return False, "GET %s: %s" % (url, _short(str(exc)) or type(exc).__name__)
    finally:
        conn.close()
    if 200 <= code < 400:
        return True, "GET %s: %d" % (url, code)
    text = _short(body)
    return False, "GET %s: HTTP status %d%s" % (url, code, ": " + text if text else "")


def _tcp_socket(action, host, port, timeout):
    where = "%s:%d" % (_url_host(host), port)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except socket.timeout:
        return False, "connect to %s: timed out after %ss" % (where, timeout)
    except OSError as exc:
        return False, "connect to %s: %s" % (where, exc.strerror or _short(str(exc)))
    sock.close()
    return True, "connected to %s" % where


class ProbeState:
    """Schedule and thresholds of one probe of one container.

        state = ProbeState(container["readinessProbe"], "readiness")
        state.start(now)                      # the container (re)started
        if state.due(now):
            ok, msg = run_probe(...)
            if state.record(ok, msg, time.monotonic()):
                ...                           # state.result flipped
    """

    def __init__(self, probe_spec, kind):
        if kind not in KINDS:
            raise ValueError("probe kind %r is not one of %s" % (kind, ", ".join(KINDS)))
        self.spec = probe_spec or {}
        self.kind = kind
        self.initial_delay = _number(self.spec, "initialDelaySeconds")
        self.period = _number(self.spec, "periodSeconds") or DEFAULTS["periodSeconds"]
        self.timeout = _number(self.spec, "timeoutSeconds") or DEFAULTS["timeoutSeconds"]
        self.success_threshold = max(1, int(_number(self.spec, "successThreshold")))
        self.failure_threshold = max(1, int(_number(self.spec, "failureThreshold")))
        self.started_at = None
        self.next_at = None
        self.reset()

    def reset(self):
        """Back to the initial result; nothing is due until start()."""
        self.result = self.kind == "liveness"
        self.message = ""
        self.successes = 0
        self.failures = 0
        self.runs = 0
        self.started_at = None
        self.next_at = None

    def start(self, now):
        """The container (re)started at `now`: the first run is due after the initial delay."""
        self.reset()
        self.started_at = now
        self.next_at = now + self.initial_delay

    @property
    def started(self):
        return self.started_at is not None

    def due(self, now):
        return self.next_at is not None and now >= self.next_at

    def seconds_until_due(self, now):
        """How long until the next run (0 when due, None when not started)."""
        if self.next_at is None:
            return None
        return max(0.0, self.next_at - now)

    def record(self, ok, message, now):
        """Count one result; True when `result` flipped."""
        self.runs += 1
        self.message = message or ""
        if self.next_at is None:
            self.next_at = now
        # the next tick after `now` on the period grid (missed ticks are dropped)
        if now >= self.next_at:
            missed = int((now - self.next_at) // self.period) + 1
            self.next_at += missed * self.period
        if ok:
            self.successes += 1
            self.failures = 0
            if not self.result and self.successes >= self.success_threshold:
                self.result = True
                return True
        else:
            self.failures += 1
            self.successes = 0
            if self.result and self.failures >= self.failure_threshold:
                self.result = False
                return True
        return False

    def check(self, runtime, pod_ip, container_id, now, container=None, resolver=None, clock=None):
        """Run the probe if it is due and record it: (ran, flipped).  `clock` (a
        callable) gives the time after the run; `now` is used when it is None."""
        if not self.due(now):
            return False, False
        ok, message = run_probe(self.spec, runtime, pod_ip, container_id, container, resolver)
        return True, self.record(ok, message, clock() if clock else now)

    def __repr__(self):
        return "ProbeState(%s, result=%s, successes=%d, failures=%d)" % (
            self.kind, self.result, self.successes, self.failures)
