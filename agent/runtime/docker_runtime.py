"""The Docker runtime: real containers through the docker SDK's low-level API.

`create_kwargs(config)` (pure) turns a ContainerConfig into the arguments of
`APIClient.create_container`; the rest is thin wrapping that turns Docker's errors
into the runtime's exceptions with Docker's own message.
"""
import dataclasses
import logging
import os
import select
import socket
import struct
import threading
import time

import docker
import docker.errors
import docker.types
import requests

from ..labels import CLUSTER as CLUSTER_LABEL
from . import cgroup_usage
from .base import (ContainerConfig, ContainerGone, ContainerInfo, ContainerSummary, CreateError,
                   ExecTimeout, ImagePullError, Runtime, RuntimeFailure)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 60.0      # seconds for one Docker API call (pulls get more)


def docker_time(value):
    """Docker's RFC 3339 with nanoseconds -> '2026-11-29T17:00:00Z'; None for the zero time."""
    if not value or value.startswith("0001-01-01"):
        return None
    text = value.rstrip("Z")
    main = text.split(".", 1)[0]
    if "+" in main[10:] or main.count("-") > 2:     # an offset other than Z: keep it as is
        return value
    return main + "Z"


def _port_key(binding):
    proto = binding.protocol.lower()
    return binding.container_port if proto == "tcp" else "%d/%s" % (binding.container_port, proto)


def create_kwargs(api, config: ContainerConfig):
    """Arguments for api.create_container (api: an APIClient, for create_host_config)."""
    exposed, bindings = [], {}
    for b in config.ports:
        key = _port_key(b)
        port = b.container_port if b.protocol.lower() == "tcp" else (b.container_port, b.protocol.lower())
        if port not in exposed:
            exposed.append(port)
        if b.host_port:
            bindings.setdefault(key, []).append((b.host_ip, b.host_port) if b.host_ip else b.host_port)
    host_kwargs = {"network_mode": config.network_mode}
    if bindings:
        host_kwargs["port_bindings"] = {k: (v[0] if len(v) == 1 else v) for k, v in bindings.items()}
    if config.mem_limit:
        host_kwargs["mem_limit"] = int(config.mem_limit)
    if config.nano_cpus:
        host_kwargs["nano_cpus"] = int(config.nano_cpus)
    if config.cpu_shares:
        host_kwargs["cpu_shares"] = int(config.cpu_shares)
    for key in ("group_add", "cap_add", "cap_drop", "security_opt", "sysctls", "pid_mode", "ipc_mode"):
        value = getattr(config, key)
        if value:
            host_kwargs[key] = value if isinstance(value, (str, dict)) else list(value)
    if config.privileged:
        host_kwargs["privileged"] = True
    if config.read_only:
        host_kwargs["read_only"] = True
    if config.mounts:
        # Mount objects, not "src:dst:ro" strings: a path may hold a ':'
        host_kwargs["mounts"] = [docker.types.Mount(target=m.target, source=m.source, type="bind",
                                                    read_only=bool(m.read_only)) for m in config.mounts]
    if not config.network_mode.startswith("container:"):
        for key, value in (("dns", config.dns_servers), ("dns_search", config.dns_search),
                           ("dns_opt", config.dns_options)):
            if value is not None:
                host_kwargs[key] = list(value)
    kwargs = {"image": config.image, "name": config.name, "labels": dict(config.labels),
              "environment": list(config.env) or None, "detach": True,
              "host_config": api.create_host_config(**host_kwargs)}
    if config.entrypoint is not None:
        kwargs["entrypoint"] = list(config.entrypoint)
    if config.command is not None:
        kwargs["command"] = list(config.command)
    if config.working_dir:
        kwargs["working_dir"] = config.working_dir
    if config.user is not None:
        kwargs["user"] = config.user
    owns_network = not config.network_mode.startswith("container:") and config.network_mode != "host"
    if exposed and owns_network:
        kwargs["ports"] = exposed
    if config.hostname and owns_network:
        kwargs["hostname"] = config.hostname
    if config.ipv4_address and owns_network:
        kwargs["networking_config"] = api.create_networking_config(
            {config.network_mode: api.create_endpoint_config(ipv4_address=config.ipv4_address)})
    return kwargs


