"""Pod addresses out of this node's block, picked by the agent (not by Docker).

Docker's own IPAM hands a freed address straight back out, so a client still
talking to a deleted pod's IP reaches its successor. Here a cursor moves forward
through the block (like CNI's host-local): a freed address comes back only after
every other one was handed out. A pod keeps its address across container
restarts (asked again with the same pod uid while nobody else holds it).

The state comes back after an agent restart from what runs: `sync(attached)` with
the addresses Docker shows on the pod network ({address: pod uid}); the cursor
starts after the highest of them, or where a state file (if given) left it.
"""
import ipaddress
import json
import logging
import os
import threading
import time

log = logging.getLogger(__name__)

PENDING_SECONDS = 60.0      # an address handed out but not yet seen attached stays taken this long
REMEMBER_SECONDS = 600.0    # a pod's address stays its own this long after its container went


class AddressesExhausted(Exception):
    pass


class PodAddresses:
    def __init__(self, pod_cidr, state_file=None, clock=time.monotonic):
        self.net = ipaddress.IPv4Network(pod_cidr)
        hosts = list(self.net.hosts())
        self.gateway = hosts[0]                 # the bridge's own address
        self.pool = hosts[1:]
        self.state_file = state_file
        self.clock = clock
        self._lock = threading.Lock()
        self._attached = {}                     # address -> pod uid, as Docker last showed
        self._pending = {}                      # address -> (pod uid, handed out at)
        self._by_pod = {}                       # pod uid -> (address, last seen)
        self._cursor = self._load_cursor()      # index in pool of the last address handed out

    def _load_cursor(self):
        if not self.state_file:
            return -1
        try:
            with open(self.state_file) as f:
                address = ipaddress.IPv4Address(json.load(f)["last"])
            return self.pool.index(address)
        except (OSError, ValueError, KeyError, TypeError):
            return -1

    def _save_cursor(self):
        if not self.state_file:
            return
        try:
            os.makedirs(os.path.dirname(self.state_file), exist_ok=True)
            tmp = self.state_file + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"block": str(self.net), "last": str(self.pool[self._cursor])}, f)
            os.replace(tmp, self.state_file)
        except OSError as exc:
            log.warning("cannot save the address cursor in %s: %s", self.state_file, exc)

    def sync(self, attached):
        """What Docker shows attached to the pod network now: {address: pod uid or ''}."""
        now = self.clock()
        with self._lock:
            self._attached = {ipaddress.IPv4Address(a): uid for a, uid in attached.items()
                              if ipaddress.IPv4Address(a) in self.net}
            for address, uid in self._attached.items():
                if uid:
                    self._by_pod[uid] = (address, now)
                self._pending.pop(address, None)
            if self._cursor < 0 and self._attached:
                self._cursor = max(self.pool.index(a) for a in self._attached if a in self.pool)

    def _taken(self, now):
        taken = set(self._attached)
        taken.update(a for a, (_, at) in self._pending.items() if now - at < PENDING_SECONDS)
        taken.update(a for a, seen in self._by_pod.values() if now - seen < REMEMBER_SECONDS)
        return taken

    def assign(self, pod_uid):
        """An address for pod `pod_uid`: its own again if it had one, else the next free one."""
        now = self.clock()
        with self._lock:
            mine = self._by_pod.get(pod_uid)
            if mine is not None:
                address = mine[0]
                holder = self._attached.get(address)
                pending = self._pending.get(address)
                if holder in (None, "", pod_uid) and (pending is None or pending[0] == pod_uid):
                    self._hand_out(address, pod_uid, now)
                    return str(address)
            taken = self._taken(now)
            for step in range(1, len(self.pool) + 1):
                index = (self._cursor + step) % len(self.pool)
                if self.pool[index] not in taken:
                    self._cursor = index
                    self._hand_out(self.pool[index], pod_uid, now)
                    self._save_cursor()
                    return str(self.pool[index])
        raise AddressesExhausted("no free pod address left in %s (%d in use or recently freed)"
                                 % (self.net, len(self.pool)))

    def _hand_out(self, address, pod_uid, now):
        self._pending[address] = (pod_uid, now)
        self._by_pod[pod_uid] = (address, now)
