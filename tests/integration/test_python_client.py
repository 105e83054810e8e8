"""The official Python client (`kubernetes` 37, typed pydantic models that refuse a missing
required field or a wrong type) against a real 3-replica cluster over TLS with bearer tokens,
through the kubeconfig `local up` writes (DIR/kubeconfig):

- every kind the API serves: create, read, list (label selector, all namespaces), patch
  with the client's default content type (strategic merge) and with a merge patch, replace
  (read-modify-replace; a stale resourceVersion is a 409), delete, and a watch that sees it
  all as typed objects in order, never a None or a non-dict event;
- a Node and a Pod written by a real agent (hollow runtime) deserialize as typed objects;
- a long watch through a follower while the leader is SIGKILLed, and a watch whose own
  replica is SIGKILLed and resumes from its last resourceVersion on another replica: every
  object a background writer made is seen exactly once, in revision order.
"""
import uuid

import pytest
from kubernetes import client as k
from kubernetes.client.rest import ApiException
import kubernetes.watch

from .helpers import Cluster, unique, wait_for
from .python_client_kit import KINDS, MERGE, api_client, verb_function
from .python_client_kit import now as kit_now
from .python_client_watch import ResumingWatch, Writer

pytestmark = pytest.mark.integration

NS = "pyclient"
RUN = uuid.uuid4().hex[:8]
WATCH_TIMEOUT = 60
READY_TIMEOUT = 90        # a loaded CI machine can take several elections to settle


def tls_cluster(directory):
    c = Cluster(directory, replicas=3, auth=True, tls=True)
    try:
        c.start(timeout=READY_TIMEOUT)
    except BaseException:
        c.stop_all()
        raise
    return c


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    c = tls_cluster(tmp_path_factory.mktemp("pyclient"))
    request.addfinalizer(lambda: (c.lc.stop_agents(5), c.stop_all()))
    return c


@pytest.fixture(scope="module")
def typed(cluster):
    """An ApiClient made from DIR/kubeconfig alone, and the test namespace."""
    api = api_client(cluster.lc.kubeconfig_path)
    core = k.CoreV1Api(api)
    try:
        core.create_namespace(k.V1Namespace(metadata=k.V1ObjectMeta(name=NS)))
    except ApiException as exc:
        assert exc.status == 409, exc
    yield api
    api.close()


def test_the_kubeconfig_is_tls_with_a_token_and_nothing_works_without_it(cluster, typed):
    assert typed.configuration.host.startswith("https://127.0.0.1:")
    assert typed.configuration.api_key.get("BearerToken", "").startswith("Bearer ")
    assert k.VersionApi(typed).get_code().git_version.startswith("v1.32.0-shepherd.")
    anonymous = api_client(cluster.lc.kubeconfig_path)
    anonymous.configuration.api_key = {}
    with pytest.raises(ApiException) as err:
        k.CoreV1Api(anonymous).list_namespaced_config_map(NS)
    assert err.value.status == 401
    anonymous.close()


def test_typed_discovery(typed):
    """The typed discovery calls (their paths end in a slash) name every group and kind we serve."""
    assert k.CoreApi(typed).get_api_versions().versions == ["v1"]
    groups = {g.name: [v.group_version for v in g.versions] for g in k.ApisApi(typed).get_api_versions().groups}
    assert groups["apps"] == ["apps/v1"] and groups["rbac.authorization.k8s.io"] == ["rbac.authorization.k8s.io/v1"]
    assert k.AppsApi(typed).get_api_group().preferred_version.group_version == "apps/v1"
    assert k.CoordinationApi(typed).get_api_group().name == "coordination.k8s.io"
    served = set()
    for api in (k.CoreV1Api, k.AppsV1Api, k.CoordinationV1Api, k.RbacAuthorizationV1Api):
        served |= {r.name for r in api(typed).get_api_resources().resources if "/" not in r.name}
    assert served == {kind.plural for kind in KINDS}


def _args(kind):
    return (NS,) if kind.namespaced else ()


