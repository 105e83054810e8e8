"""The proxy's sync loop: Services and Endpoints from the API (list + watch), rules
rendered by rules.render, applied by one iptables-restore per sync.

A change wakes the loop; syncs are at least `min_interval` apart (a burst of
endpoint changes costs one restore). Every `full_interval` a full sync re-checks
the jumps, writes again the chains the kernel lacks and deletes chains of ours it
has but we did not render (an earlier agent's); the first sync, the one after a
failure and one every `rewrite_interval` rewrite every chain (slow with thousands of
Services: iptables-nft takes seconds for 10,000 chains). Otherwise only the chains
whose rules changed are written: the comparison is with what was rendered last
time, never with iptables-save's text.
After the restore, conntrack entries of removed UDP endpoints are deleted.
A failed sync is logged and retried (next time in full); the loop never dies.
"""
import logging
import threading
import time

from shepherd_ha.backoff import Backoff
from shepherd_ha.client import ApiError, ClientError, NoReplicaReachable, WatchExpired

from . import rules
from .conntrack import Conntrack, stale_flows

log = logging.getLogger(__name__)

MIN_INTERVAL = 1.0       # seconds between two syncs at least
FULL_INTERVAL = 30.0     # seconds between full syncs (jumps, chain set)
REWRITE_INTERVAL = 600.0  # seconds between full syncs that rewrite every chain (7 s for 11,000 chains)
RETRY = 2.0              # seconds after a failed sync
CONFLICT_RETRY = 10.0    # seconds between looks while another cluster owns the host's rules
# Reasons of the Events about the node when its proxy stands down and when it proxies again
STOOD_DOWN, RESUMED = "ServiceProxyStoodDown", "ServiceProxyResumed"
CLAIM_RENEWAL = 10       # seconds: the claim's time is rounded to this, so it is rewritten at most that often
CLAIM_TTL = 3 * FULL_INTERVAL + CLAIM_RENEWAL   # a claim not renewed for this long is a dead proxy's


class ProxyConflict(Exception):
    """Another cluster's proxy owns this host's Service rules: this one stands down."""


def _without_missing(applied, present):
    """`applied` less the chains the kernel does not have (deleted by hand, or by a
    cleanup): the next restore writes them again."""
    return {table: {c: r for c, r in chains.items() if c in present.get(table, ())}
            for table, chains in applied.items()}


def _key(obj):
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name"))


