"""Every field our own writers send is in the schema of known fields
(shepherd_ha/model/known_fields.py). The default fieldValidation is Warn, which DROPS an
unknown field: a writer's field missing from the schema would be silently lost. The
payloads are built by the real writers (agent, controllers, sheepctl manifests, chaos
workloads), never copied."""
import copy
import os
import threading

from shepherd_ha.controllers.informer import Informer
from shepherd_ha.controllers.registry import default_factories
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.model.known_fields import prune_unknown
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.store import commands

from agent import status as S
from agent.events import EventSink
from agent.node import NodeManager
from agent.runtime.hollow_runtime import HollowRuntime
from ctl import manifests

from controller_kit import FakeClock, create

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def assert_all_known(plural, obj, what):
    _, unknown = prune_unknown(plural, obj)
    assert unknown == [], "%s: %s would be dropped as unknown fields" % (what, unknown)


def plural_of(kind):
    [plural] = [p for p, r in RESOURCES.items() if r.kind == kind]
    return plural


def node_manager():
    return NodeManager(client=None, runtime=HollowRuntime("n1"), node_name="n1", address="10.0.0.1",
                       stop=threading.Event(), labels={"zone": "a"}, port=10250, cpu_millicores=2000,
                       memory_bytes=4 << 30)


def test_the_agents_node_lease_and_status_writes_are_all_known():
    nm = node_manager()
    usage = nm.sampler.sample()
    assert_all_known("nodes", nm.node_object(usage), "node registration")
    assert_all_known("nodes", {"status": nm.status(usage)}, "node status")
    assert_all_known("leases", nm.lease_object(), "node lease")


def test_the_agents_pod_status_and_events_are_all_known():
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"nominatedNodeName": "n1"}}
    statuses = [S.container_status("c", "i", S.running("2026-01-01T00:00:00Z"), True, 1,
                                   S.terminated(1, "t0", "t1", container_id="hollow://x"), image_id="sha256:1")]
    status = S.build_pod_status(pod, statuses, "Running", "10.244.1.5", "10.0.0.1", "t", "t",
                                reason="R", message="m")
    assert_all_known("pods", {"status": status}, "pod status")
    assert_all_known("pods", S.merge_patch_for({}, status), "pod status patch")
    poster = EventSink(client=None, node="n1", stop=threading.Event())
    entry = type("Entry", (), {"ref": {"kind": "Pod", "name": "p", "namespace": "default", "uid": "u"},
                               "reason": "Started", "message": "m", "type": "Normal", "count": 2,
                               "first": "t0", "last": "t1"})()
    assert_all_known("events", poster._body(entry), "agent event")


def test_everything_the_controllers_write_is_known():
    """Run every default controller over a node (as the agent registers it), the examples'
    Deployment and Service and the chaos deployments; then every stored object is known."""
    store = MemoryStore(clock=FakeClock(), namespaces=("default", "kube-node-lease"))
    create(store, "nodes", node_manager().node_object())
    loaded = manifests.load([os.path.join(ROOT, "examples")])
    from tests.chaos.probes import deployment_body
    objects = [m.obj for m in loaded] + [deployment_body("web-a", 2, "web-a")]
    for obj in objects:
        plural = plural_of(obj["kind"])
        assert_all_known(plural, obj, "manifest %s" % obj["metadata"]["name"])
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("namespace", "default")
        create(store, plural, obj)
    controllers = []
    for build in default_factories():
        controllers.extend(build(store))
    informer = Informer(store, controllers)
    informer.start_from_snapshot()
    for _ in range(50):
        pumped = informer.pump()
        worked = sum(bool(c.run_until_idle()) for c in controllers)
        if not pumped and not worked:
            break
    # the agent's status of each pod, so the endpoints controller has addresses to write
    for pod in store.list("pods"):
        status = S.build_pod_status(pod, [S.container_status(c["name"], c["image"], S.running("t"), True)
                                          for c in pod["spec"]["containers"]],
                                    "Running", "10.244.0.9", "10.0.0.1", "t", "t")
        pod = dict(pod, status=status)
        meta = pod["metadata"]
        result = store.apply(commands.write([commands.update("pods", meta["namespace"], meta["name"], pod,
                                                             subresource="status")]))
        assert result["ok"], result
    for _ in range(50):
        pumped = informer.pump()
        worked = sum(bool(c.run_until_idle()) for c in controllers)
        if not pumped and not worked:
            break
    seen = set()
    for plural in RESOURCES:
        for obj in store.list(plural):
            seen.add(plural)
            assert_all_known(plural, obj, "stored %s %s" % (plural, obj["metadata"]["name"]))
    # the writers really ran: pods, revisions, endpoints with addresses, events
    assert {"pods", "replicasets", "endpoints", "events", "deployments", "services", "nodes"} <= seen
    [ep] = [e for e in store.list("endpoints") if e["metadata"]["name"] == "web"]
    assert ep["subsets"][0]["addresses"]
