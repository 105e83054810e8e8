"""Which PodInfo fields a filter or scorer reads, so pods that agree on all of them can
share its verdicts (algorithm.NodePicker): the replicas of one deployment are judged
once per node state, not once each.

A function declares its fields with `@reads("cpu", "memory")`; the picker's signature
of a pod is the tuple of the fields its functions declare together. A function that
declares nothing, or reads `obj` (the whole manifest: anything), is judged per pod.
`undeclared_reads` runs a function on a pod that records what it touches, so a test
catches a declaration that misses a field (tests/unit/test_scheduler_reads.py).

On the node side a shared verdict is kept until the node gets another pod or the
most pods any node has of the pod's owner changes: a function reading anything else
of other nodes (through `node.view`) must not declare its reads.
"""
import operator

from .view import PodInfo

POD_FIELDS = frozenset(PodInfo.__slots__)
OPAQUE = frozenset({"obj"})     # reading these means "anything of the pod": no sharing

# Fields whose values are not hashable as they are: how they enter a signature.
_KEY_FORMS = {"node_selector": lambda selector: tuple(sorted(selector.items())) if selector else ()}


def reads(*fields):
    """Decorator: the PodInfo fields a filter or scorer reads (a misspelt one fails here)."""
    unknown = sorted(set(fields) - POD_FIELDS)
    if unknown:
        raise ValueError("reads(%s): PodInfo has no field %s; it has %s"
                         % (", ".join(map(repr, fields)), ", ".join(unknown), ", ".join(sorted(POD_FIELDS))))

    def mark(function):
        function.reads = tuple(fields)
        return function
    return mark


def shared_fields(functions):
    """The sorted union of the fields the functions declare, or None when one of them
    declares nothing or reads the whole pod (its verdicts cannot be shared)."""
    fields = set()
    for function in functions:
        declared = getattr(function, "reads", None)
        if declared is None or OPAQUE.intersection(declared):
            return None
        fields.update(declared)
    return tuple(sorted(fields))


def signature_function(fields):
    """pod -> a hashable tuple of those fields (built once per picker, run once per pod)."""
    plain = [name for name in fields if name not in _KEY_FORMS]
    formed = [(operator.attrgetter(name), _KEY_FORMS[name]) for name in fields if name in _KEY_FORMS]
    if len(plain) > 1:
        get_plain = operator.attrgetter(*plain)        # a tuple, at C speed
    elif plain:
        get_one = operator.attrgetter(plain[0])
        get_plain = lambda pod: (get_one(pod),)        # noqa: E731
    else:
        get_plain = lambda pod: ()                     # noqa: E731
    if not formed:
        return get_plain

    def signature(pod):
        return get_plain(pod) + tuple([form(get(pod)) for get, form in formed])
    return signature


class RecordingPod:
    """A PodInfo stand-in that notes every field read through it."""

    def __init__(self, pod):
        object.__setattr__(self, "_pod", pod)
        object.__setattr__(self, "touched", set())

    def __getattr__(self, name):
        self.touched.add(name)
        return getattr(self._pod, name)

    def __setattr__(self, name, value):
        raise AttributeError("a filter or scorer must not change the pod (it set %s)" % name)


def undeclared_reads(function, pod, node):
    """The PodInfo fields `function(pod, node)` reads without declaring them."""
    recorder = RecordingPod(pod)
    function(recorder, node)
    return recorder.touched - set(getattr(function, "reads", ()))
