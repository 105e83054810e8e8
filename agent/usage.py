"""Node capacity and usage from psutil (the numbers of `sheepctl top nodes`)."""
import os
import platform

import psutil

from shepherd_ha.model.times import format_time

KI = 1024


def arch():
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64",
            "armv7l": "arm", "i386": "386", "i686": "386"}.get(machine, machine or "unknown")


def os_name():
    return platform.system().lower() or "linux"


def cpu_millicores():
    return (psutil.cpu_count() or 1) * 1000


def memory_bytes():
    return int(psutil.virtual_memory().total)


def format_cpu(millicores):
    millicores = max(0, int(millicores))
    return "%d" % (millicores // 1000) if millicores % 1000 == 0 else "%dm" % millicores


def format_memory(n):
    """Bytes -> a Ki quantity (floor), as the kubelet reports memory."""
    return "%dKi" % (max(0, int(n)) // KI)


class UsageSampler:
    """cpu % since the previous sample, memory, disk, load and container count."""

    def __init__(self, disk_path="/", containers=None):
        self.disk_path = disk_path
        self.containers = containers or (lambda: None)
        psutil.cpu_percent(None)      # the first call only starts the measurement

    def sample(self):
        mem = psutil.virtual_memory()
        try:
            disk = psutil.disk_usage(self.disk_path)
            disk_used, disk_total = int(disk.used), int(disk.total)
        except OSError:
            disk_used = disk_total = 0
        try:
            load1, load5, load15 = os.getloadavg()
        except OSError:
            load1 = load5 = load15 = 0.0
        usage = {"cpuPercent": round(float(psutil.cpu_percent(None)), 1),
                 "memoryUsedBytes": int(mem.total - mem.available),
                 "memoryAvailableBytes": int(mem.available),
                 "memoryPercent": round(float(mem.percent), 1),
                 "diskUsedBytes": disk_used, "diskTotalBytes": disk_total,
                 "load1": round(load1, 2), "load5": round(load5, 2), "load15": round(load15, 2),
                 "timestamp": format_time()}
        count = self.containers()
        if count is not None:
            usage["containers"] = int(count)
        return usage


def big_change(previous, current, points=20.0):
    """Whether cpu or memory moved by at least `points` percentage points."""
    if previous is None:
        return True
    for key in ("cpuPercent", "memoryPercent"):
        if abs(float(current.get(key) or 0) - float(previous.get(key) or 0)) >= points:
            return True
    return False
