"""The container runtime interface of the node agent.

The agent's pod parts (wired by pods.py), the prober (probes.py) and the log server (log_server.py) only
talk to a runtime through this interface, so the same agent runs real Docker
containers (`docker_runtime.DockerRuntime`) or simulated ones
(`hollow_runtime.HollowRuntime`, scale tests and benchmarks).

A runtime knows nothing about pods: it creates, starts, signals, inspects and
removes containers described by a `ContainerConfig`, and lists containers by
label. Which containers belong to which pod is written in their labels (see
agent/labels.py); the agent lists only containers carrying its own node label.
"""
import abc
import dataclasses
from typing import Dict, Iterator, List, Optional, Tuple


class RuntimeFailure(Exception):
    """A runtime operation failed; str() is a message for a person (Docker's own
    message when Docker refused)."""


class ImageNotPresent(RuntimeFailure):
    """The image is not on this node (and was not to be pulled)."""


class ImagePullError(RuntimeFailure):
    """Pulling the image failed (registry unreachable, unknown image, ...)."""


class CreateError(RuntimeFailure):
    """The runtime refused to create or start the container (bad port, port in use,
    bad working dir, executable not found, ...)."""


class NotReadyYet(CreateError):
    """Something the container needs on the node (the pod network, the node's DNS) is not
    ready yet: it waits in ContainerCreating, as a kubelet's pod waits for its sandbox,
    rather than failing with CreateContainerError."""


class ContainerGone(RuntimeFailure):
    """The container does not exist (any more)."""


class ExecTimeout(TimeoutError):
    """An exec did not finish within its timeout (the process may still run)."""


@dataclasses.dataclass(frozen=True)
class PortBinding:
    container_port: int
    protocol: str = "TCP"            # TCP, UDP, SCTP
    host_port: int = 0               # 0: not published on the node
    host_ip: str = ""                # address to publish on (the node address)


@dataclasses.dataclass(frozen=True)
class Mount:
    """A bind mount of a host path (a pod volume's directory or file) into a container."""
    source: str                      # absolute path on the node
    target: str                      # absolute path in the container
    read_only: bool = False


@dataclasses.dataclass
class ContainerConfig:
    """Everything a runtime needs to create one container (pure data, built by
    agent/spec.py from a pod spec)."""
    name: str
    image: str
    labels: Dict[str, str]
    entrypoint: Optional[List[str]] = None      # pod `command` (None: the image's)
    command: Optional[List[str]] = None         # pod `args` (None: the image's, unless entrypoint is set)
    env: List[str] = dataclasses.field(default_factory=list)        # ["NAME=value"]
    working_dir: Optional[str] = None
    ports: List[PortBinding] = dataclasses.field(default_factory=list)
    mem_limit: Optional[int] = None             # bytes
    nano_cpus: Optional[int] = None             # 1e9 = one core
    cpu_shares: Optional[int] = None            # relative weight (from cpu requests)
    network_mode: str = "bridge"                # bridge, host, container:<id>, or a network's name
    ipv4_address: Optional[str] = None          # the address on that network (the pod network's pick)
    hostname: Optional[str] = None              # only for a container that owns its network
    mounts: List[Mount] = dataclasses.field(default_factory=list)   # bind mounts (pod volumes)
    # securityContext (agent/security_context.py)
    user: Optional[str] = None                  # "uid[:gid]" (None: the image's user)
    group_add: List[str] = dataclasses.field(default_factory=list)
    cap_add: List[str] = dataclasses.field(default_factory=list)
    cap_drop: List[str] = dataclasses.field(default_factory=list)
    privileged: bool = False
    read_only: bool = False                     # read-only root filesystem
    security_opt: List[str] = dataclasses.field(default_factory=list)   # no-new-privileges, seccomp=...
    sysctls: Dict[str, str] = dataclasses.field(default_factory=dict)
    pid_mode: Optional[str] = None              # "host" for hostPID
    ipc_mode: Optional[str] = None              # "host" for hostIPC
    # the pod's resolv.conf (agent/dns/pod_dns.py); None: the runtime's default. Only
    # for a container that owns its network (Docker refuses them with container:<id>)
    dns_servers: Optional[List[str]] = None
    dns_search: Optional[List[str]] = None
    dns_options: Optional[List[str]] = None


@dataclasses.dataclass
class ContainerSummary:
    """One row of a container listing (cheap: no inspect)."""
    id: str
    name: str
    labels: Dict[str, str]
    state: str                                  # created, running, paused, restarting, exited, dead, removing
    created: float = 0.0                        # epoch seconds


