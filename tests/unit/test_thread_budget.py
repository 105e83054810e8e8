"""api/thread_budget.py: an API worker's server threads follow the watches open."""
from shepherd_ha.api.flow_control import LONG_RUNNING_OTHER, LONG_RUNNING_SYSTEM, FlowControl, Rejected
from shepherd_ha.api.thread_budget import ThreadBudget


class Dispatcher:
    """What waitress's ThreadedTaskDispatcher offers the budget."""

    def __init__(self, threads):
        self.threads, self.calls = threads, []

    def set_thread_count(self, count):
        self.threads = count
        self.calls.append(count)


def started(flow, classification, user=None):
    """A watch admitted and started: it gives back its seat and keeps its slot."""
    ticket = flow.admit(classification, user=user)
    ticket.release_seat()
    return ticket


def test_grows_by_steps_ahead_of_the_watches_and_shrinks_late():
    budget = ThreadBudget(base=40, ceiling=40 + 200, step=10)
    assert budget.threads == 50                   # nothing held: the base and one step
    dispatcher = Dispatcher(budget.threads)
    budget._dispatcher = dispatcher
    held = 0
    for held in range(1, 121):
        budget.held_changed(lambda: held)
        assert budget.threads >= 40 + held + 1, held      # always a thread free beyond the watches
    assert budget.threads == 170 and dispatcher.threads == 170
    grown = len(dispatcher.calls)
    assert grown == 12                            # one resize per step, not per watch
    for held in range(119, 100, -1):              # 19 end: fewer than two steps spare, kept
        budget.held_changed(lambda: held)
    assert dispatcher.threads == 170 and len(dispatcher.calls) == grown
    for held in range(100, -1, -1):
        budget.held_changed(lambda: held)
    assert dispatcher.threads <= 50 + 20 and budget.threads == dispatcher.threads
    assert budget.resizes == len(dispatcher.calls)


def test_never_past_the_ceiling():
    budget = ThreadBudget(base=40, ceiling=45, step=10)
    assert budget.threads == 45
    budget._dispatcher = Dispatcher(45)
    budget.held_changed(lambda: 5)
    assert budget.threads == 45 and budget._dispatcher.calls == []


def test_follows_flow_controls_long_running_slots():
    flow = FlowControl(max_inflight=8, max_watches=200, queue_wait=0)
    budget = ThreadBudget.of(flow, step=8)
    assert budget.base == flow.threads_without_watches() and budget.ceiling == flow.threads_needed()
    assert budget.ceiling == budget.base + 200
    dispatcher = Dispatcher(budget.threads)
    budget.attach(dispatcher, flow)
    watch = flow.classify("GET", "/api/v1/pods", {"watch": "1", "fieldSelector": "spec.nodeName=n1"})
    other = flow.classify("GET", "/api/v1/configmaps", {"watch": "1", "resourceVersion": "5"})
    assert watch.long_running == LONG_RUNNING_SYSTEM and other.long_running == LONG_RUNNING_OTHER
    tickets = [started(flow, watch) for _ in range(30)] + [started(flow, other, "u%d" % i) for i in range(10)]
    assert flow.long_running_held() == 40
    assert dispatcher.threads == budget.threads >= budget.base + 40
    for ticket in tickets:
        ticket.release()
    assert flow.long_running_held() == 0
    assert dispatcher.threads == budget.threads < budget.base + 2 * 8 + 1


def test_a_refused_watch_starts_no_thread():
    """Neither a full pool nor a user at their bound resizes the threads (a slot taken
    and given back would start a step of threads for nothing)."""
    flow = FlowControl(max_inflight=8, max_watches=40, queue_wait=0, max_watches_per_user=2)
    budget = ThreadBudget.of(flow, step=2)
    dispatcher = Dispatcher(budget.threads)
    budget.attach(dispatcher, flow)
    agents = flow.classify("GET", "/api/v1/pods", {"watch": "1", "fieldSelector": "spec.nodeName=n1"})
    people = flow.classify("GET", "/api/v1/configmaps", {"watch": "1", "resourceVersion": "5"})
    held = [started(flow, agents) for _ in range(30)]          # the agents' pool: 30 of 40, full
    held += [started(flow, people, "alice") for _ in range(2)]  # alice's bound
    calls, resizes = list(dispatcher.calls), budget.resizes
    assert calls and dispatcher.threads >= budget.base + 32
    for classification, user, reason in ((agents, None, "concurrency-limit"), (people, "alice", "per-user")):
        try:
            flow.admit(classification, user=user)
        except Rejected as exc:
            assert exc.reason == reason
        else:
            raise AssertionError("let in: %s" % reason)
    assert dispatcher.calls == calls and budget.resizes == resizes and flow.long_running_held() == 32
    for ticket in held:
        ticket.release()
    assert flow.long_running_held() == 0 and dispatcher.threads < budget.base + 3 * 2 + 1


def test_threads_that_cannot_start_are_counted_and_the_slot_still_works():
    """set_thread_count raising (RuntimeError: can't start new thread): the watch keeps its
    slot and gives it back, the failure is counted, and the next change tries again."""
    flow = FlowControl(max_inflight=8, max_watches=40, queue_wait=0)
    budget = ThreadBudget.of(flow, step=2)
    dispatcher = Dispatcher(budget.threads)
    budget.attach(dispatcher, flow)
    watch = flow.classify("GET", "/api/v1/pods", {"watch": "1", "fieldSelector": "spec.nodeName=n1"})
    held = [started(flow, watch) for _ in range(2)]
    before = budget.threads

    def cannot(count):
        raise RuntimeError("can't start new thread")
    dispatcher.set_thread_count = cannot
    held.append(started(flow, watch))                  # admitted all the same
    assert flow.long_running_held() == 3 and budget.failures == 1 and budget.threads == before
    dispatcher.set_thread_count = Dispatcher.set_thread_count.__get__(dispatcher)
    held.append(started(flow, watch))                  # the next change tries again, and works
    assert budget.threads == dispatcher.threads > before and budget.failures == 1
    for ticket in held:
        ticket.release()
    assert flow.long_running_held() == 0


def test_no_budget_without_limits():
    assert ThreadBudget.of(FlowControl(max_inflight=0, max_watches=4)) is None
    assert ThreadBudget.of(FlowControl(max_inflight=8, max_watches=0)) is None