def _watch_until_deleted(api, kind, name, resource_version):
    """Every event of `name` since `resource_version`, up to and including its DELETED."""
    events = []
    watch = kubernetes.watch.Watch()
    for event in watch.stream(verb_function(api, kind, "list"), *_args(kind), resource_version=resource_version,
                              field_selector="metadata.name=" + name, timeout_seconds=WATCH_TIMEOUT):
        events.append(event)
        if isinstance(event, dict) and event.get("type") == "DELETED":
            watch.stop()
    return events


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.plural)
def test_every_verb_of_every_kind_typed(typed, kind):
    api = kind.api(typed)
    call = lambda verb, *args, **kw: verb_function(api, kind, verb)(*args, **kw)  # noqa: E731
    ns = _args(kind)
    name = unique("py-" + kind.plural[:10])
    labels = {"pyclient-kind": kind.plural, "pyclient-run": RUN}
    since = call("list", *ns, limit=1).metadata.resource_version

    created = call("create", *ns, kind.build(name, labels))
    assert isinstance(created, kind.model) and created.metadata.name == name and created.metadata.uid
    assert created.metadata.labels == labels
    assert kind.created_check is None or kind.created_check(created), created
    read = call("read", name, *ns)
    assert isinstance(read, kind.model) and read.metadata.uid == created.metadata.uid

    selected = call("list", *ns, label_selector="pyclient-kind=%s,pyclient-run=%s" % (kind.plural, RUN))
    assert [o.metadata.name for o in selected.items] == [name]
    assert all(isinstance(o, kind.model) for o in selected.items)
    assert call("list", *ns, label_selector="pyclient-run=%s,pyclient-kind=none" % RUN).items == []
    # everything of the kind, including what controllers and the server made, deserializes typed
    everything = call("list", *ns).items
    assert name in [o.metadata.name for o in everything] and all(isinstance(o, kind.model) for o in everything)
    if kind.namespaced:
        across = verb_function(api, kind, "list", all_namespaces=True)().items
        assert (NS, name) in [(o.metadata.namespace, o.metadata.name) for o in across]

    strategic = call("patch", name, *ns, kind.strategic)         # the client's default: strategic merge
    assert isinstance(strategic, kind.model) and kind.strategic_check(strategic), strategic
    merged = call("patch", name, *ns, kind.merge, _content_type=MERGE)
    assert isinstance(merged, kind.model) and kind.merge_check(merged), merged
    assert strategic.metadata.labels.items() >= labels.items() and merged.metadata.labels.items() >= labels.items()

    replaced = _read_modify_replace(call, kind, name, ns)
    assert isinstance(replaced, kind.model) and kind.replace_check(replaced), replaced
    stale = call("read", name, *ns)
    stale.metadata.resource_version = created.metadata.resource_version
    kind.mutate(stale)
    with pytest.raises(ApiException) as err:
        call("replace", name, *ns, stale)
    assert err.value.status == 409, err.value
    written = [created, strategic, merged, replaced]
    assert len({o.metadata.resource_version for o in written}) == 4, "every write is a new revision"

    call("delete", name, *ns)
    events = _watch_until_deleted(api, kind, name, since)
    assert all(isinstance(e, dict) for e in events), events
    assert [e["type"] for e in events][:1] == ["ADDED"] and events[-1]["type"] == "DELETED", \
        [e["type"] for e in events]
    assert {e["type"] for e in events[1:-1]} <= {"MODIFIED"}
    assert all(isinstance(e["object"], kind.model) for e in events), [type(e["object"]) for e in events]
    seen = [e["object"].metadata.resource_version for e in events]
    assert [int(rv) for rv in seen] == sorted(int(rv) for rv in seen) and len(set(seen)) == len(seen)
    assert [o.metadata.resource_version for o in written] == [rv for rv in seen if rv in
                                                              {o.metadata.resource_version for o in written}]
    assert wait_for("%s %s gone" % (kind.plural, name), lambda: _read_status(call, name, ns), timeout=30) == 404


def _read_modify_replace(call, kind, name, ns, attempts=5):
    """client-go's RetryOnConflict: a controller writing status between our read and our
    replace makes the replace a 409, so read again (a few times, then the 409 stands)."""
    for attempt in range(attempts):
        current = call("read", name, *ns)
        kind.mutate(current)
        try:
            return call("replace", name, *ns, current)
        except ApiException as exc:
            if exc.status != 409 or attempt == attempts - 1:
                raise


def _read_status(call, name, ns):
    try:
        call("read", name, *ns)
    except ApiException as exc:
        return exc.status


def test_idle_watches_yield_only_events_with_and_without_bookmarks_and_deserialization(typed):
    """Past the bookmark interval (5 s) with nothing happening: no None, no bare line, in
    every way the client reads a stream."""
    core = k.CoreV1Api(typed)
    rv = core.list_namespaced_config_map(NS, limit=1).metadata.resource_version
    quiet = "pyclient-idle=" + RUN
    for options in ({}, {"allow_watch_bookmarks": True}, {"deserialize": False},
                    {"deserialize": False, "allow_watch_bookmarks": True}):
        events = list(kubernetes.watch.Watch().stream(core.list_namespaced_config_map, NS, label_selector=quiet,
                                                      resource_version=rv, timeout_seconds=7, **options))
        assert all(isinstance(e, dict) and e["type"] == "BOOKMARK" for e in events), (options, events)
        if options.get("allow_watch_bookmarks"):
            assert events, "a bookmark within 7 s: %s" % options
            assert all(int(e["object"]["metadata"]["resourceVersion"]) >= int(rv) for e in events)
        else:
            assert events == [], options


