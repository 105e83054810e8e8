"""Filters: can this pod go on this node? Each is `filter(pod, node) -> reason or None`
(pod a PodInfo, node a NodeInfo; `node.view` is the whole ClusterView). The reason
is counted per node in the message of a pod that fits nowhere, so it is written to
read after a count: "2 Insufficient memory", "1 node(s) were NotReady".

A node is judged by the first filter that refuses it, in list order: cheap and
decisive ones first. FILTERS is a plain list; pass another list (for example
`FILTERS + [my_filter]`) to the Scheduler to change it. Each declares the PodInfo
fields it reads (`@reads`, pod_reads.py): pods equal in those share its verdicts.
"""
from .pod_reads import reads

NOT_READY = "node(s) were NotReady"
UNSCHEDULABLE = "node(s) were unschedulable"
SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
INSUFFICIENT_CPU = "Insufficient cpu"
INSUFFICIENT_MEMORY = "Insufficient memory"
PORTS_IN_USE = "node(s) didn't have free ports for the requested pod ports"


@reads()
def node_ready(pod, node):
    """The node's Ready condition is True (the node lifecycle controller keeps it honest)."""
    return None if node.ready else NOT_READY


@reads()
def node_schedulable(pod, node):
    """The node is not cordoned (spec.unschedulable)."""
    return UNSCHEDULABLE if node.unschedulable else None


@reads("node_selector")
def node_selector(pod, node):
    """Every label of the pod's spec.nodeSelector is on the node with the same value."""
    if pod.node_selector:
        labels = node.labels
        for key, value in pod.node_selector.items():
            if labels.get(key) != value:
                return SELECTOR_MISMATCH
    return None


@reads()
def pod_count(pod, node):
    """One more pod still fits the node's allocatable pods."""
    return TOO_MANY_PODS if node.pod_count + 1 > node.alloc_pods else None


@reads("cpu")
def cpu_fits(pod, node):
    """The pod's cpu requests fit in allocatable minus what is bound to the node."""
    if pod.cpu and node.cpu + pod.cpu > node.alloc_cpu:
        return INSUFFICIENT_CPU
    return None


@reads("memory")
def memory_fits(pod, node):
    """The pod's memory requests fit in allocatable minus what is bound to the node."""
    if pod.memory and node.memory + pod.memory > node.alloc_memory:
        return INSUFFICIENT_MEMORY
    return None


@reads("host_ports")
def host_ports_free(pod, node):
    """No host port (protocol, port) of the pod is used by a pod bound to the node."""
    if pod.host_ports and node.ports:
        for port in pod.host_ports:
            if port in node.ports:
                return PORTS_IN_USE
    return None


FILTERS = [node_ready, node_schedulable, node_selector, pod_count, cpu_fits, memory_fits, host_ports_free]
