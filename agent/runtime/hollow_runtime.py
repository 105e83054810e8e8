"""The hollow runtime: simulated containers, for scale tests and benchmarks.

No process runs: a created container starts at once and "runs" until it is
signalled or removed. Each gets a fake IP from 10.0.0.0/8, derived from the node
name so that hollow nodes of one cluster rarely share addresses; the agent never
sends traffic to it (network probes of hollow pods are not run, see
agent/prober.py). Images are always present; volume mounts are accepted and
ignored (the agent writes no volume files for a simulated runtime). exec answers exit code 0 and no
output; logs are empty; usage is 0 CPU and 0 bytes (nothing runs, so nothing is used:
`kubectl top pods` shows hollow pods at 0, with a real sampling window). State lives in memory: after an agent restart the
containers are gone and the agent starts its pods again (simulated ones).
"""
import hashlib
import itertools
import threading
import time
import uuid

from shepherd_ha.model.times import format_time

from .base import ContainerGone, ContainerInfo, ContainerSummary, CreateError, Runtime, RuntimeFailure

HOLLOW_VERSION = "hollow://1"


class HollowRuntime(Runtime):
    name = "hollow"
    simulated = True

    def __init__(self, node_name="hollow"):
        digest = hashlib.sha256(node_name.encode()).digest()
        # 10.<a>.<b>.<c>: a 4096-address block per node (a, high nibble of b), counter below.
        self._block = (int.from_bytes(digest[:2], "big") & 0x0FFF) << 12
        self._counter = itertools.count(1)
        self._containers = {}
        self._networks = {}
        self._created = {}
        self._lock = threading.Lock()

    def version(self):
        return HOLLOW_VERSION

    def image_present(self, image):
        return True

    def pull_image(self, image):
        return None

    def _ip(self):
        n = self._block + (next(self._counter) % 4094) + 1
        return "10.%d.%d.%d" % ((n >> 16) & 0xFF, (n >> 8) & 0xFF, n & 0xFF)

    def create(self, config):
        cid = uuid.uuid4().hex + uuid.uuid4().hex[:32]
        with self._lock:
            if any(c.name == config.name for c in self._containers.values()):
                raise CreateError('Conflict. The container name "/%s" is already in use' % config.name)
            self._containers[cid] = ContainerInfo(
                id=cid, name=config.name, labels=dict(config.labels), image=config.image,
                image_id="sha256:" + hashlib.sha256(config.image.encode()).hexdigest(), state="created",
                ip="")
            self._networks[cid] = config.network_mode
            self._created[cid] = time.time()
        return cid

    def start(self, container_id):
        with self._lock:
            info = self._containers.get(container_id)
            if info is None:
                raise ContainerGone("no such container: %s" % container_id)
            if info.running:
                return
            info.state = "running"
            info.started_at = format_time()
            info.finished_at = None
            info.exit_code = None
            network = self._networks.get(container_id, "bridge")
            if network.startswith("container:"):
                owner = self._containers.get(network.split(":", 1)[1])
                info.ip = ""
                if owner is None:
                    raise RuntimeFailure("network owner %s is gone" % network)
            elif network == "bridge":
                info.ip = self._ip()

    def signal(self, container_id, signum):
        with self._lock:
            info = self._containers.get(container_id)
            if info is None or not info.running:
                return
            info.state = "exited"
            info.exit_code = 128 + int(signum)
            info.finished_at = format_time()
            info.ip = ""

    def remove(self, container_id):
        with self._lock:
            self._containers.pop(container_id, None)
            self._networks.pop(container_id, None)
            self._created.pop(container_id, None)

    def inspect(self, container_id):
        with self._lock:
            info = self._containers.get(container_id)
            if info is None:
                return None
            copy = ContainerInfo(**{k: getattr(info, k) for k in ContainerInfo.__dataclass_fields__})
        return copy

    def list(self, labels):
        with self._lock:
            return [ContainerSummary(id=c.id, name=c.name, labels=dict(c.labels), state=c.state,
                                     created=self._created.get(c.id, 0.0))
                    for c in self._containers.values()
                    if all(c.labels.get(k) == v for k, v in labels.items())]

    def exec(self, container_id, command, timeout):
        with self._lock:
            info = self._containers.get(container_id)
        if info is None:
            raise ContainerGone("no such container: %s" % container_id)
        if not info.running:
            raise RuntimeFailure("container %s is not running" % container_id)
        return 0, b""

    def logs(self, container_id, tail=None, follow=False, timestamps=False, since=None):
        with self._lock:
            if container_id not in self._containers:
                raise ContainerGone("no such container: %s" % container_id)
        return iter(())

    def usage(self, container_id):
        with self._lock:
            info = self._containers.get(container_id)
        return (0, 0) if info is not None and info.running else None