@dataclasses.dataclass
class ContainerInfo:
    """What an inspect tells."""
    id: str
    name: str
    labels: Dict[str, str]
    image: str                                  # as configured
    image_id: str                               # e.g. sha256:...
    state: str                                  # created, running, paused, restarting, exited, dead, removing
    exit_code: Optional[int] = None
    started_at: Optional[str] = None            # RFC 3339 UTC, seconds ("2026-11-29T17:00:00Z"), None if never
    finished_at: Optional[str] = None
    oom_killed: bool = False
    error: str = ""                             # the runtime's error when it could not start it
    ip: str = ""                                # address on the container network ("" when none)

    @property
    def running(self):
        return self.state in ("running", "paused", "restarting")

    @property
    def ever_started(self):
        return bool(self.started_at)


class Runtime(abc.ABC):
    """A container runtime. Methods are safe to call from several threads."""

    name = "abstract"          # also the containerID scheme: "<name>://<id>"
    simulated = False          # hollow: no real processes, never send traffic to pod IPs

    @abc.abstractmethod
    def version(self) -> str:
        """e.g. "docker://20.10.24" (Node status nodeInfo.containerRuntimeVersion)."""

    # ---- images ----

    @abc.abstractmethod
    def image_present(self, image: str) -> bool:
        """Whether the image is on this node."""

    @abc.abstractmethod
    def pull_image(self, image: str) -> None:
        """Pull the image; ImagePullError on failure."""

    def image_user(self, image: str) -> Optional[str]:
        """The user the image runs as ("" = root), None when unknown (simulated
        runtimes: runAsNonRoot is then not checked against the image)."""
        return None

    # ---- containers ----

    @abc.abstractmethod
    def create(self, config: ContainerConfig) -> str:
        """Create (not start) a container; returns its id. CreateError on refusal."""

    @abc.abstractmethod
    def start(self, container_id: str) -> None:
        """Start a created container. CreateError on refusal (e.g. port in use),
        ContainerGone when it does not exist."""

    @abc.abstractmethod
    def signal(self, container_id: str, signum: int) -> None:
        """Send a signal to the container's main process (no-op when it is not running)."""

    @abc.abstractmethod
    def remove(self, container_id: str) -> None:
        """Remove the container, killing it first if it runs (no error when gone)."""

    @abc.abstractmethod
    def inspect(self, container_id: str) -> Optional[ContainerInfo]:
        """The container's details, or None when it does not exist."""

    @abc.abstractmethod
    def list(self, labels: Dict[str, str]) -> List[ContainerSummary]:
        """Every container (running or not) carrying all these labels."""

    # ---- for probes and logs ----

    @abc.abstractmethod
    def exec(self, container_id: str, command: List[str], timeout: float) -> Tuple[int, bytes]:
        """Run a command in the running container: (exit code, stdout+stderr bytes).
        Raises ExecTimeout (a TimeoutError) when it takes longer than `timeout`
        seconds, ContainerGone when the container does not exist, RuntimeFailure
        when it cannot run (e.g. not running, executable not found)."""

    def list_containers(self, labels: Optional[Dict[str, str]] = None) -> List[dict]:
        """Like list(), as dicts {"id", "name", "labels", "state", "created"} (the log
        server's lookup)."""
        return [{"id": c.id, "name": c.name, "labels": dict(c.labels), "state": c.state, "created": c.created}
                for c in self.list(labels or {})]

    @abc.abstractmethod
    def logs(self, container_id: str, tail: Optional[int] = None, follow: bool = False,
             timestamps: bool = False, since=None) -> Iterator[bytes]:
        """The container's output (stdout and stderr interleaved) as chunks of bytes.
        tail: only the last N lines; follow: keep yielding until the container stops
        or the iterator is closed (call .close() on it to stop early); timestamps:
        prefix each line with its RFC 3339 time; since: a datetime, only lines after it.
        ContainerGone when it does not exist."""

    # ---- resource usage (kubectl top pods, agent/pod_usage.py) ----

    def usage(self, container_id: str) -> Optional[Tuple[int, int]]:
        """(cumulative CPU nanoseconds, memory working set bytes) of a running container,
        or None when this runtime cannot tell (the container is then left out of the
        metrics, never given a made-up figure)."""
        return None

    # ---- change notifications (optional) ----

    def events(self, labels: Dict[str, str], stop) -> Iterator[Tuple[str, str, Dict[str, str]]]:
        """Yields (container id, action, labels) for containers with these labels as
        they start, die or go away, until `stop` (threading.Event) is set. The default
        yields nothing (the agent also checks its containers periodically)."""
        stop.wait()
        yield from ()

    def close(self) -> None:
        """Release connections."""
