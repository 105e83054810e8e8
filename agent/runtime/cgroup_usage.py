"""A container's CPU time and memory working set, read from its cgroup (v1 or v2).

Cheap file reads, as the kubelet's cAdvisor does: the cgroup directories come from
/proc/PID/cgroup of the container's main process (whatever the cgroup driver:
cgroupfs puts Docker's containers under /docker/ID, systemd under
/system.slice/docker-ID.scope), then
  - CPU: cumulative nanoseconds (v2 cpu.stat usage_usec, v1 cpuacct.usage); a rate
    needs two readings (agent/pod_usage.py keeps them);
  - memory: the working set, Kubernetes' figure: usage minus inactive file pages
    (v2 memory.current - inactive_file, v1 memory.usage_in_bytes - total_inactive_file).
"""
import os

CGROUP_ROOT = "/sys/fs/cgroup"


class CgroupUnreadable(OSError):
    """The process or its cgroup files are gone or unreadable."""


def cgroup_dirs(pid, root=CGROUP_ROOT, proc="/proc"):
    """{"cpu": dir, "memory": dir, "v2": bool} of process `pid`; CgroupUnreadable when not found."""
    try:
        with open(os.path.join(proc, str(int(pid)), "cgroup")) as fh:
            lines = fh.read().splitlines()
    except (OSError, ValueError) as exc:
        raise CgroupUnreadable("cannot read the cgroups of process %s: %s" % (pid, exc))
    cpu = memory = unified = None
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        path = path.lstrip("/")
        if hierarchy == "0" and not controllers:
            unified = path
            continue
        names = controllers.split(",")
        if "cpuacct" in names:
            cpu = _v1_dir(root, controllers, "cpuacct", path)
        if "memory" in names:
            memory = _v1_dir(root, controllers, "memory", path)
    if cpu and memory:
        return {"cpu": cpu, "memory": memory, "v2": False}
    if unified is not None:
        # unified-only hosts mount v2 at the root; hybrid ones under unified/
        base = root if os.path.exists(os.path.join(root, "cgroup.controllers")) else os.path.join(root, "unified")
        where = os.path.join(base, unified)
        return {"cpu": where, "memory": where, "v2": True}
    raise CgroupUnreadable("process %s is in no cpuacct and memory cgroup" % pid)


def _v1_dir(root, controllers, name, path):
    # a v1 hierarchy is mounted under its controllers' names ("cpu,cpuacct"), often with a link per name
    for mount in (controllers, name):
        candidate = os.path.join(root, mount, path)
        if os.path.isdir(candidate):
            return candidate
    return os.path.join(root, name, path)


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError as exc:
        raise CgroupUnreadable("cannot read %s: %s" % (path, exc))


def _stat(text, key):
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def read_usage(dirs):
    """(cumulative CPU nanoseconds, memory working set bytes) of a cgroup."""
    try:
        if dirs["v2"]:
            cpu_ns = _stat(_read(os.path.join(dirs["cpu"], "cpu.stat")), "usage_usec") * 1000
            used = int(_read(os.path.join(dirs["memory"], "memory.current")))
            inactive = _stat(_read(os.path.join(dirs["memory"], "memory.stat")), "inactive_file")
        else:
            cpu_ns = int(_read(os.path.join(dirs["cpu"], "cpuacct.usage")))
            used = int(_read(os.path.join(dirs["memory"], "memory.usage_in_bytes")))
            inactive = _stat(_read(os.path.join(dirs["memory"], "memory.stat")), "total_inactive_file")
    except ValueError as exc:
        raise CgroupUnreadable("a cgroup file holds no number: %s" % exc)
    return cpu_ns, max(0, used - inactive)
