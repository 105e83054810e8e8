"""The agent asks the API whether a caller's token may read a pod before serving its logs."""
import pytest

from agent.log_access import MAX_REMEMBERED, TRUST_SECONDS, CannotCheck, LogAccess
from shepherd_ha.client import ApiError, NoReplicaReachable


class FakeClient:
    def __init__(self, answers, token, calls):
        self.answers, self.token, self.calls = answers, token, calls

    def get(self, resource, name, namespace=None, consistent=True):
        self.calls.append((self.token, resource, namespace, name, consistent))
        answer = self.answers.get(self.token)
        if isinstance(answer, Exception):
            raise answer
        return {"metadata": {"name": name}}

    def close(self):
        pass


def status(code):
    return ApiError({"code": code, "reason": "x", "message": "m%d" % code})


@pytest.fixture
def world():
    now = [100.0]
    calls = []
    answers = {"viewer": None, "stranger": status(401), "nobody": status(403), "gone": status(404),
               "sick": status(503), "alone": NoReplicaReachable(["http://127.0.0.1:1"], "connection refused")}
    access = LogAccess(["http://127.0.0.1:1"], clock=lambda: now[0],
                       client_factory=lambda token: FakeClient(answers, token, calls))
    return access, calls, now


def test_the_tokens_own_read_of_the_pod_decides(world):
    access, calls, _ = world
    assert access.may_read("viewer", "default", "web") is True
    assert calls == [("viewer", "pods", "default", "web", False)]      # local state is enough
    assert access.may_read("stranger", "default", "web") is False
    assert access.may_read("nobody", "default", "web") is False
    assert access.may_read("gone", "default", "web") is True          # may read pods; the pod is just gone
    for token in ("sick", "alone"):
        with pytest.raises(CannotCheck):
            access.may_read(token, "default", "web")


def test_a_good_answer_is_trusted_for_a_while_and_per_pod(world):
    access, calls, now = world
    assert access.may_read("viewer", "default", "web")
    assert access.may_read("viewer", "default", "web")
    assert len(calls) == 1
    assert access.may_read("viewer", "default", "db")
    assert len(calls) == 2
    now[0] += TRUST_SECONDS + 1
    assert access.may_read("viewer", "default", "web")
    assert len(calls) == 3
    access.may_read("stranger", "default", "web")
    access.may_read("stranger", "default", "web")
    assert [c[0] for c in calls[3:]] == ["stranger", "stranger"]     # refusals are never remembered


def test_what_is_remembered_stays_bounded(world):
    access, _, _ = world
    for i in range(MAX_REMEMBERED + 10):
        access.may_read("viewer", "default", "pod-%d" % i)
    assert len(access._good) <= MAX_REMEMBERED