class ProxyState:
    """Services and Endpoints as the watches last reported them. `version` counts
    changes (a sync records the version it rendered, so a benchmark or a test can
    tell when a change reached the kernel)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.objects = {"services": {}, "endpoints": {}}
        self.version = 0
        self.changed = threading.Event()

    def _bump(self):
        self.version += 1
        self.changed.set()

    def put(self, resource, obj):
        with self._lock:
            if self.objects[resource].get(_key(obj)) != obj:
                self.objects[resource][_key(obj)] = obj
                self._bump()

    def remove(self, resource, obj):
        with self._lock:
            if self.objects[resource].pop(_key(obj), None) is not None:
                self._bump()

    def replace(self, resource, items):
        with self._lock:
            fresh = {_key(o): o for o in items}
            if fresh != self.objects[resource]:
                self.objects[resource] = fresh
                self._bump()

    def snapshot(self):
        """(services, {key: endpoints}, version), consistent with each other."""
        with self._lock:
            return list(self.objects["services"].values()), dict(self.objects["endpoints"]), self.version


def watch_into(client, resource, state, stop, on_synced=None):
    """Keep state[resource] equal to the cluster's: list, then watch from the list's
    revision; a 410 or a failure lists again. Runs until `stop`."""
    retry = Backoff(0.5, 10.0)
    while not stop.is_set():
        try:
            listed = client.list(resource, None, consistent=False) or {}
            rv = (listed.get("metadata") or {}).get("resourceVersion") or "0"
            state.replace(resource, listed.get("items") or [])
            if on_synced is not None:
                on_synced(resource)
            retry.reset()
            for event in client.watch(resource, None, resource_version=rv, stop=stop):
                kind, obj = event.get("type"), event.get("object") or {}
                if kind in ("ADDED", "MODIFIED"):
                    state.put(resource, obj)
                elif kind == "DELETED":
                    state.remove(resource, obj)
        except WatchExpired:
            continue
        except (NoReplicaReachable, ApiError, ClientError) as exc:
            log.warning("%s list/watch failed: %s; retrying in %.1fs (the rules stay as they are)",
                        resource, exc, retry.peek())
        except Exception:  # noqa: BLE001 - the watch must survive anything
            log.exception("%s watch failed", resource)
        retry.wait(stop)


class Proxier:
    def __init__(self, state, iptables, node_ips=(), cluster_cidr=None, min_interval=MIN_INTERVAL,
                 full_interval=FULL_INTERVAL, rewrite_interval=REWRITE_INTERVAL, setup=None, clock=time.monotonic,
                 owner=None, wall=time.time, report=None):
        self.state = state
        self.iptables = iptables
        self.conntrack = Conntrack(iptables)
        self.node_ips = tuple(node_ips)
        self.cluster_cidr = cluster_cidr
        self.owner = owner          # the rules.Owner named in the OWNER chain (None: not checked, not written)
        self.wall = wall            # wall clock: a claim's time is compared between processes
        self.conflict = None        # why this proxy stands down (another cluster owns the host's rules), or None
        self.report = report        # report(reason, message, type): an Event about this node (agent/events.py)
        self.min_interval = min_interval
        self.full_interval = full_interval
        self.rewrite_interval = rewrite_interval
        self.setup = setup           # callable run on every full sync (sysctls, the service route)
        self.rewritten = None        # when every chain was last written
        self.clock = clock
        self.renderer = rules.Renderer()
        self.applied = None          # the ruleset the kernel holds (None: unknown, next sync is full)
        self.ports = []              # the ServicePorts it was rendered from
        self.applied_version = -1
        self.synced = threading.Condition()
        self.syncs = self.failures = 0
        self.last = {}               # figures of the last sync (seconds, counts)

    def sync(self, full=False):
        """Render and apply; returns the figures of this sync. Raises IptablesError."""
        services, endpoints, version = self.state.snapshot()
        started = self.clock()
        ports = rules.service_ports(services, endpoints)
        claim = None
        if self.owner:       # renewed by the syncs (a full one at least every full_interval)
            claim = rules.Claim(self.owner, int(self.wall()) // CLAIM_RENEWAL * CLAIM_RENEWAL)
        ruleset = self.renderer.render(ports, self.node_ips, self.cluster_cidr, claim)
        rendered = self.clock()
        full = full or self.applied is None
        rewrite = self.applied is None or self.clock() - self.rewritten >= self.rewrite_interval
        present, before = None, self.applied
        if full:
            # Before the jumps: ensure_jumps creates missing chains empty, and an empty
            # chain must not pass for one holding what was applied.
            present = self.iptables.our_chains()
            if self.owner:
                self._check_owner(present)
            self._node_setup()
            self.iptables.ensure_jumps()
            before = None if rewrite else _without_missing(self.applied, present)
        text = rules.restore_text(ruleset, before, present)
        if text:
            self.applied = None      # unknown until the restore succeeds
            self.iptables.restore(text)
        restored = self.clock()
        self.applied = ruleset
        if before is None:
            self.rewritten = restored
        flows = stale_flows(self.ports, ports)
        self.conntrack.delete(flows)
        self.ports = ports
        self.syncs += 1
        self.last = {"full": full, "rewrite": before is None, "render": rendered - started,
                     "restore": restored - rendered,
                     "conntrack": self.clock() - restored, "rules": rules.count_rules(ruleset),
                     "chains": sum(len(t) for t in ruleset.values()), "bytes": len(text),
                     "service_ports": len(ports), "stale_flows": len(flows)}
        with self.synced:
            self.applied_version = version
            self.synced.notify_all()
        return self.last

    def _check_owner(self, present):
        """One Service proxy per host, as one kube-proxy per node: this host's SHEP-* chains
        are shared by name, so a second cluster's proxy would rewrite the first one's
        rules at every sync. Every full sync reads the OWNER chain first; a proxy finding
        another cluster's fresh claim there stands down (and looks again every
        CONFLICT_RETRY), so the one that claimed first keeps working. (Two that start
        together both write; at their next full sync the one whose claim was overwritten
        stands down, and the other's syncs put back what the first changed.) A proxy that
        stops releases its claim; one killed leaves it to go stale after CLAIM_TTL."""
        found = self.iptables.claim(present)
        if found is None:
            return
        other = found.owner
        # This node's own claim, whatever cluster id it names, is this proxy's: a restore
        # (`shepherd-ha restore` gives the cluster a new id) or a new data dir must not
        # lock a node out of its own host. A claim nobody renewed is a dead proxy's.
        if other.cluster == self.owner.cluster or other.node == self.owner.node \
                or self.wall() - found.renewed > CLAIM_TTL:
            return
        raise ProxyConflict(
            "this host's Service rules (the SHEP-* chains) belong to another cluster (%s, node %s), not to this "
            "agent's (%s, node %s). One Service proxy runs per host: start this agent with --proxy-mode none; if "
            "that cluster is gone, this proxy takes the host once its claim is %ds old, or at once after "
            "`shepherd-agent network cleanup --services-only`"
            % (other.cluster, other.node, self.owner.cluster, self.owner.node, CLAIM_TTL))

    def _node_setup(self):
        if self.setup is None:
            return
        try:
            self.setup()
        except Exception as exc:  # noqa: BLE001 - e.g. the bridge is not there yet: the rules still go in
            log.warning("node setup for Services failed: %s (retried at the next full sync)", exc)

    def wait_applied(self, version, timeout):
        """True once a sync has applied state version `version` or a later one."""
        deadline = time.monotonic() + timeout
        with self.synced:
            while self.applied_version < version:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.synced.wait(left)
        return True

    def run(self, stop):
        last_sync = last_full = None
        while not stop.is_set():
            now = self.clock()
            full = last_full is None or now - last_full >= self.full_interval
            if not full and not self.state.changed.is_set():
                self.state.changed.wait(min(1.0, max(0.0, self.full_interval - (now - last_full))))
                continue
            if last_sync is not None:
                rest = self.min_interval - (self.clock() - last_sync)
                if rest > 0 and stop.wait(rest):
                    return
            self.state.changed.clear()
            last_sync = self.clock()
            try:
                figures = self.sync(full)
                if full:
                    last_full = last_sync
                log.debug("proxy sync: %s", figures)
                if self.conflict is not None:
                    log.info("service proxy: this host's Service rules are no other cluster's now; proxying")
                    self._report(RESUMED, "this host's Service rules are no other cluster's now: this node's "
                                 "Service proxy proxies again", "Normal")
                    self.conflict = None
            except ProxyConflict as exc:
                self.failures += 1
                self.applied = None
                if str(exc) != self.conflict:      # said once, not at every look
                    log.warning("service proxy stands down: %s (looking again every %.0fs)", exc, CONFLICT_RETRY)
                    self._report(STOOD_DOWN, "Service proxy stands down: %s" % exc, "Warning")
                self.conflict = str(exc)
                stop.wait(CONFLICT_RETRY)
            except Exception as exc:  # noqa: BLE001 - retried; the loop must not die
                self.failures += 1
                self.applied = None
                log.warning("proxy sync failed: %s; retrying in %.0fs", exc, RETRY)
                self.state.changed.set()
                stop.wait(RETRY)
        self.release()

    def _report(self, reason, message, type_):
        if self.report is None:
            return
        try:
            self.report(reason, message, type_)
        except Exception:  # noqa: BLE001 - the event is a courtesy: the loop goes on
            log.exception("service proxy: reporting %s failed", reason)

    def release(self):
        """Give up this proxy's claim on the host (it stops; its rules stay, as kube-proxy's)."""
        if self.owner is None or self.conflict is not None:
            return
        try:
            self.iptables.release(self.owner)
        except Exception as exc:  # noqa: BLE001 - stopping: the claim goes stale instead
            log.warning("service proxy: could not release its claim on the host: %s", exc)


class ServiceProxy:
    """The proxy's threads: two watches and the sync loop."""

    def __init__(self, client, iptables, stop, node_ips=(), cluster_cidr=None, **options):
        self.client, self.stop = client, stop
        self.state = ProxyState()
        self.proxier = Proxier(self.state, iptables, node_ips, cluster_cidr, **options)
        self.listed = set()
        self.threads = []

    def _listed(self, resource):
        self.listed.add(resource)
        if self.listed == {"services", "endpoints"}:
            self.state.changed.set()

    def start(self):
        for resource in ("services", "endpoints"):
            self.threads.append(threading.Thread(target=watch_into, name="proxy-watch-" + resource, daemon=True,
                                                 args=(self.client, resource, self.state, self.stop, self._listed)))
        self.threads.append(threading.Thread(target=self._run, name="proxy-sync", daemon=True))
        for t in self.threads:
            t.start()

    def _run(self):
        # The first sync waits for both lists: rules from services without their
        # endpoints would reject traffic that works.
        while not self.stop.is_set() and self.listed != {"services", "endpoints"}:
            self.stop.wait(0.1)
        self.proxier.run(self.stop)

    def join(self, timeout=5.0):
        for t in self.threads:
            t.join(timeout)
