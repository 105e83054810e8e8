"""Pod spec -> runtime ContainerConfig (pure).

Networking: a pod has one network namespace and so one pod IP.
- one container (the usual case): the container owns its network on the Docker
  bridge; its IP is the pod IP and its hostPorts are published on it.
- several containers: a small sandbox container (`sleep`, the --sandbox-image)
  owns the network and publishes every container's hostPorts; the containers join
  it (`network_mode container:<sandbox>`), so one of them restarting does not take
  the others' network away.
- `hostNetwork: true`: every container uses the node's network; the pod IP is the
  node address and ports are not published (they are the node's already).
"""
from shepherd_ha.model.quantity import QuantityError, parse_cpu, parse_memory

from . import labels as L
from . import security_context as S
from .runtime.base import ContainerConfig, PortBinding

SANDBOX_COMMAND = ["sleep", "2147483647"]
MIN_CPU_SHARES = 2


def containers_of(pod):
    return [c for c in ((pod.get("spec") or {}).get("containers") or []) if isinstance(c, dict)]


def host_network(pod):
    return bool((pod.get("spec") or {}).get("hostNetwork"))


def needs_sandbox(pod):
    """Several containers on a pod network share a sandbox."""
    return not host_network(pod) and len(containers_of(pod)) > 1


def hostname_of(pod):
    name = (pod.get("metadata") or {}).get("name") or "pod"
    return name[:63].rstrip("-.") or "pod"


def env_list(container):
    out = []
    for var in container.get("env") or []:
        if isinstance(var, dict) and var.get("name"):
            value = var.get("value")
            out.append("%s=%s" % (var["name"], "" if value is None else value))
    return out


def port_bindings(containers, node_address):
    """PortBindings for the containers' ports; hostPort 0/absent: not published."""
    out = []
    for c in containers:
        for port in c.get("ports") or []:
            if not isinstance(port, dict) or not isinstance(port.get("containerPort"), int):
                continue
            host_port = port.get("hostPort") if isinstance(port.get("hostPort"), int) else 0
            out.append(PortBinding(container_port=port["containerPort"],
                                   protocol=(port.get("protocol") or "TCP").upper(),
                                   host_port=host_port,
                                   host_ip=(port.get("hostIP") or node_address or "") if host_port else ""))
    return out


def limits(container):
    """(mem_limit bytes, nano_cpus, cpu_shares) from resources; None where not set.
    A bad quantity (validation should have refused it) is ignored."""
    resources = container.get("resources") or {}
    lim = resources.get("limits") or {}
    req = resources.get("requests") or {}
    mem = cpus = shares = None
    try:
        if lim.get("memory") is not None:
            mem = parse_memory(lim["memory"]) or None
    except QuantityError:
        pass
    try:
        if lim.get("cpu") is not None:
            cpus = parse_cpu(lim["cpu"]) * 1000000 or None       # millicores -> nano cpus
    except QuantityError:
        pass
    try:
        request = req.get("cpu", lim.get("cpu"))
        if request is not None:
            shares = max(MIN_CPU_SHARES, parse_cpu(request) * 1024 // 1000)
    except QuantityError:
        pass
    return mem, cpus, shares


def container_config(pod, container, node, node_address, restart_count, sandbox_id=None, last=None,
                     env=None, mounts=None, image_user="", dns=None):
    """The ContainerConfig of `container` (a dict of pod.spec.containers) for instance
    number `restart_count`. sandbox_id: the network holder to join (multi-container
    pods); last: the previous instance's terminated state, kept in labels; env: the
    resolved environment (agent/volumes.py, ConfigMap references) instead of the
    plain values; mounts: the volumes' bind mounts; image_user: the image's user
    (for a runAsGroup without runAsUser); dns: the pod's ResolverConfig
    (agent/dns/pod_dns.py), applied only where the container owns the network."""
    meta = pod.get("metadata") or {}
    name = container.get("name") or "main"
    command = container.get("command")
    args = container.get("args")
    entrypoint = list(command) if command else None
    cmd = list(args) if args else ([] if command else None)   # a command drops the image's CMD
    mem, cpus, shares = limits(container)
    if host_network(pod):
        network_mode, ports, hostname = "host", [], None
    elif sandbox_id:
        network_mode, ports, hostname = "container:%s" % sandbox_id, [], None
    else:
        network_mode, ports, hostname = "bridge", port_bindings([container], node_address), hostname_of(pod)
    return ContainerConfig(
        name=L.container_name(node, meta.get("namespace"), meta.get("name") or "", name, restart_count),
        image=container.get("image") or "",
        labels=L.container_labels(node, pod, name, restart_count, container, last),
        entrypoint=entrypoint, command=cmd, env=env_list(container) if env is None else list(env),
        working_dir=container.get("workingDir") or None, ports=ports,
        mem_limit=mem, nano_cpus=cpus, cpu_shares=shares,
        network_mode=network_mode, hostname=hostname, mounts=list(mounts or []),
        sysctls=S.sysctls(pod, network_owner=network_mode == "bridge"),
        **S.docker_options(pod, container, image_user), **(dns_fields(dns) if not sandbox_id else {}))


def dns_fields(dns):
    """ContainerConfig's dns_* fields of a ResolverConfig (None: Docker's default)."""
    if dns is None:
        return {}
    # Docker keeps the node's search list for an empty one; "." means none
    return {"dns_servers": list(dns.nameservers), "dns_search": list(dns.searches) or ["."],
            "dns_options": list(dns.options)}


def sandbox_config(pod, node, node_address, image, attempt, dns=None):
    """The network holder of a multi-container pod: publishes every container's ports;
    its resolv.conf (dns) is the one every container of the pod reads."""
    meta = pod.get("metadata") or {}
    return ContainerConfig(
        name=L.container_name(node, meta.get("namespace"), meta.get("name") or "", L.SANDBOX_CONTAINER, attempt),
        image=image, labels=L.sandbox_labels(node, pod, attempt),
        entrypoint=None, command=list(SANDBOX_COMMAND),
        ports=port_bindings(containers_of(pod), node_address),
        network_mode="bridge", hostname=hostname_of(pod), sysctls=S.sysctls(pod, network_owner=True),
        pid_mode="host" if (pod.get("spec") or {}).get("hostPID") is True else None, **dns_fields(dns))


def split_image(image):
    """'repo[:tag]' or 'repo@digest' -> (repository, tag or digest) for a pull; a
    registry's :port is not a tag; no tag means latest."""
    if "@" in image:
        repo, digest = image.split("@", 1)
        return repo, digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon + 1:]
    return image, "latest"
