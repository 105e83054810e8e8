"""Deleting a pod on a node leaves it to the node's agent; grace 0 deletes at once."""
import pytest

from .helpers import POD, PODS, call, ensure_namespace, expect, pod

pytestmark = pytest.mark.integration
NS = "graceful"


def test_pod_on_a_node_is_marked_terminating_and_grace_zero_deletes_it(cluster):
    url = cluster.url(cluster.followers()[0])
    ensure_namespace(url, NS)
    expect(call("POST", url + PODS.format(ns=NS), json=pod("bound", node="no-agent-here")), 201)
    expect(call("POST", url + PODS.format(ns=NS), json=pod("unbound")), 201)

    marked = expect(call("DELETE", url + POD.format(ns=NS, name="bound")), 200)
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30, "the pod's terminationGracePeriodSeconds"
    still = expect(call("GET", url + POD.format(ns=NS, name="bound")), 200)
    assert still["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]

    shorter = expect(call("DELETE", url + POD.format(ns=NS, name="bound"), json={"gracePeriodSeconds": 5}), 200)
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 5

    expect(call("DELETE", url + POD.format(ns=NS, name="bound"), params={"gracePeriodSeconds": "0"}), 200)
    expect(call("GET", url + POD.format(ns=NS, name="bound")), 404)

    expect(call("DELETE", url + POD.format(ns=NS, name="unbound")), 200)
    expect(call("GET", url + POD.format(ns=NS, name="unbound")), 404), "an unbound pod goes at once"

    bad = call("DELETE", url + POD.format(ns=NS, name="x"), params={"gracePeriodSeconds": "-1"})
    assert bad.status_code == 400