def test_typed_subresources_scale_and_status(typed):
    apps, core = k.AppsV1Api(typed), k.CoreV1Api(typed)
    name = unique("py-scale")
    selector = {"pyclient": name}
    apps.create_namespaced_deployment(NS, k.V1Deployment(metadata=k.V1ObjectMeta(name=name), spec=k.V1DeploymentSpec(
        replicas=0, selector=k.V1LabelSelector(match_labels=selector), template=k.V1PodTemplateSpec(
            metadata=k.V1ObjectMeta(labels=selector), spec=k.V1PodSpec(containers=[
                k.V1Container(name="main", image="nginx:1.25")])))))
    scale = apps.read_namespaced_deployment_scale(name, NS)
    assert isinstance(scale, k.V1Scale) and scale.spec.replicas == 0
    patched = apps.patch_namespaced_deployment_scale(name, NS, {"spec": {"replicas": 2}})
    assert isinstance(patched, k.V1Scale) and patched.spec.replicas == 2
    # read-modify-replace, again on a 409 as a client does: the deployment controller's
    # status writes move the resourceVersion the Scale carries
    for attempt in range(10):
        scale = apps.read_namespaced_deployment_scale(name, NS)
        scale.spec.replicas = 0
        try:
            replaced = apps.replace_namespaced_deployment_scale(name, NS, scale)
            break
        except ApiException as exc:
            if exc.status != 409 or attempt == 9:
                raise
    assert replaced.spec.replicas == 0
    assert apps.read_namespaced_deployment(name, NS).spec.replicas == 0
    status = apps.read_namespaced_deployment_status(name, NS)
    assert isinstance(status, k.V1Deployment) and status.metadata.name == name
    wait_for("a ReplicaSet of %s" % name, lambda: [r for r in apps.list_namespaced_replica_set(
        NS, label_selector="pyclient=" + name).items], timeout=60)
    rs = apps.list_namespaced_replica_set(NS, label_selector="pyclient=" + name).items[0]
    assert isinstance(apps.read_namespaced_replica_set_scale(rs.metadata.name, NS), k.V1Scale)
    apps.delete_namespaced_deployment(name, NS)

    node = unique("py-statusnode")
    core.create_node(k.V1Node(metadata=k.V1ObjectMeta(name=node)))
    t = kit_now()
    condition = {"type": "Ready", "status": "False", "reason": "Typed", "message": "from the typed client",
                 "lastHeartbeatTime": t, "lastTransitionTime": t}
    patched = core.patch_node_status(node, {"status": {"conditions": [condition]}})
    assert isinstance(patched, k.V1Node) and [c.type for c in patched.status.conditions] == ["Ready"]
    # conditions merge by type (strategic): another type is added beside Ready
    patched = core.patch_node_status(node, {"status": {"conditions": [dict(condition, type="MemoryPressure")]}})
    assert sorted(c.type for c in patched.status.conditions) == ["MemoryPressure", "Ready"]
    current = core.read_node_status(node)
    current.status.conditions = [c for c in current.status.conditions if c.type == "Ready"]
    assert [c.type for c in core.replace_node_status(node, current).status.conditions] == ["Ready"]
    core.delete_node(node)


def test_an_agents_node_and_pod_are_typed_objects(cluster, typed):
    """What a real agent writes (nodeInfo, addresses, conditions, containerStatuses) satisfies
    the typed models' required fields."""
    node = "pyc-node-%s" % RUN
    cluster.lc.add_agent(node, "hollow")
    cluster.lc.start_agent(node)
    core = k.CoreV1Api(typed)

    def ready():
        for n in core.list_node().items:
            if n.metadata.name == node and any(c.type == "Ready" and c.status == "True"
                                               for c in n.status.conditions or []):
                return n
    listed = wait_for("node %s Ready (typed list_node)" % node, ready, timeout=60)
    info = core.read_node(node).status.node_info
    assert isinstance(info, k.V1NodeSystemInfo) and listed.status.node_info == info
    for field in ("boot_id", "kernel_version", "kube_proxy_version", "machine_id", "os_image", "system_uuid",
                  "architecture", "operating_system", "container_runtime_version", "kubelet_version"):
        assert isinstance(getattr(info, field), str), field
    assert {a.type for a in listed.status.addresses} >= {"InternalIP", "Hostname"}
    assert listed.status.capacity and listed.status.allocatable
    name = unique("py-agentpod")
    core.create_namespaced_pod(NS, k.V1Pod(metadata=k.V1ObjectMeta(name=name), spec=k.V1PodSpec(
        node_name=node, containers=[k.V1Container(name="main", image="nginx:1.25")])))
    pod = wait_for("pod %s Running" % name, lambda: (lambda p: p if p.status.phase == "Running" else None)(
        core.read_namespaced_pod(name, NS)), timeout=60)
    assert isinstance(pod.status.container_statuses[0], k.V1ContainerStatus)
    assert pod.status.container_statuses[0].state.running.started_at is not None
    assert pod.status.pod_ip and pod.status.start_time is not None
    core.delete_namespaced_pod(name, NS)
    wait_for("pod %s gone" % name, lambda: name not in [p.metadata.name for p in
                                                         core.list_namespaced_pod(NS).items], timeout=60)
    cluster.lc.stop_agent(node, 5)


