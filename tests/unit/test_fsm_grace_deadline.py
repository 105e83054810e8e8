"""A gracefully deleted pod's deletionTimestamp is when its grace period ends, as
Kubernetes writes it (command format 4): in the store, in a dry run's answer, through the
API; a second delete only shortens it; a journal of format 3 replays as it was answered;
and the agent stops the pod at that deadline."""
import threading
import time

import pytest
from real_api import bearer, flask_client

from agent.pod_state import PodState
from agent.pod_termination import Terminator
from shepherd_ha.model.times import format_time, parse_seconds
from shepherd_ha.store import commands as C
from shepherd_ha.store.fsm import StoreFSM

from test_fsm import bound_pod as bound, ns

ASKED = "2026-12-06T01:00:00Z"
PODS = "/api/v1/namespaces/default/pods"


def graceful(name, seconds=None, version=C.VERSION, asked=ASKED):
    op = C.delete("pods", "default", name, graceful={"deletionTimestamp": asked, "gracePeriodSeconds": seconds})
    return dict(C.write([op]), version=version)


@pytest.fixture
def fsm():
    f = StoreFSM()
    assert f.apply(C.write([C.create("namespaces", ns("default"))]))["ok"]
    return f


def marked(fsm, name):
    meta = fsm.get("pods", "default", name)["metadata"]
    return meta["deletionTimestamp"], meta["deletionGracePeriodSeconds"]


def test_the_deadline_is_the_request_plus_the_pods_own_grace_period(fsm):
    assert fsm.apply(C.write([C.create("pods", bound("a", grace=20))]))["ok"]
    result = fsm.apply(graceful("a"))
    assert result["ok"] and result["results"][0].get("terminating"), result
    assert marked(fsm, "a") == ("2026-12-06T01:00:20Z", 20)


def test_a_second_delete_only_shortens_and_moves_the_deadline_back(fsm):
    assert fsm.apply(C.write([C.create("pods", bound("a"))]))["ok"]
    fsm.apply(graceful("a", seconds=60))
    assert marked(fsm, "a") == ("2026-12-06T01:01:00Z", 60)
    later = fsm.apply(graceful("a", seconds=90, asked="2026-12-06T01:00:30Z"))
    assert later["results"][0].get("unchanged") and marked(fsm, "a") == ("2026-12-06T01:01:00Z", 60)
    # asked 30 s after the first: Kubernetes counts the shorter period from the first request
    fsm.apply(graceful("a", seconds=10, asked="2026-12-06T01:00:30Z"))
    assert marked(fsm, "a") == ("2026-12-06T01:00:10Z", 10)


def test_a_journal_of_format_3_replays_with_the_request_time(fsm):
    assert fsm.apply(C.write([C.create("pods", bound("a"))]))["ok"]
    fsm.apply(graceful("a", seconds=60, version=3))
    assert marked(fsm, "a") == (ASKED, 60)
    fsm.apply(graceful("a", seconds=5, version=3, asked="2026-12-06T01:00:30Z"))
    assert marked(fsm, "a") == (ASKED, 5)


def test_the_api_and_a_dry_run_answer_the_deadline():
    client, _ = flask_client(users={"admin": ["system:masters"]})
    client.post("/api/v1/nodes", json={"metadata": {"name": "n1"}}, headers=bearer("admin"))
    for name in ("dry", "real"):
        resp = client.post(PODS, headers=bearer("admin"), json={
            "metadata": {"name": name},
            "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 40,
                     "containers": [{"name": "a", "image": "x"}]}})
        assert resp.status_code == 201, resp.get_json()
    before = time.time()
    dry = client.delete(PODS + "/dry?dryRun=All", headers=bearer("admin"))
    assert dry.status_code == 200, dry.get_json()
    meta = dry.get_json()["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 40
    assert before + 40 - 1 <= parse_seconds(meta["deletionTimestamp"]) <= time.time() + 40
    assert "deletionTimestamp" not in client.get(PODS + "/dry", headers=bearer("admin")).get_json()["metadata"]
    real = client.delete(PODS + "/real", headers=bearer("admin"), json={"gracePeriodSeconds": 15})
    assert real.status_code == 200, real.get_json()
    stored = client.get(PODS + "/real", headers=bearer("admin")).get_json()["metadata"]
    assert stored["deletionGracePeriodSeconds"] == 15
    assert before + 15 - 1 <= parse_seconds(stored["deletionTimestamp"]) <= time.time() + 15


def deadline(due_in, grace, down_for=0.0):
    """Seconds from when the agent first saw the deletion until it kills the pod (a whole
    second of the wall clock: timestamps have whole seconds)."""
    wall = float(int(time.time()))
    state = PodState({"metadata": {"uid": "u", "name": "p", "namespace": "default",
                                   "deletionGracePeriodSeconds": grace,
                                   **({} if due_in is None else
                                      {"deletionTimestamp": format_time(wall + due_in - down_for)})},
                      "spec": {}})
    terminator = Terminator(None, None, None, None, None, None, None, threading.Event())
    return terminator._deadline_of(state, 1000.0, wall) - 1000.0


def test_the_agent_kills_at_the_servers_deadline_within_the_grace_period():
    assert deadline(20, 30) == 21.0, "the server's deadline, a second of slack"
    assert deadline(20, 20) == 20.0, "never more than the grace period (clocks differ)"
    assert deadline(3600, 30) == 30.0, "a server clock far ahead gives the grace period, no more"
    assert deadline(20, 30, down_for=25) == 0.0, "an agent that was down past the deadline kills at once"
    assert deadline(None, 30) == 30.0, "no timestamp: the grace period from now"


def test_a_grace_period_beyond_any_date_gets_a_deadline_68_years_on(fsm):
    p = bound("forever")
    p["spec"]["terminationGracePeriodSeconds"] = 2 ** 63 - 1       # validation lets int64 through
    assert fsm.apply(C.write([C.create("pods", p)]))["ok"]
    result = fsm.apply(graceful("forever"))
    assert result["ok"], result
    assert marked(fsm, "forever") == ("2094-12-24T04:14:07Z", 2 ** 63 - 1)
    fsm.apply(graceful("forever", seconds=30, asked="2026-12-06T01:05:00Z"))
    assert marked(fsm, "forever") == ("2026-12-06T01:00:30Z", 30), "the first request's time plus 30 s"


def test_a_dry_run_of_a_second_delete_answers_as_the_store_would():
    client, _ = flask_client(users={"admin": ["system:masters"]})
    client.post("/api/v1/nodes", json={"metadata": {"name": "n1"}}, headers=bearer("admin"))
    resp = client.post(PODS, headers=bearer("admin"), json={
        "metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "a", "image": "x"}]}})
    assert resp.status_code == 201
    first = client.delete(PODS + "/p", headers=bearer("admin"), json={"gracePeriodSeconds": 60}).get_json()
    dry = client.delete(PODS + "/p?dryRun=All", headers=bearer("admin"), json={"gracePeriodSeconds": 10})
    real = client.delete(PODS + "/p", headers=bearer("admin"), json={"gracePeriodSeconds": 10})
    assert dry.status_code == real.status_code == 200
    moved = parse_seconds(first["metadata"]["deletionTimestamp"]) - 50
    for answer in (dry.get_json(), real.get_json()):
        assert answer["metadata"]["deletionGracePeriodSeconds"] == 10
        assert parse_seconds(answer["metadata"]["deletionTimestamp"]) == moved
