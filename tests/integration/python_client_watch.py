"""A background writer and a resuming typed watch (the official Python client) for the
replica-fault tests of test_python_client.py.

Writer: creates ConfigMaps with unique names, one after another, through typed clients of
every live replica in turn (the next one also when one fails). A create whose answer was lost is
retried; AlreadyExists then means it had applied: names are unique, so each is written once.

ResumingWatch: `kubernetes.watch.Watch().stream` of those ConfigMaps on its first host; when
a stream ends or breaks it resumes from the last resourceVersion it saw (an event's or a
bookmark's), on the same host while it answers, else on the next. It records every event
and everything that was not an event (a None, a non-dict, an untyped object, a 410).
"""
import threading
import time

import urllib3
from kubernetes import client as k
from kubernetes.client.rest import ApiException
import kubernetes.watch

RUN_FOR = 400.0          # no thread here outlives this
STREAM_SECONDS = 20      # each watch request's timeoutSeconds
READ_TIMEOUT = 15        # a stream silent for longer (bookmarks come every 5 s) is dead
TRANSIENT = (urllib3.exceptions.HTTPError, OSError)


class Writer:
    def __init__(self, clients, namespace, prefix):
        self.apis = {ident: k.CoreV1Api(api) for ident, api in clients.items()}
        self.live = list(clients)
        self.namespace = namespace
        self.prefix = prefix
        self.selector = "pyclient-writer=" + prefix
        self.written = []
        self.failures = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pyclient-writer", daemon=True)
        self._next = 0

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(30)

    def drop(self, ident):
        """Stop sending to a replica that was killed (a connection refused would do too, slower)."""
        self.live = [i for i in self.live if i != ident]

    def wait_written(self, count, timeout):
        deadline = time.monotonic() + timeout
        while len(self.written) < count:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise AssertionError("writer: %d of %d written within %.0f s; last failures: %s"
                                     % (len(self.written), count, timeout, self.failures[-5:]))
            time.sleep(0.05)

    def write_one(self, suffix, deadline_s=60.0):
        """Create one ConfigMap; returns its name once it exists (whichever attempt made it)."""
        name = "%s-%s" % (self.prefix, suffix)
        body = k.V1ConfigMap(metadata=k.V1ObjectMeta(name=name, labels={"pyclient-writer": self.prefix}),
                             data={"n": suffix})
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            live = self.live
            ident = live[self._next % len(live)]
            self._next += 1                    # round robin: followers forward theirs to the leader
            try:
                self.apis[ident].create_namespaced_config_map(self.namespace, body, _request_timeout=(3, 10))
                return name
            except ApiException as exc:
                if exc.status == 409:          # an earlier attempt applied
                    return name
                self.failures.append("%s: %d %s" % (ident, exc.status, exc.reason))
            except TRANSIENT as exc:
                self.failures.append("%s: %s" % (ident, type(exc).__name__))
            time.sleep(0.05)
        raise AssertionError("could not create %s within %.0f s: %s" % (name, deadline_s, self.failures[-5:]))

    def _run(self):
        started = time.monotonic()
        i = 0
        while not self._stop.is_set() and time.monotonic() - started < RUN_FOR:
            self.written.append(self.write_one("%05d" % i))
            i += 1
            time.sleep(0.02)


class ResumingWatch:
    def __init__(self, clients, namespace, selector, hosts, resource_version):
        self.apis = {ident: k.CoreV1Api(api) for ident, api in clients.items()}
        self.namespace = namespace
        self.selector = selector
        self.hosts = list(hosts)
        self.resource_version = resource_version
        self.events = []            # (host, type, name, resourceVersion)
        self.problems = []
        self.resumed_from = []      # (host, resourceVersion, why)
        self.streams = 0
        self._host = 0
        self._stop = threading.Event()
        self._watch = None
        self._thread = threading.Thread(target=self._run, name="pyclient-watch", daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        if self._thread.is_alive():
            self._thread.join(READ_TIMEOUT + 5)

    def names(self):
        return [name for _, kind, name, _ in list(self.events) if kind == "ADDED"]

    def revisions(self):
        return [rv for _, kind, _, rv in list(self.events) if kind != "BOOKMARK"]

    def hosts_used(self):
        used = []
        for host, _, _, _ in list(self.events):
            if not used or used[-1] != host:
                used.append(host)
        return used

    def _run(self):
        started = time.monotonic()
        while not self._stop.is_set() and time.monotonic() - started < RUN_FOR:
            host = self.hosts[self._host % len(self.hosts)]
            why = self._one_stream(host)
            if self._stop.is_set():
                return
            if why != "ended":
                self._host += 1             # that replica is gone: the next one
                time.sleep(0.1)
            self.resumed_from.append((self.hosts[self._host % len(self.hosts)], self.resource_version, why))

    def _one_stream(self, host):
        self._watch = watch = kubernetes.watch.Watch()
        self.streams += 1
        try:
            for event in watch.stream(self.apis[host].list_namespaced_config_map, self.namespace,
                                      label_selector=self.selector, resource_version=self.resource_version,
                                      allow_watch_bookmarks=True, timeout_seconds=STREAM_SECONDS,
                                      _request_timeout=(3, READ_TIMEOUT)):
                self._record(host, event)
                if self._stop.is_set():
                    watch.stop()
            return "ended"
        except ApiException as exc:
            if exc.status == 410:
                self.problems.append("410 resuming at %s on %s: %s" % (self.resource_version, host, exc.reason))
            return "%d" % exc.status
        except TRANSIENT as exc:
            return type(exc).__name__

    def _record(self, host, event):
        if not isinstance(event, dict) or event.get("type") not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
            self.problems.append("not an event from %s: %r" % (host, event))
            return
        obj = event["object"]
        if event["type"] == "BOOKMARK":
            rv = (obj.get("metadata") or {}).get("resourceVersion") if isinstance(obj, dict) else None
            if not rv:
                self.problems.append("a bookmark without a resourceVersion: %r" % (event,))
                return
        elif not isinstance(obj, k.V1ConfigMap):
            self.problems.append("an untyped object from %s: %r" % (host, type(obj)))
            return
        else:
            rv = obj.metadata.resource_version
        name = obj.metadata.name if event["type"] != "BOOKMARK" else None
        if self.resource_version and int(rv) < int(self.resource_version):
            self.problems.append("%s at %s after %s: revisions went back" % (event["type"], rv,
                                                                             self.resource_version))
        self.events.append((host, event["type"], name, rv))
        self.resource_version = rv
