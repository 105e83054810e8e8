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
    """Filters and scores nodes for pods, one pass at a time."""

    def __init__(self, filters, scorers, percentage=0, minimum=MIN_FEASIBLE_NODES):
        self.filters = list(filters)
        self.scorers = list(scorers)
        self.percentage = percentage
        self.minimum = minimum
        self.next_start = 0

    def pick(self, pod, view):
        """(NodeInfo, None) for the best node, or (None, Diagnosis)."""
        nodes = view.nodes
        total = len(nodes)
        if total == 0:
            return None, Diagnosis(0, collections.Counter())
        want = feasible_nodes_to_find(total, self.percentage, self.minimum)
        filters = self.filters
        feasible = []
        reasons = None
        start = self.next_start % total
        processed = 0
        for i in range(total):
            node = nodes[(start + i) % total]
            processed += 1
            for check in filters:
                reason = check(pod, node)
                if reason:
                    if reasons is None:
                        reasons = collections.Counter()
                    reasons[reason] += 1
                    break
            else:
                feasible.append(node)
                if len(feasible) >= want:
                    break
        self.next_start = (start + processed) % total
        if not feasible:
            return None, Diagnosis(total, reasons or collections.Counter())
        if len(feasible) == 1 or not self.scorers:
            return feasible[0], None
        return self.best(pod, feasible), None

    def best(self, pod, feasible):
        scorers = self.scorers
        n = float(len(scorers))
        best, best_score = None, None
        for node in feasible:
            score = 0.0
            for scorer in scorers:
                score += scorer(pod, node)
            score /= n
            if best_score is None or score > best_score:
                best, best_score = node, score
        return best

    def scores(self, pod, node):
        """{scorer name: score} for one node (for tests and explanations)."""
        return {s.__name__: s(pod, node) for s in self.scorers}