def _explain(exc):
    if isinstance(exc, docker.errors.APIError):
        text = exc.explanation
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        return (text or str(exc)).strip()
    return str(exc) or type(exc).__name__


def info_from_inspect(data):
    state = data.get("State") or {}
    config = data.get("Config") or {}
    net = data.get("NetworkSettings") or {}
    ip = net.get("IPAddress") or ""
    if not ip:
        for network in (net.get("Networks") or {}).values():
            if (network or {}).get("IPAddress"):
                ip = network["IPAddress"]
                break
    status = state.get("Status") or ("running" if state.get("Running") else "exited")
    return ContainerInfo(
        id=data.get("Id") or "", name=(data.get("Name") or "").lstrip("/"),
        labels=dict(config.get("Labels") or {}), image=config.get("Image") or "",
        image_id=data.get("Image") or "", state=status,
        exit_code=state.get("ExitCode") if status in ("exited", "dead") else None,
        started_at=docker_time(state.get("StartedAt")), finished_at=docker_time(state.get("FinishedAt")),
        oom_killed=bool(state.get("OOMKilled")), error=state.get("Error") or "", ip=ip)


class DockerRuntime(Runtime):
    name = "docker"

    def __init__(self, base_url=None, timeout=DEFAULT_TIMEOUT, pull_timeout=300.0, cluster_id=None):
        self.url = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        # Containers this runtime makes carry it; another cluster's are invisible to list()
        # and events() (one made without the label, by an agent before it, counts as ours).
        self.cluster_id = cluster_id
        try:
            self.api = docker.APIClient(base_url=self.url, version="auto", timeout=timeout)
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise RuntimeFailure("cannot reach the Docker engine at %s: %s (is dockerd running? "
                                 "scripts/setup-docker.sh starts one)" % (self.url, _explain(exc)))
        self._pull_timeout = pull_timeout
        self._local = threading.local()
        self._version = None
        self._cgroups = {}          # container id -> its cgroup directories (cgroup_usage.py)

    def _client(self, timeout):
        return docker.APIClient(base_url=self.url, version=self.api.api_version, timeout=timeout)

    def _pull_api(self):
        api = getattr(self._local, "pull_api", None)
        if api is None:
            api = self._local.pull_api = self._client(self._pull_timeout)
        return api

    def version(self):
        if self._version is None:
            try:
                self._version = "docker://%s" % self.api.version().get("Version", "unknown")
            except (docker.errors.DockerException, requests.RequestException) as exc:
                raise RuntimeFailure("cannot reach the Docker engine: %s" % _explain(exc))
        return self._version

    # ---- images ----

    def image_present(self, image):
        try:
            self.api.inspect_image(image)
            return True
        except docker.errors.ImageNotFound:
            return False
        except docker.errors.APIError as exc:
            if exc.status_code == 404:
                return False
            raise RuntimeFailure(_explain(exc))
        except requests.RequestException as exc:
            raise RuntimeFailure("Docker engine: %s" % exc)

    def pull_image(self, image):
        from agent.spec import split_image
        repo, tag = split_image(image)
        try:
            for line in self._pull_api().pull(repo, tag=tag, stream=True, decode=True):
                if isinstance(line, dict) and line.get("error"):
                    raise ImagePullError(str(line.get("error")).strip())
        except docker.errors.APIError as exc:
            raise ImagePullError(_explain(exc))
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise ImagePullError(str(exc))

    def image_user(self, image):
        try:
            return (self.api.inspect_image(image).get("Config") or {}).get("User") or ""
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as exc:
            if exc.status_code == 404:
                return None
            raise RuntimeFailure(_explain(exc))
        except requests.RequestException as exc:
            raise RuntimeFailure("Docker engine: %s" % exc)

    # ---- containers ----

    def ours(self, labels):
        """Whether a container with these labels belongs to this runtime's cluster."""
        theirs = (labels or {}).get(CLUSTER_LABEL)
        return not (self.cluster_id and theirs and theirs != self.cluster_id)

    def create(self, config):
        if self.cluster_id:
            config = dataclasses.replace(config, labels=dict(config.labels, **{CLUSTER_LABEL: self.cluster_id}))
        try:
            result = self.api.create_container(**create_kwargs(self.api, config))
        except docker.errors.ImageNotFound as exc:
            raise CreateError(_explain(exc))
        except docker.errors.APIError as exc:
            raise CreateError(_explain(exc))
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise RuntimeFailure("Docker engine: %s" % exc)
        return result["Id"]

    def start(self, container_id):
        try:
            self.api.start(container_id)
        except docker.errors.NotFound as exc:
            raise ContainerGone(_explain(exc))
        except docker.errors.APIError as exc:
            raise CreateError(_explain(exc))
        except requests.RequestException as exc:
            raise RuntimeFailure("Docker engine: %s" % exc)

    def signal(self, container_id, signum):
        try:
            self.api.kill(container_id, signal=int(signum))
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code == 409:       # not running
                return
            raise RuntimeFailure(_explain(exc))
        except requests.RequestException as exc:
            raise RuntimeFailure("Docker engine: %s" % exc)

    def remove(self, container_id):
        try:
            self.api.remove_container(container_id, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code == 409 and "already in progress" in _explain(exc):
                return
            raise RuntimeFailure(_explain(exc))
        except requests.RequestException as exc:
            raise RuntimeFailure("Docker engine: %s" % exc)

    def inspect(self, container_id):
        try:
            return info_from_inspect(self.api.inspect_container(container_id))
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as exc:
            raise RuntimeFailure(_explain(exc))
        except requests.RequestException as exc:
            raise RuntimeFailure("Docker engine: %s" % exc)

    def list(self, labels):
        filters = {"label": ["%s=%s" % (k, v) for k, v in sorted(labels.items())]}
        try:
            rows = self.api.containers(all=True, filters=filters)
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise RuntimeFailure("Docker engine: %s" % _explain(exc))
        out = []
        for row in rows:
            if not self.ours(row.get("Labels")):
                continue
            names = row.get("Names") or [""]
            out.append(ContainerSummary(id=row.get("Id") or "", name=names[0].lstrip("/"),
                                        labels=dict(row.get("Labels") or {}), state=row.get("State") or "",
                                        created=float(row.get("Created") or 0)))
        return out

    # ---- exec and logs ----

    def exec(self, container_id, command, timeout):
        try:
            exec_id = self.api.exec_create(container_id, list(command), stdout=True, stderr=True)["Id"]
            sock = self.api.exec_start(exec_id, socket=True)
        except docker.errors.NotFound as exc:
            raise ContainerGone(_explain(exc))
        except docker.errors.APIError as exc:
            raise RuntimeFailure(_explain(exc))
        except requests.RequestException as exc:
            raise RuntimeFailure("Docker engine: %s" % exc)
        raw = _read_all(sock, timeout)
        output = _demux(raw)
        for _ in range(50):      # the exit code lands a moment after the stream closes
            info = self.api.exec_inspect(exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                return (code if code is not None else -1), output
            time.sleep(0.01)
        raise ExecTimeout("exec %s did not finish" % (command,))

    def logs(self, container_id, tail=None, follow=False, timestamps=False, since=None):
        kwargs = {}
        if since is not None:
            kwargs["since"] = since
        try:
            return self.api.logs(container_id, stream=True, follow=bool(follow), stdout=True, stderr=True,
                                 timestamps=bool(timestamps), tail="all" if tail is None else int(tail), **kwargs)
        except docker.errors.NotFound as exc:
            raise ContainerGone(_explain(exc))
        except docker.errors.APIError as exc:
            raise RuntimeFailure(_explain(exc))
        except requests.RequestException as exc:
            raise RuntimeFailure("Docker engine: %s" % exc)

    # ---- events ----

    def events(self, labels, stop):
        filters = {"type": ["container"], "label": ["%s=%s" % (k, v) for k, v in sorted(labels.items())],
                   "event": ["start", "die", "oom", "destroy", "kill", "stop"]}
        while not stop.is_set():
            api = stream = None
            done = threading.Event()
            try:
                api = self._client(None)
                stream = api.events(filters=filters, decode=True)
                threading.Thread(target=_close_on_stop, args=(stream, stop, done), daemon=True,
                                 name="docker-events-closer").start()
                for event in stream:
                    if stop.is_set():
                        return
                    actor = event.get("Actor") or {}
                    if not self.ours(actor.get("Attributes")):
                        continue
                    yield (event.get("id") or actor.get("ID") or "", event.get("Action") or event.get("status") or "",
                           dict(actor.get("Attributes") or {}))
            except Exception as exc:  # noqa: BLE001 - the stream breaks in many ways; reconnect
                if stop.is_set():
                    return
                log.debug("docker events stream broke: %s; reconnecting", exc)
            finally:
                done.set()
                for closeable in (stream, api):
                    if closeable is not None:
                        try:
                            closeable.close()
                        except Exception:  # noqa: BLE001
                            pass
            stop.wait(1.0)

    def usage(self, container_id):
        """From the container's cgroup files; one inspect per container for its main PID."""
        dirs = self._cgroups.get(container_id)
        try:
            if dirs is None:
                pid = ((self.api.inspect_container(container_id) or {}).get("State") or {}).get("Pid")
                if not pid:
                    return None      # not running
                dirs = cgroup_usage.cgroup_dirs(pid)
                if len(self._cgroups) > 4096:      # bounded: ids of removed containers go too
                    self._cgroups.clear()
                self._cgroups[container_id] = dirs
            return cgroup_usage.read_usage(dirs)
        except cgroup_usage.CgroupUnreadable as exc:
            log.debug("usage of %s: %s", container_id[:12], exc)
            self._cgroups.pop(container_id, None)    # restarted (new PID) or gone: look again next time
            return None
        except (docker.errors.DockerException, requests.RequestException) as exc:
            log.debug("usage of %s: %s", container_id[:12], exc)
            return None

    def close(self):
        try:
            self.api.close()
        except Exception:  # noqa: BLE001
            pass


def _close_on_stop(stream, stop, done):
    """Close the event stream when the agent stops (its read blocks until then)."""
    while not done.is_set():
        if stop.wait(0.5):
            try:
                stream.close()
            except Exception:  # noqa: BLE001
                pass
            return


def _socket_of(sock):
    return getattr(sock, "_sock", sock)


def _read_all(sock, timeout):
    """Everything from the exec socket until EOF, or ExecTimeout."""
    raw = _socket_of(sock)
    deadline = time.monotonic() + max(0.01, float(timeout))
    chunks = []
    try:
        raw.setblocking(False)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ExecTimeout("command timed out after %gs" % timeout)
            readable, _, _ = select.select([raw], [], [], left)
            if not readable:
                continue
            try:
                data = raw.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except socket.error:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        try:
            sock.close()
        except Exception:  # noqa: BLE001
            pass
    return b"".join(chunks)


def _demux(raw):
    """Docker's multiplexed stream (8-byte frame headers) -> payload bytes; raw bytes
    are returned as they are when they do not look multiplexed."""
    out, i = [], 0
    while i + 8 <= len(raw):
        stream_type, length = raw[i], struct.unpack(">I", raw[i + 4:i + 8])[0]
        if stream_type not in (0, 1, 2) or raw[i + 1:i + 4] != b"\0\0\0":
            return raw
        out.append(raw[i + 8:i + 8 + length])
        i += 8 + length
    if i != len(raw):
        return raw
    return b"".join(out)
