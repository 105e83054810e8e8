"""Filters and scorers declare the PodInfo fields they read, and the picker's signature
(which pods share verdicts) is built from those declarations: a function reading a
field it does not declare is caught here, before it gives wrong shared verdicts."""
import itertools

import pytest

from shepherd_ha.controllers.scheduling import filters as F
from shepherd_ha.controllers.scheduling import scorers as S
from shepherd_ha.controllers.scheduling.algorithm import NodePicker
from shepherd_ha.controllers.scheduling.pod_reads import POD_FIELDS, reads, undeclared_reads
from shepherd_ha.controllers.scheduling.view import PodInfo, ViewBuilder

from test_scheduler_support import node, pod, stamped

# Pods and nodes that take every branch of the built-in functions: requests or none,
# a selector, host ports, an owner; nodes ready or not, cordoned, full, with ports in
# use, with pods of the owner, with nothing allocatable.
PODS = [pod("plain"), pod("cpu", cpu="500m"), pod("mem", memory="1Gi"), pod("both", cpu="3", memory="7Gi"),
        pod("sel", selector={"disk": "ssd"}), pod("sel2", selector={"disk": "ssd", "zone": "b"}),
        pod("port", host_port=80), pod("udp", host_port=80, protocol="UDP"), pod("owned", owner="web"),
        pod("all", cpu="1", memory="1Gi", selector={"disk": "ssd"}, host_port=8080, owner="web")]
NODES = [node("ready", labels={"disk": "ssd", "zone": "a"}), node("notready", ready="False"),
         node("cordoned", unschedulable=True), node("full", pods="1"), node("tiny", cpu="0", memory="0"),
         node("busy", cpu="2", memory="2Gi")]
BOUND = [pod("b1", cpu="1", memory="1Gi", node_name="busy", host_port=80, owner="web"),
         pod("b2", node_name="full"), pod("b3", owner="web", node_name="ready", host_port=8080)]


def view():
    built, _ = ViewBuilder().build([stamped("nodes", n) for n in NODES], [stamped("pods", p) for p in BOUND])
    return built


def undeclared(functions):
    """{function name: fields read without declaring them} over every pod x node."""
    v = view()
    out = {}
    for function, p, n in itertools.product(functions, PODS, v.nodes):
        extra = undeclared_reads(function, PodInfo(stamped("pods", p)), n)
        if extra:
            out.setdefault(function.__name__, set()).update(extra)
    return out


def test_every_builtin_function_declares_what_it_reads():
    for function in F.FILTERS + S.SCORERS:
        assert hasattr(function, "reads"), "%s declares no reads" % function.__name__
    assert undeclared(F.FILTERS + S.SCORERS) == {}


def test_a_function_reading_an_undeclared_field_is_caught():
    @reads("cpu")
    def cpu_and_memory(pod, node):
        if pod.cpu and pod.memory > node.alloc_memory:
            return "too big"
        return None

    assert undeclared(F.FILTERS + [cpu_and_memory]) == {"cpu_and_memory": {"memory"}}


def test_a_misspelt_field_fails_at_declaration():
    with pytest.raises(ValueError, match="no field cpuu"):
        reads("cpu", "cpuu")
    assert {"cpu", "memory", "node_selector", "host_ports", "owner_uid"} <= POD_FIELDS


def test_the_signature_is_the_union_of_the_declarations():
    picker = NodePicker(F.FILTERS, S.SCORERS)
    assert picker.share_verdicts
    declared = set().union(*(f.reads for f in F.FILTERS + S.SCORERS))
    assert set(picker.signature_fields) == declared
    only_cpu = NodePicker([F.cpu_fits], [])
    assert only_cpu.signature_fields == ("cpu",)


def test_functions_that_declare_nothing_or_read_the_whole_pod_share_nothing():
    assert not NodePicker(F.FILTERS + [lambda p, n: None], S.SCORERS).share_verdicts
    assert not NodePicker(F.FILTERS, [lambda p, n: 1.0]).share_verdicts
    assert not NodePicker(F.FILTERS + [reads("obj")(lambda p, n: None)], S.SCORERS).share_verdicts


def test_a_custom_filter_field_splits_shared_verdicts():
    """Two pods equal in everything the built-ins read, but not in the field a custom
    filter declares: each gets its own verdict."""
    @reads("key")
    def only_first(pod, node):
        return None if pod.key[1] == "first" else "reserved for first"

    v = view()
    picker = NodePicker(F.FILTERS + [only_first], S.SCORERS)
    assert picker.share_verdicts and "key" in picker.signature_fields
    first, found = picker.pick(PodInfo(stamped("pods", pod("first"))), v)
    assert first is not None and found is None
    second, diagnosis = picker.pick(PodInfo(stamped("pods", pod("second"))), v)
    assert second is None and "reserved for first" in diagnosis.message()
