"""GET /version: Kubernetes' version.Info (what `kubectl version` and client-go's
discovery read) plus this server's own version and replica id.

gitVersion says which Kubernetes API this server follows (KUBERNETES_VERSION) with
Shepherd HA's version as the semver pre-release part, e.g. v1.32.0-shepherd.0.1.0:
kubectl parses it as semver to warn about client/server skew, and major/minor as
plain numbers.
"""
import platform
import sys

import shepherd_ha

KUBERNETES_VERSION = (1, 32, 0)
BUILD_DATE = "1970-01-01T00:00:00Z"     # no build step stamps one


def _platform():
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(machine, machine or "unknown")
    return "%s/%s" % (sys.platform if sys.platform != "linux2" else "linux", arch)


def version_info(replica_id=None):
    major, minor, patch = KUBERNETES_VERSION
    ours = shepherd_ha.__version__
    info = {"major": str(major), "minor": str(minor),
            "gitVersion": "v%d.%d.%d-shepherd.%s" % (major, minor, patch, ours),
            "gitCommit": "", "gitTreeState": "", "buildDate": BUILD_DATE,
            # Kubernetes names the Go toolchain here; ours is Python.
            "goVersion": "python%s" % platform.python_version(), "compiler": platform.python_implementation(),
            "platform": _platform(), "version": ours}
    if replica_id is not None:
        info["replica"] = replica_id
    return info
