"""What the controller unit tests share: a fake monotonic clock, writes straight into an
in-memory store, and one controller driven by an informer until nothing is left to do."""
from shepherd_ha.controllers.informer import Informer
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.model.defaults import apply_defaults
from shepherd_ha.store.stamping import stamp_new
from tests import waiting


class FakeClock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


class CountingStore(MemoryStore):
    """Records what controllers submit: each write, and each write_many's writes as one
    group (group commit decides how many Raft entries that takes)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.submitted = []
        self._in_batch = False

    def _apply(self, command, timeout):
        if not self._in_batch:
            self.submitted.append(command)
        return super()._apply(command, timeout)

    def _apply_many(self, commands, timeout):
        self.submitted.append({"type": "group", "commands": list(commands)})
        self._in_batch = True
        try:
            return super()._apply_many(commands, timeout)
        finally:
            self._in_batch = False


def write(store, *ops):
    result = store.apply({"type": "write", "key": None, "ops": list(ops)})
    assert result["ok"], result
    return result["results"][0].get("object")


def create(store, resource, obj):
    return write(store, {"op": "create", "resource": resource, "object": stamp_new(apply_defaults(resource, obj))})


def delete(store, resource, name, namespace="default", **extra):
    return write(store, dict({"op": "delete", "resource": resource, "namespace": namespace, "name": name}, **extra))


class ControllerHarness:
    """`build(store)` -> [controller, ...] over a store on a fake clock, fed by one informer;
    `controller` is the first (the one under test), the others work beside it."""

    def __init__(self, build, store=None, clock=None, namespaces=("default",)):
        self.clock = clock or FakeClock()
        self.store = store or MemoryStore(clock=self.clock, namespaces=namespaces)
        self.controller, *self.beside = build(self.store)
        self.informer = Informer(self.store, self.controllers)
        self.informer.start_from_snapshot()

    @property
    def controllers(self):
        """The one under test (a test may swap it) and those beside it."""
        return [self.controller] + list(getattr(self, "beside", ()))

    def settle(self, rounds=50):
        """Deliver changes and reconcile until a round finds nothing to do."""
        for _ in range(rounds):
            pumped = self.informer.pump()
            worked = sum(c.run_until_idle() for c in self.controllers)
            if not pumped and not worked:
                return
        raise AssertionError("controller %s never settled" % self.controller.name)

    def advance(self, seconds):
        self.clock.now += seconds
        self.settle()


def plant(store, resource, obj):
    """Store `obj` as it is, past the API's validation (as an older server, or a bug, might
    have): only stamped with a uid and a creation time."""
    return write(store, {"op": "create", "resource": resource, "object": stamp_new(obj)})


def wait_for(what, check, timeout=10.0, interval=0.02):
    """Poll check() until it returns something true (bounded); returns that."""
    return waiting.wait_for(what, check, timeout, interval)


class MemoryReplica:
    """What ControllerManager needs of a replica, over a MemoryStore: a leader of `term`
    until `leading` is set False (the manager then stops its controllers)."""

    class _Node:
        def __init__(self, replica):
            self._replica = replica
            self.lock = replica.store._lock

        @property
        def fsm(self):
            return self._replica.store.fsm

        def is_leader(self):
            return self._replica.leading

        def term(self):
            return self._replica.term

    class _Committer:
        def __init__(self, store):
            self.call = store._apply
            self.call_many = store._apply_many

    def __init__(self, store, term=2, ident="r1"):
        self.store = store
        self.id = ident
        self.term = term
        self.leading = True
        self.write_timeout = 2.0
        self.watch_log = store.watch_log
        self.node = self._Node(self)
        self.committer = self._Committer(store)
