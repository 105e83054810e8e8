"""This node's containers in the runtime, as the pod parts ask for them (by the
node and pod-uid labels the agent puts on every container it creates)."""
from . import labels as L
from .runtime.base import RuntimeFailure


class NodeContainers:
    def __init__(self, runtime, node):
        self.runtime = runtime
        self.node = node

    def all(self):
        """Summaries (runtime.list) of every container of this node's pods."""
        return self.runtime.list({L.NODE: self.node})

    def of_pod(self, uid):
        """ContainerInfo of every container of the pod (all instances, the sandbox too)."""
        out = []
        for c in self.runtime.list({L.NODE: self.node, L.POD_UID: uid}):
            info = self.runtime.inspect(c.id)
            if info is not None:
                out.append(info)
        return out

    def remove_named(self, name):
        for c in self.all():
            if c.name == name:
                self.runtime.remove(c.id)

    def running_count(self):
        """For the node status: running app containers (None while the runtime fails)."""
        try:
            return sum(1 for c in self.all() if c.state == "running" and not L.is_sandbox(c.labels))
        except RuntimeFailure:
            return None
