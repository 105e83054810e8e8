"""Scorers: how good is this feasible node for this pod? Each is
`scorer(pod, node) -> 0..100` (higher is better), computed as if the pod were
already on the node; the scheduler averages them. SCORERS is a plain list; pass
another list to the Scheduler to change it.

Usage for scoring counts a container without requests as 100m cpu and 200 MiB
(as kube-scheduler does), so pods that request nothing still spread by load.
Each declares the PodInfo fields it reads (`@reads`, pod_reads.py).
"""
from .pod_reads import reads

_FRACTION_FIELDS = ("nonzero_cpu", "nonzero_memory")      # what _fractions reads


def _fractions(pod, node):
    """(cpu, memory) fractions of the node's allocatable used with the pod on it, at most 1."""
    alloc = node.alloc_cpu
    cpu = (node.nonzero_cpu + pod.nonzero_cpu) / alloc if alloc > 0 else 1.0
    alloc = node.alloc_memory
    memory = (node.nonzero_memory + pod.nonzero_memory) / alloc if alloc > 0 else 1.0
    return (cpu if cpu < 1.0 else 1.0), (memory if memory < 1.0 else 1.0)


@reads(*_FRACTION_FIELDS)
def least_allocated(pod, node):
    """Prefer nodes with the most cpu and memory left: mean of the free fractions."""
    cpu, memory = _fractions(pod, node)
    return (2.0 - cpu - memory) * 50.0


@reads(*_FRACTION_FIELDS)
def balanced_allocation(pod, node):
    """Prefer nodes whose cpu and memory would be used in the same proportion
    (100 minus the standard deviation of the two fractions, in percent)."""
    cpu, memory = _fractions(pod, node)
    return (1.0 - abs(cpu - memory) / 2.0) * 100.0


@reads("owner_uid")
def spread_by_owner(pod, node):
    """Prefer nodes with fewer pods of the same owner (controller ownerReference uid):
    100 on a node with none, 0 on the node(s) that have the most."""
    if not pod.owner_uid:
        return 100.0
    most = node.view.owner_max.get(pod.owner_uid, 0) if node.view is not None else 0
    if most <= 0:
        return 100.0
    return 100.0 * (most - node.owner_counts.get(pod.owner_uid, 0)) / most


SCORERS = [least_allocated, balanced_allocation, spread_by_owner]
