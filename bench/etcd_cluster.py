"""A throw-away etcd cluster on 127.0.0.1 for comparisons: N members (Debian's
`etcd` binary, installed by scripts/setup-etcd.sh), free loopback ports, data and
logs in a temp dir, members signalled only by the PID we recorded when starting them.

Speaks to the members through etcd's v3 JSON gateway (plain HTTP on the client port):
POST /v3/maintenance/status for roles, GET /health for readiness.
"""
import base64
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time

from shepherd_ha.cli.local_cluster import port_free

DEFAULT_ELECTION_MS = 1000      # etcd's defaults: --election-timeout 1000, --heartbeat-interval 100
DEFAULT_HEARTBEAT_MS = 100


class EtcdError(Exception):
    pass


def etcd_binary():
    """Path of `etcd`, or EtcdError saying how to install it."""
    path = shutil.which("etcd")
    if not path:
        raise EtcdError("etcd is not installed (no `etcd` on PATH): run `bash scripts/setup-etcd.sh` "
                        "(installs Debian's etcd-server and etcd-client)")
    return path


def etcd_version():
    """'etcd 3.4.23 (go1.19.8)' from `etcd --version`."""
    try:
        out = subprocess.run([etcd_binary(), "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise EtcdError("`etcd --version` failed: %s" % exc) from exc
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    version = fields.get("etcd Version", "").strip() or "unknown version"
    go = fields.get("Go Version", "").strip()
    return "etcd %s%s" % (version, " (%s)" % go if go else "")


def b64(text):
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def find_free_ports(count, low=20000, high=32000, attempts=200):
    """`count` consecutive free ports below the kernel's ephemeral range (as LocalCluster does)."""
    rng = secrets.SystemRandom()
    for _ in range(attempts):
        base = rng.randrange(low, high - count)
        if all(port_free(base + i) for i in range(count)):
            return list(range(base, base + count))
    raise EtcdError("no %d free consecutive ports between %d and %d" % (count, low, high))


def heartbeat_for(election_ms):
    """etcd refuses an election timeout under 5 heartbeats: keep the 100 ms default
    heartbeat unless the election timeout is shorter than 500 ms."""
    return min(DEFAULT_HEARTBEAT_MS, max(1, election_ms // 5))


class EtcdCluster:
    """Context manager: start N members, wait for a leader; stop (SIGTERM, then SIGKILL) and
    remove the temp dir on exit."""

    def __init__(self, members=3, election_ms=None, ready_timeout=60.0, progress=None, keep=False):
        if members < 1:
            raise EtcdError("an etcd cluster needs at least 1 member, not %d" % members)
        if election_ms is not None and election_ms < 50:
            raise EtcdError("--etcd-election-ms %d is too short: use at least 50 (etcd's default is %d)"
                            % (election_ms, DEFAULT_ELECTION_MS))
        self.count = members
        self.election_ms = election_ms
        self.ready_timeout = ready_timeout
        self.progress = progress or (lambda line: None)
        self.keep = keep
        self.dir = None
        self.members = []           # dicts: name, client, peer, data, log, pid, proc
        self.binary = etcd_binary()

    # ---- lifecycle ----

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="etcd-bench-")
        ports = find_free_ports(2 * self.count)
        for i in range(self.count):
            name = "etcd-%d" % (i + 1)
            self.members.append({"name": name, "client": "http://127.0.0.1:%d" % ports[2 * i],
                                 "peer": "http://127.0.0.1:%d" % ports[2 * i + 1],
                                 "data": os.path.join(self.dir, name, "data"),
                                 "log": os.path.join(self.dir, name, "etcd.log"), "proc": None})
        try:
            for m in self.members:
                self.start(m["name"])
            self.progress("started %d etcd members in %s (pids %s)" % (
                self.count, self.dir, ", ".join("%s=%s" % (m["name"], m["proc"].pid) for m in self.members)))
            self.wait_ready(self.ready_timeout)
            self.progress("etcd cluster ready, leader %s" % self.leader())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.stop_all()
        finally:
            if not self.keep and self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def command(self, m):
        cluster = ",".join("%s=%s" % (o["name"], o["peer"]) for o in self.members)
        cmd = [self.binary, "--name", m["name"], "--data-dir", m["data"],
               "--listen-client-urls", m["client"], "--advertise-client-urls", m["client"],
               "--listen-peer-urls", m["peer"], "--initial-advertise-peer-urls", m["peer"],
               "--initial-cluster", cluster, "--initial-cluster-token", os.path.basename(self.dir),
               # ignored once the data dir exists: a restarted member rejoins with its own state
               "--initial-cluster-state", "new",
               "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"]
        if self.election_ms is not None:
            cmd += ["--election-timeout", str(self.election_ms),
                    "--heartbeat-interval", str(heartbeat_for(self.election_ms))]
        return cmd

    def member(self, name):
        for m in self.members:
            if m["name"] == name:
                return m
        raise EtcdError("no etcd member %r (members: %s)" % (name, ", ".join(self.names())))

    def names(self):
        return [m["name"] for m in self.members]

    def urls(self):
        return [m["client"] for m in self.members]

    def pid(self, name):
        proc = self.member(name)["proc"]
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self, name):
        m = self.member(name)
        if self.pid(name):
            return m["proc"].pid
        os.makedirs(os.path.dirname(m["log"]), exist_ok=True)
        with open(m["log"], "ab") as log:
            m["proc"] = subprocess.Popen(self.command(m), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        return m["proc"].pid

    def kill(self, name):
        """SIGKILL the member (our recorded child only) and reap it."""
        m = self.member(name)
        if self.pid(name) is None:
            return False
        m["proc"].send_signal(signal.SIGKILL)
        m["proc"].wait(10)
        return True

    def stop_all(self, timeout=15.0):
        # A leader that loses its peers may spend seconds trying to hand over leadership on
        # SIGTERM: signal every member first, then wait, then SIGKILL what is left.
        running = [m for m in self.members if m["proc"] is not None and m["proc"].poll() is None]
        for m in running:
            m["proc"].send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for m in running:
            try:
                m["proc"].wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                m["proc"].send_signal(signal.SIGKILL)
                m["proc"].wait(10)

    # ---- state ----

    def status(self, name, timeout=0.5):
        """POST /v3/maintenance/status on one member, decoded, or None."""
        return post_json(self.member(name)["client"], "/v3/maintenance/status", {}, timeout)

    def statuses(self, timeout=0.5):
        return {m["name"]: self.status(m["name"], timeout) for m in self.members}

    def leader(self, statuses=None):
        """Name of the member that says it leads, or None."""
        statuses = statuses or self.statuses()
        for name, st in statuses.items():
            if st and st.get("leader") and st["leader"] == st.get("header", {}).get("member_id"):
                return name
        return None

    def term(self, statuses=None):
        statuses = statuses or self.statuses()
        return max((int(st.get("raftTerm", 0)) for st in statuses.values() if st), default=None)

    def healthy(self, name, timeout=1.0):
        """GET /health: true once the member has a leader and answers a quorum read."""
        reply = get_json(self.member(name)["client"], "/health", timeout)
        return bool(reply) and str(reply.get("health")) == "true"

    def wait_ready(self, timeout, names=None):
        """Until every (given) member is healthy, there is a leader, and each given member has
        applied the leader's commit index as it was when we first saw them all healthy."""
        names = names or self.names()
        deadline = time.monotonic() + timeout
        waiting = "not checked yet"
        while time.monotonic() < deadline:
            sick = [n for n in names if not self.healthy(n)]
            if not sick:
                statuses = self.statuses()
                lead = self.leader(statuses)
                if lead:
                    target = int(statuses[lead]["raftIndex"])
                    behind = [n for n in names if not statuses.get(n)
                              or int(statuses[n]["raftAppliedIndex"]) < target]
                    if not behind:
                        return lead
                    waiting = "catching up: %s" % ", ".join(behind)
                else:
                    waiting = "no leader"
            else:
                waiting = "not healthy yet: %s" % ", ".join(sick)
            dead = [n for n in names if self.member(n)["proc"] is not None and self.pid(n) is None]
            if dead:
                raise EtcdError("etcd member(s) %s exited; see %s" % (
                    ", ".join(dead), ", ".join(self.member(n)["log"] for n in dead)))
            time.sleep(0.1)
        raise EtcdError("etcd cluster in %s not ready within %.0f s (%s); see %s/*/etcd.log"
                        % (self.dir, timeout, waiting, self.dir))


# ---- HTTP (etcd's JSON gateway) ----

def _request(url, method, path, body, timeout):
    import http.client
    import urllib.parse
    parsed = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)
    try:
        conn.request(method, path, body, {"Content-Type": "application/json"} if body is not None else {})
        resp = conn.getresponse()
        data = resp.read()
        return json.loads(data) if resp.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()


def post_json(url, path, obj, timeout=0.5):
    return _request(url, "POST", path, json.dumps(obj), timeout)


def get_json(url, path, timeout=0.5):
    return _request(url, "GET", path, None, timeout)
