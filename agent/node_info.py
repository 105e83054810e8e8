"""The host facts of a Node's status.nodeInfo, read once per agent process.

Typed Kubernetes clients require every nodeInfo field (the official Python client
refuses a Node without bootID, kernelVersion, kubeProxyVersion, machineID, osImage
or systemUUID), so each has a value: what the host says, else "" (kubeProxyVersion
always: there is no kube-proxy, and Kubernetes itself leaves it empty now).
"""
import functools
import platform

from . import usage as U

BOOT_ID = "/proc/sys/kernel/random/boot_id"
MACHINE_ID = ("/etc/machine-id", "/var/lib/dbus/machine-id")
SYSTEM_UUID = ("/sys/class/dmi/id/product_uuid",)    # root only on most hosts
OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")


def _first_line(paths):
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.readline().strip()
        except OSError:
            continue
        if text:
            return text
    return ""


def os_image(paths=OS_RELEASE):
    """PRETTY_NAME of os-release ("Debian GNU/Linux 12 (bookworm)"), else the system name."""
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    key, _, value = line.strip().partition("=")
                    if key == "PRETTY_NAME" and value.strip('"'):
                        return value.strip().strip('"')
        except OSError:
            continue
    return platform.system() or "unknown"


@functools.lru_cache(maxsize=1)
def host_facts():
    """nodeInfo fields that only the host knows (the runtime and agent versions are the caller's)."""
    machine_id = _first_line(MACHINE_ID)
    return {"architecture": U.arch(), "operatingSystem": U.os_name(), "kernelVersion": platform.release(),
            "osImage": os_image(), "bootID": _first_line((BOOT_ID,)), "machineID": machine_id,
            # Without a readable DMI uuid the machine id is the stablest stand-in.
            "systemUUID": _first_line(SYSTEM_UUID) or machine_id, "kubeProxyVersion": ""}


def node_info(runtime_version, agent_version):
    return dict(host_facts(), containerRuntimeVersion=runtime_version, kubeletVersion=agent_version)
