"""Picking a node for one pod, and saying why none fits.

Filters run node by node from a start that moves on after every pod (so equal
nodes take turns); on large clusters the search stops once enough feasible nodes
are found (kube-scheduler's percentageOfNodesToScore: adaptive, at least 100
nodes), which keeps a pass fast without scoring every node. Feasible nodes are
scored by every scorer and the best average wins; ties go to the first found.
A pod that fits nowhere has been checked against every node, so its message
counts every node.
"""
import collections

from .pod_reads import shared_fields, signature_function

MIN_FEASIBLE_NODES = 100


def feasible_nodes_to_find(total, percentage=0, minimum=MIN_FEASIBLE_NODES):
    """How many feasible nodes to find before scoring (kube-scheduler's rule).
    percentage 0 means adaptive: 50% minus 1% per 125 nodes, at least 5%."""
    if total <= minimum or percentage >= 100:
        return total
    if percentage <= 0:
        percentage = max(5, 50 - total // 125)
    return max(minimum, total * percentage // 100)


class Diagnosis:
    """Why a pod fits no node: the first refusing filter's reason per node."""

    def __init__(self, total, reasons):
        self.total = total
        self.reasons = reasons     # Counter: reason -> number of nodes

    def message(self):
        if self.total == 0:
            return "0/0 nodes available: no nodes are registered"
        parts = sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        return "0/%d nodes available: %s" % (self.total, ", ".join("%d %s" % (n, r) for r, n in parts))


def failure_message(total, reasons):
    """'0/3 nodes available: 2 Insufficient memory, 1 node(s) were NotReady' (most common first)."""
    return Diagnosis(total, collections.Counter(reasons)).message()


class NodePicker:
    """Filters and scores nodes for pods, one pass at a time.

    Within a pass, a node's verdict for a pod (first refusing filter, or average
    score) is kept until that node gets another pod (`NodeInfo.version`) or the
    most pods any node has of the pod's owner changes (the spread scorer's scale).
    Pods equal in every PodInfo field the filters and scorers declare they read
    (`signature_fields`, pod_reads.py) share verdicts: placing the 500 replicas of a
    deployment re-checks only the node that changed, not every node, for each
    replica. With a function that declares nothing in the lists, every pod checks
    every node it visits (such a function may read anything).
    """

    def __init__(self, filters, scorers, percentage=0, minimum=MIN_FEASIBLE_NODES):
        self.filters = list(filters)
        self.scorers = list(scorers)
        self.percentage = percentage
        self.minimum = minimum
        self.next_start = 0
        self.signature_fields = shared_fields(self.filters + self.scorers)    # None: nothing is shared
        self.share_verdicts = self.signature_fields is not None
        self._signature = signature_function(self.signature_fields or ())
        self._view = None
        self._verdicts = {}

    def _cache_for(self, pod, view):
        if not self.share_verdicts:
            return {}                        # nothing is known to be shared between pods
        if view is not self._view:           # a new pass: nothing carries over
            self._view, self._verdicts = view, {}
        key = self._signature(pod)
        cache = self._verdicts.get(key)
        if cache is None:
            cache = self._verdicts[key] = {}
        return cache

    def verdict(self, pod, node):
        """(reason, None) if a filter refuses the node, else (None, average score)."""
        for check in self.filters:
            reason = check(pod, node)
            if reason:
                return reason, None
        scorers = self.scorers
        if not scorers:
            return None, 0.0
        score = 0.0
        for scorer in scorers:
            score += scorer(pod, node)
        return None, score / len(scorers)

    def pick(self, pod, view):
        """(NodeInfo, None) for the best node, or (None, Diagnosis)."""
        nodes = view.nodes
        total = len(nodes)
        if total == 0:
            return None, Diagnosis(0, collections.Counter())
        want = feasible_nodes_to_find(total, self.percentage, self.minimum)
        cache = self._cache_for(pod, view)
        scale = view.owner_max.get(pod.owner_uid, 0) if pod.owner_uid else 0
        verdict = self.verdict
        found = 0
        best, best_score = None, None
        reasons = None
        start = self.next_start % total
        processed = 0
        for i in range(total):
            node = nodes[(start + i) % total]
            processed += 1
            entry = cache.get(node.name)
            if entry is None or entry[0] != node.version or entry[1] != scale:
                entry = (node.version, scale) + verdict(pod, node)
                cache[node.name] = entry
            reason = entry[2]
            if reason:
                if reasons is None:
                    reasons = collections.Counter()
                reasons[reason] += 1
                continue
            found += 1
            if best is None or entry[3] > best_score:
                best, best_score = node, entry[3]
            if found >= want:
                break
        self.next_start = (start + processed) % total
        if best is None:
            return None, Diagnosis(total, reasons or collections.Counter())
        return best, None

    def scores(self, pod, node):
        """{scorer name: score} for one node (for tests and explanations)."""
        return {s.__name__: s(pod, node) for s in self.scorers}