# ---------------------------------------------------------------- long watches through replica faults

@pytest.fixture
def fresh(tmp_path_factory, request):
    c = tls_cluster(tmp_path_factory.mktemp("pyclient-faults"))
    request.addfinalizer(c.stop_all)
    api = api_client(c.lc.kubeconfig_path)
    k.CoreV1Api(api).create_namespace(k.V1Namespace(metadata=k.V1ObjectMeta(name=NS)))
    api.close()
    return c


def _clients(cluster):
    """A typed client per replica, by the kubeconfig's context of each (shepherd-ID)."""
    clients = {ident: api_client(cluster.lc.kubeconfig_path, "shepherd-" + ident) for ident in cluster.ids}
    assert {ident: c.configuration.host for ident, c in clients.items()} == cluster.urls
    return clients


def _exactly_once_in_order(watch, writer):
    sentinel = writer.write_one("sentinel")
    wait_for("the watch to see the sentinel %s" % sentinel, lambda: sentinel in watch.names(), timeout=60)
    watch.stop()
    names = watch.names()
    assert len(names) == len(set(names)), "an event came twice: %s" % sorted(
        n for n in set(names) if names.count(n) > 1)
    assert set(names) == set(writer.written) | {sentinel}, (
        "missed: %s; not written: %s" % (sorted(set(writer.written) - set(names)),
                                         sorted(set(names) - set(writer.written) - {sentinel})))
    revisions = [int(rv) for rv in watch.revisions()]
    assert revisions == sorted(revisions), "events out of revision order"
    assert watch.problems == [], watch.problems


def test_a_watch_through_a_follower_sees_every_write_while_the_leader_is_killed(fresh):
    clients = _clients(fresh)
    leader = fresh.leader()
    follower = fresh.followers(leader)[0]
    writer = Writer(clients, NS, "lk")
    watch = ResumingWatch(clients, NS, writer.selector, [follower],
                          k.CoreV1Api(clients[follower]).list_namespaced_config_map(NS).metadata.resource_version)
    try:
        writer.start()
        watch.start()
        writer.wait_written(30, timeout=120)
        fresh.kill(leader)
        writer.drop(leader)
        new_leader = fresh.leader(via=follower, timeout=60)
        assert new_leader != leader
        before = len(writer.written)
        writer.wait_written(before + 30, timeout=120)     # written after the new leader was elected
        writer.stop()
        _exactly_once_in_order(watch, writer)
        assert set(watch.hosts_used()) == {follower}
    finally:
        writer.stop()
        watch.stop()
    print("leader killed: %d objects, %d stream(s) on %s" % (len(writer.written), watch.streams, follower))


@pytest.mark.parametrize("role", ["follower", "leader"])
def test_a_watch_whose_replica_is_killed_resumes_on_another_from_its_last_revision(fresh, role):
    clients = _clients(fresh)
    leader = fresh.leader()
    target = leader if role == "leader" else fresh.followers(leader)[0]
    others = [i for i in fresh.ids if i != target]
    writer = Writer(clients, NS, "rk")
    watch = ResumingWatch(clients, NS, writer.selector, [target] + others,
                          k.CoreV1Api(clients[target]).list_namespaced_config_map(NS).metadata.resource_version)
    try:
        writer.start()
        watch.start()
        writer.wait_written(30, timeout=120)
        wait_for("the watch to see objects on %s" % target, lambda: len(watch.names()) >= 10, timeout=30)
        fresh.kill(target)
        writer.drop(target)
        writer.wait_written(len(writer.written) + 30, timeout=120)
        writer.stop()
        _exactly_once_in_order(watch, writer)
        hosts = watch.hosts_used()
        assert hosts[0] == target and len(hosts) >= 2 and target not in hosts[1:], hosts
        assert watch.resumed_from, "the watch never resumed from a resourceVersion"
    finally:
        writer.stop()
        watch.stop()
    print("%s killed under the watch: %d objects, resumed from %s" % (role, len(writer.written), watch.resumed_from))


def test_kit_covers_every_kind_the_api_serves():
    from shepherd_ha.model.resources import RESOURCES
    assert {kind.plural for kind in KINDS} == set(RESOURCES), "a kind without a typed case"
