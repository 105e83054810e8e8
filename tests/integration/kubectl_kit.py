"""Real kubectl (1.32, on PATH) against a cluster made by `shepherd-ha local up` itself.

`KubeCluster(dir)` runs `python -m shepherd_ha.cli.main local up --dir DIR --agents 0`
(HTTPS from the cluster CA, bearer tokens), and kubectl runs with
`--kubeconfig DIR/kubeconfig`: the very file `local up` wrote (the CA inline, the admin
token), never a rewritten copy. The tests read back what the server holds through
`client` (shepherd_ha.client over the same TLS and token) or `api()` (plain requests,
same CA and token).

    kube = KubeCluster(tmp_dir)          # a 3-replica cluster, as `local up` makes it
    kubectl = kube.kubectl_for("my-ns")  # kubectl("get", "pods") -> CompletedProcess (asserts rc 0)
    kube.client.get("pods", "web-1", "my-ns")
    viewer = kube.add_user_token("viewer", ["shepherd:view"])   # kubectl(..., token=viewer)
    kube.add_hollow_agent("k-node")      # a real agent process, simulated containers
    kube.stop()                          # agents then replicas, by their recorded PIDs
"""
import hashlib
import itertools
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid

import requests
import yaml

from shepherd_ha.cli.cluster_files import write_private
from shepherd_ha.cli.local_cluster import LocalCluster
from shepherd_ha.client import ApiError, Client
from shepherd_ha.model.node_lease import LEASE_NAMESPACE

from .helpers import free_base_port, wait_for

KUBECTL_TIMEOUT = 60
UP_TIMEOUT = 240         # seconds `local up` may take on a loaded machine (3 Python processes and their imports)
HTTP_TIMEOUT = 10.0


def kubectl_binary():
    binary = shutil.which("kubectl")
    assert binary, "kubectl 1.32 is needed on PATH for these tests: scripts/setup-*.sh installs it"
    return binary


