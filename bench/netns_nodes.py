"""Nodes as network namespaces, each with its own dockerd, joined by one veth pair:
what the pod network's benchmark and integration test run on (root only).

    with NodePair("pn") as pair:          # namespaces pn-n1, pn-n2; 10.77.0.1 and 10.77.0.2
        pair.nodes[0].docker_url          # unix socket of n1's dockerd

Every name starts with the prefix; `close()` stops the engines (by their PIDs), deletes
the namespaces (the veth goes with them) and the engines' directories. Docker's
FORWARD DROP policy is set in each namespace, as a host's Docker sets it.
"""
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

IMAGE = "shepherd/busybox:1"
SUBNET = "10.77.0.%d"
CLONE_NEWNET = 0x40000000


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def sh(*args, check=True, **kwargs):
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=60, **kwargs)
    if check and done.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), (done.stderr or done.stdout).strip()))
    return done


class NetnsNode:
    def __init__(self, prefix, index, root):
        self.name = "%s-n%d" % (prefix, index)
        self.address = SUBNET % index
        self.dir = os.path.join(root, self.name)
        self.docker_url = "unix://%s/docker.sock" % self.dir
        self.prefix = ["nsenter", "--net=/run/netns/%s" % self.name]
        self.proc = None

    def run(self, *args, check=True):
        return sh(*(self.prefix + list(args)), check=check)

    def call(self, fn, *args):
        """fn(*args) in a thread that entered this node's network namespace (setns acts on
        one thread): sockets it makes, and threads it starts, are the node's. Returns
        fn's result, raises its exception."""
        result = {}

        def inside():
            try:
                with open("/run/netns/%s" % self.name) as ns:
                    if _libc().setns(ns.fileno(), CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns into %s failed" % self.name)
                result["value"] = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                result["error"] = exc
        thread = threading.Thread(target=inside, name="in-" + self.name, daemon=True)
        thread.start()
        thread.join(60)
        if "error" in result:
            raise result["error"]
        return result.get("value")

    def start_docker(self):
        os.makedirs(self.dir, exist_ok=True)
        self.log = open(os.path.join(self.dir, "dockerd.log"), "w")
        self.proc = subprocess.Popen(self.prefix + [
            "dockerd", "--bridge", "none", "--iptables=true", "--data-root", os.path.join(self.dir, "root"),
            "--exec-root", os.path.join(self.dir, "exec"), "--pidfile", os.path.join(self.dir, "dockerd.pid"),
            "-H", self.docker_url], stdout=self.log, stderr=subprocess.STDOUT)

    def wait_docker(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("dockerd of %s exited: see %s/dockerd.log" % (self.name, self.dir))
            if sh("docker", "-H", self.docker_url, "version", check=False).returncode == 0:
                return
            time.sleep(0.3)
        raise RuntimeError("dockerd of %s did not answer in %.0f s" % (self.name, timeout))

    def load_image(self):
        saved = subprocess.Popen(["docker", "save", IMAGE], stdout=subprocess.PIPE)
        sh("docker", "-H", self.docker_url, "load", stdin=saved.stdout)
        saved.wait(30)

    def stop_docker(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        ids = sh("docker", "-H", self.docker_url, "ps", "-aq", check=False).stdout.split()
        if ids:     # a sleeping PID 1 ignores SIGTERM: dockerd would wait for each
            sh("docker", "-H", self.docker_url, "rm", "-f", *ids, check=False)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class NodePair:
    def __init__(self, prefix="pn", count=2):
        self.prefix = prefix
        self.root = tempfile.mkdtemp(prefix=prefix + "-engines-")
        self.nodes = [NetnsNode(prefix, i + 1, self.root) for i in range(count)]

    def __enter__(self):
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def open(self):
        if os.geteuid() != 0:
            raise AssertionError("the pod network integration test needs root (network namespaces, dockerd, "
                                 "iptables): run it as root")
        for tool in ("dockerd", "docker", "nsenter", "ip", "iptables"):
            if shutil.which(tool) is None:
                raise AssertionError("%s is not installed (scripts/setup-docker.sh)" % tool)
        first, second = self.nodes[0], self.nodes[1]
        for node in self.nodes:
            sh("ip", "netns", "add", node.name)
            node.run("ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", self.prefix + "-v1", "netns", first.name, "type", "veth", "peer", "name",
           self.prefix + "-v2", "netns", second.name)
        for node, dev in ((first, self.prefix + "-v1"), (second, self.prefix + "-v2")):
            node.run("ip", "addr", "add", node.address + "/24", "dev", dev)
            node.run("ip", "link", "set", dev, "up")
            node.run("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        for node in self.nodes:
            node.start_docker()
        for node in self.nodes:
            node.wait_docker()
            node.load_image()
            node.run("iptables", "-w", "-P", "FORWARD", "DROP")

    def close(self):
        for node in self.nodes:
            try:
                node.stop_docker()
            except Exception:  # noqa: BLE001 - go on with the rest of the cleanup
                pass
        for node in self.nodes:
            sh("ip", "netns", "del", node.name, check=False)
        with open("/proc/mounts") as f:       # anything an engine left mounted under our directory
            mounts = [line.split()[1] for line in f if line.split()[1].startswith(self.root)]
        for mount in sorted(mounts, reverse=True):
            sh("umount", "-l", mount, check=False)
        shutil.rmtree(self.root, ignore_errors=True)
