"""Container runtimes of the node agent: `docker` (real) and `hollow` (simulated)."""
from .base import (ContainerConfig, ContainerGone, ContainerInfo, ContainerSummary, CreateError,
                   ExecTimeout, ImageNotPresent, ImagePullError, Mount, PortBinding, Runtime, RuntimeFailure)

RUNTIMES = ("docker", "hollow")


def make_runtime(kind, node_name, docker_url=None, cluster_id=None):
    """A Runtime by name; RuntimeFailure when Docker cannot be reached. With `cluster_id`
    the Docker runtime sees and labels only that cluster's containers."""
    if kind == "docker":
        from .docker_runtime import DockerRuntime
        return DockerRuntime(docker_url, cluster_id=cluster_id)
    if kind == "hollow":
        from .hollow_runtime import HollowRuntime
        return HollowRuntime(node_name)
    raise ValueError("unknown runtime %r: use %s" % (kind, " or ".join(RUNTIMES)))


__all__ = ["ContainerConfig", "ContainerGone", "ContainerInfo", "ContainerSummary", "CreateError",
           "ExecTimeout", "ImageNotPresent", "ImagePullError", "Mount", "PortBinding", "Runtime", "RuntimeFailure",
           "RUNTIMES", "make_runtime"]