class KubeCluster:
    def __init__(self, directory, replicas=3):
        self.dir = str(directory)
        self.lc = LocalCluster(self.dir)
        self.cache = os.path.join(self.dir, "kubectl-cache")     # no discovery cached from another cluster
        last = None
        for _ in range(4):     # another process may take our ports between the pick and the bind
            try:
                up = subprocess.run([sys.executable, "-m", "shepherd_ha.cli.main", "local", "up", "--dir", self.dir,
                                     "--replicas", str(replicas), "--agents", "0",
                                     "--base-port", str(free_base_port(replicas)), "--timeout", str(UP_TIMEOUT - 10)],
                                    capture_output=True, text=True, timeout=UP_TIMEOUT)
            except subprocess.TimeoutExpired as exc:
                self.stop()           # its replicas run in their own sessions: never leave them behind
                raise AssertionError("shepherd-ha local up did not return within %ds:\n%s" % (
                    UP_TIMEOUT, (exc.stdout or b"").decode(errors="replace")))
            if up.returncode == 0:
                break
            last = up
            if self.lc.exists:         # it created the layout but did not come up: start over
                self.lc.stop_all(timeout=5.0)
                shutil.rmtree(self.dir)
        else:
            raise AssertionError("shepherd-ha local up failed:\n%s\n%s" % (last.stdout, last.stderr))
        assert self.lc.tls and self.lc.token(), "local up made a cluster without TLS or tokens"
        self.kubeconfig = self.lc.kubeconfig_path
        assert os.path.exists(self.kubeconfig), "local up wrote no %s:\n%s" % (self.kubeconfig, up.stdout)
        self.urls = self.lc.api_urls()
        self.url = self.urls[0]
        self.client = Client(self.urls, timeout=5.0, retry_deadline=20.0, **self.lc.client_options())

    # ---- kubectl ----

    def argv(self, namespace=None, token=None):
        # another user has a discovery cache of their own: what they may discover is theirs
        cache = self.cache if not token else "%s-%s" % (self.cache, hashlib.sha256(token.encode()).hexdigest()[:12])
        argv = [kubectl_binary(), "--kubeconfig", self.kubeconfig, "--cache-dir", cache]
        if namespace:
            argv += ["-n", namespace]
        if token:
            argv += ["--token", token]      # another user, over the same kubeconfig's TLS
        return argv

    def kubectl(self, *args, namespace=None, check=True, input=None, env=None, token=None,
                timeout=KUBECTL_TIMEOUT):
        # KUBECONFIG points at the same file: nothing of the user's own ~/.kube takes part.
        proc = subprocess.run(self.argv(namespace, token) + list(args), capture_output=True, text=True,
                              input=input, timeout=timeout,
                              env=dict(os.environ, KUBECONFIG=self.kubeconfig, **(env or {})))
        if check:
            assert proc.returncode == 0, "kubectl %s failed (%d):\n%s\n%s" % (
                " ".join(args), proc.returncode, proc.stdout, proc.stderr)
        return proc

    def kubectl_for(self, namespace):
        """kubectl(*args, check=True, input=None, env=None, token=None) in `namespace`;
        .argv is its command line for Popen (watches, waits)."""
        def run(*args, **kwargs):
            return self.kubectl(*args, namespace=namespace, **kwargs)
        run.argv = self.argv(namespace)
        run.kube = self
        return run

    def popen(self, *args, namespace=None):
        return subprocess.Popen(self.argv(namespace) + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=dict(os.environ, KUBECONFIG=self.kubeconfig))

    # ---- the API, read back over the same TLS and token ----

    def api(self, method, path, url=None, retry_deadline=20.0, **kwargs):
        """One request as the admin; a 503 or a refused connection (an election, a loaded
        machine) is retried on the next replica with one Idempotency-Key, so a write that
        did land is not made twice."""
        headers = dict(self.lc.auth_headers(), **(kwargs.pop("headers", None) or {}))
        headers.setdefault("Idempotency-Key", uuid.uuid4().hex)
        urls = [url] if url else self.urls
        deadline = time.monotonic() + retry_deadline
        for attempt in itertools.count():
            try:
                resp = requests.request(method, urls[attempt % len(urls)] + path, headers=headers,
                                        verify=self.lc.ca_file, timeout=kwargs.get("timeout", HTTP_TIMEOUT),
                                        **{k: v for k, v in kwargs.items() if k != "timeout"})
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
            else:
                if resp.status_code != 503 or time.monotonic() > deadline:
                    return resp
            time.sleep(0.2)

    def ensure_namespace(self, name):
        """Create namespace `name` (retried over the replicas while one answers 503); it may exist."""
        try:
            self.client.create("namespaces", {"metadata": {"name": name}})
        except ApiError as exc:
            if exc.code != 409:
                raise

    def python_client(self):
        """The official Python client (kubernetes), configured from DIR/kubeconfig."""
        import kubernetes
        return kubernetes.config.new_client_from_config(config_file=self.kubeconfig)

    # ---- users and agents ----

    def add_user_token(self, user, groups=()):
        """A bearer token for `user` in `groups`, added to the replicas' token file (they
        re-read it when it changes; swapped in by a rename, so never half-read)."""
        token = "%s-%s" % (user, os.urandom(16).hex())
        with open(self.lc.token_file) as fh:
            text = fh.read()
        line = '%s,%s,%s,"%s"\n' % (token, user, user, ",".join(groups))
        tmp = self.lc.token_file + ".new"
        write_private(tmp, text + ("" if text.endswith("\n") or not text else "\n") + line)
        os.replace(tmp, self.lc.token_file)
        wait_for("the replicas to accept %s's token" % user, lambda: all(
            requests.get(u + "/api", headers={"Authorization": "Bearer " + token}, verify=self.lc.ca_file,
                         timeout=HTTP_TIMEOUT).status_code == 200 for u in self.urls), timeout=20, interval=0.2)
        return token

    def keep_node_alive(self, node):
        """Renew node `node`'s lease as its agent would, until .stop() (NodeLease)."""
        self.ensure_namespace(LEASE_NAMESPACE)
        return NodeLease(self.client, node)

    def add_hollow_agent(self, name, wait=True):
        """A real agent process (its own node token and certificate) with the hollow runtime."""
        return self.add_agent(name, "hollow", wait=wait)

    def add_agent(self, name, runtime, extra_args=(), wait=True, timeout=60):
        self.lc.add_agent(name, runtime=runtime, extra_args=extra_args)
        self.lc.start_agent(name)
        if wait:
            wait_for("node %s Ready (agent log %s)" % (name, self.lc.agent_log(name)),
                     lambda: [r for r in self.lc.agent_status(timeout=2.0)
                              if r["name"] == name and r["node"] == "Ready"], timeout=timeout, interval=0.3)
        return name

    def stop(self):
        if self.lc.exists:
            self.lc.stop_agents(timeout=5.0)
            self.lc.stop_all(timeout=5.0)
        client = getattr(self, "client", None)
        if client is not None:
            client.close()


class NodeLease:
    """The lease of a Node no agent runs (kube-node-lease/NAME), renewed every 2 s on a
    thread, so the node lifecycle controller leaves it Ready and its pods in place however
    slowly the tests run (otherwise it evicts them 25 s after it first saw the node).
    Bounded: it stops by itself after `limit` seconds."""

    def __init__(self, client, node, interval=2.0, limit=900.0):
        self.client, self.node, self.interval = client, node, interval
        self.deadline = time.monotonic() + limit
        self.stopped = threading.Event()
        self.renew()                       # the first one before the caller goes on
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def renew(self):
        spec = {"holderIdentity": self.node, "leaseDurationSeconds": 40,
                "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}
        try:
            self.client.patch("leases", self.node, {"spec": spec}, namespace=LEASE_NAMESPACE)
        except ApiError as exc:
            if exc.code != 404:
                raise
            self.client.create("leases", {"metadata": {"name": self.node}, "spec": spec}, namespace=LEASE_NAMESPACE)

    def _run(self):
        while not self.stopped.wait(self.interval) and time.monotonic() < self.deadline:
            try:
                self.renew()
            except Exception:      # a replica restarting, an election: the next round renews it
                pass

    def stop(self):
        self.stopped.set()
        self.thread.join(10)


def kubeconfig_user(path):
    """(server, token, has the CA inline) of the kubeconfig's current context: what kubectl uses."""
    with open(path) as fh:
        config = yaml.safe_load(fh)
    ctx = [c for c in config["contexts"] if c["name"] == config["current-context"]][0]["context"]
    cluster = [c for c in config["clusters"] if c["name"] == ctx["cluster"]][0]["cluster"]
    user = [u for u in config["users"] if u["name"] == ctx["user"]][0]["user"]
    return cluster["server"], user.get("token"), bool(cluster.get("certificate-authority-data"))


