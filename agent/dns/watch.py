"""Feeds the Zone from the API: for Services and for Endpoints, a list from any
replica (resourceVersion=0, as the agent's pod watch) then a watch from its
revision, through the client (which fails over between replicas and resumes from
the last revision); a 410 lists again. While no replica answers, the zone keeps
what it knows, so names keep resolving on a node cut off from the control plane."""
import logging
import threading

from shepherd_ha.backoff import Backoff
from shepherd_ha.client import ApiError, ClientError, NoReplicaReachable, WatchExpired

log = logging.getLogger(__name__)


class ZoneWatch:
    KINDS = ("services", "endpoints")

    def __init__(self, client, zone, stop):
        self.client = client
        self.zone = zone
        self.stop = stop
        self.synced = {kind: threading.Event() for kind in self.KINDS}
        self._threads = []

    def start(self):
        for kind in self.KINDS:
            t = threading.Thread(target=self._loop, args=(kind,), name="dns-watch-%s" % kind, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def join(self, timeout=None):
        for t in self._threads:
            t.join(timeout)

    def _apply(self, kind, etype, obj):
        meta = obj.get("metadata") or {}
        if not meta.get("name"):
            return
        value = None if etype == "DELETED" else obj
        if kind == "services":
            self.zone.set_service(meta.get("namespace"), meta["name"], value)
        else:
            self.zone.set_endpoints(meta.get("namespace"), meta["name"], value)

    def _loop(self, kind):
        retry = Backoff(0.5, 10.0)
        while not self.stop.is_set():
            try:
                listed = self.client.list(kind, None, consistent=False)
                items = [i for i in (listed or {}).get("items") or [] if isinstance(i, dict)]
                rv = ((listed or {}).get("metadata") or {}).get("resourceVersion") or "0"
                if kind == "services":
                    self.zone.replace_all(services=items)
                else:
                    self.zone.replace_all(endpoints=items)
                if not self.synced[kind].is_set():
                    log.info("DNS: listed %d %s", len(items), kind)
                    self.synced[kind].set()
                    if all(e.is_set() for e in self.synced.values()):
                        self.zone.synced = True
                retry.reset()
                for event in self.client.watch(kind, None, resource_version=rv, stop=self.stop):
                    etype = event.get("type")
                    if etype in ("ADDED", "MODIFIED", "DELETED"):
                        self._apply(kind, etype, event.get("object") or {})
            except WatchExpired:
                log.info("DNS: %s watch expired; listing again", kind)
                continue
            except (NoReplicaReachable, ApiError, ClientError) as exc:
                log.warning("DNS: %s list/watch failed: %s; retrying in %.1fs (names keep resolving)",
                            kind, exc, retry.peek())
            except Exception:  # noqa: BLE001 - the watch must survive anything
                log.exception("DNS: %s watch failed", kind)
            retry.wait(self.stop)
