"""Service network: puts the leader's --service-cidr into the store, where the FSM
allocates cluster IPs from it (store/service_allocation.py).

One key, committed once per epoch (fenced: a deposed leader's setting is refused)
and again on each resync only if the store holds another value; a failure retries
with backoff.
"""
from shepherd_ha.store import commands
from shepherd_ha.store.raft_node import Unavailable

from .controller import Controller, Retry

KEY = "service-network"


class ServiceNetwork(Controller):
    name = "service-network"
    watches = ()

    def __init__(self, store, events=None, settings=None):
        super().__init__(store, events)
        self.cidr = settings.service_cidr
        self.resync_period = settings.resync_period
        self.done = False
        self.queue.add(KEY)

    def keys_for(self, change):
        return []

    def all_keys(self):
        return [] if self.done else [KEY]

    def reconcile(self, key):
        try:
            result = self.store.submit(commands.service_network(self.cidr, self.store.epoch))
        except Unavailable as exc:
            raise Retry("store unavailable: %s" % exc)
        if not result.get("ok"):
            raise Retry("service network %s refused: %s" % (self.cidr, result.get("message")))
        self.done = True
        if result.get("changed"):
            return "service CIDR set to %s" % self.cidr
        return None


def controllers(store, recorder, settings):
    return [ServiceNetwork(store, recorder, settings)]
