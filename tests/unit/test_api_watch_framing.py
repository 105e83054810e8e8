"""Watch streams carry events only (shepherd_ha/api/watch.py): the real app over a real
single-replica store, served by waitress. Headers come at once, no bare newline ever
(typed clients parse every line as an event), keep-alive is a BOOKMARK only when
asked, Tables when asked; our own client's watch still gets every change across
long silences."""
import json
import socket
import threading
import time

import pytest
import requests

from shepherd_ha.api import watch as watch_module
from shepherd_ha.api.app import create_app
from shepherd_ha.client import Client
from test_api_pod_logs import Served

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


@pytest.fixture(scope="module")
def served_replica(single_replica):
    served = Served(create_app(single_replica))
    try:
        ns = requests.post(served.url + "/api/v1/namespaces", json={"metadata": {"name": "default"}}, timeout=10)
        assert ns.status_code in (201, 409), ns.text
        yield served.url, single_replica
    finally:
        served.stop()


@pytest.fixture
def api(served_replica):
    return served_replica[0]


@pytest.fixture
def replica_of_api(served_replica):
    return served_replica[1]


@pytest.fixture(autouse=True)
def quick_bookmarks(monkeypatch):
    monkeypatch.setattr(watch_module, "BOOKMARK_INTERVAL", 0.3)


def revision(url):
    return requests.get(url + "/api/v1/pods", timeout=10).json()["metadata"]["resourceVersion"]


def create_pod(url, name):
    body = {"metadata": {"name": name, "labels": {"app": "framing"}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}}
    resp = requests.post(url + "/api/v1/namespaces/default/pods", json=body, timeout=10)
    assert resp.status_code == 201, resp.text


class RawStream:
    """The bytes of a watch response as they arrive, read on a thread."""

    def __init__(self, url, params, headers=None):
        self.data = b""
        self.opened = time.monotonic()
        self.resp = requests.get(url + "/api/v1/namespaces/default/pods", params=dict(params, watch="1"),
                                 headers=headers or {}, stream=True, timeout=(3, 10))
        self.headers_after = time.monotonic() - self.opened
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for chunk in self.resp.raw.stream(1, decode_content=True):
                with self.lock:
                    self.data += chunk
        except Exception:   # noqa: BLE001 - closed by the test
            pass

    def lines(self):
        with self.lock:
            return self.data.split(b"\n")

    def events(self):
        lines = self.lines()
        # The reader takes a byte at a time: while it runs, the last event may be half read.
        # Once the stream has ended, a partial line is a framing error.
        if self.thread.is_alive():
            lines[-1] = b""
        assert lines[-1] == b"" or not self.data, "a partial line at the end: %r" % lines[-1][:80]
        out = []
        for line in lines[:-1]:
            assert line.strip(), "a bare newline in the stream: %r" % self.data[:300]
            event = json.loads(line)
            assert set(event) == {"type", "object"}, event
            out.append(event)
        return out

    def wait_for(self, predicate, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.events()):
                return True
            time.sleep(0.05)
        return False

    def close(self):
        # Shut the socket down first: close() alone waits for the reader's blocked recv.
        for path in (("_fp", "fp", "raw", "_sock"), ("_connection", "sock")):
            try:
                sock = self.resp.raw
                for attr in path:
                    sock = getattr(sock, attr)
                sock.shutdown(socket.SHUT_RDWR)
            except Exception:   # noqa: BLE001 - another urllib3 layout: the next path
                pass
        self.resp.close()
        self.thread.join(5)


def test_an_idle_watch_without_bookmarks_opens_at_once_and_sends_nothing_but_events(api):
    stream = RawStream(api, {"resourceVersion": revision(api), "timeoutSeconds": "20"})
    try:
        assert stream.resp.status_code == 200 and stream.headers_after < 2.0
        time.sleep(1.2)        # four bookmark intervals: the old server sent a bare newline here
        assert stream.data == b""
        create_pod(api, "quiet-1")
        assert stream.wait_for(lambda evs: len(evs) == 1)
        event = stream.events()[0]
        assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "quiet-1"
        assert stream.data.count(b"\n") == 1 and not stream.data.startswith(b"\n")
    finally:
        stream.close()


def test_keep_alive_is_a_bookmark_only_when_bookmarks_are_allowed(api):
    stream = RawStream(api, {"resourceVersion": revision(api), "allowWatchBookmarks": "true",
                             "timeoutSeconds": "20"})
    try:
        assert stream.wait_for(lambda evs: len(evs) >= 3, timeout=5)
        events = stream.events()
        assert {e["type"] for e in events} == {"BOOKMARK"}
        assert all(e["object"]["kind"] == "Pod" and e["object"]["metadata"]["resourceVersion"] for e in events)
    finally:
        stream.close()


def test_a_watch_from_zero_starts_with_its_adds_and_a_table_watch_carries_one_row_tables(api):
    create_pod(api, "table-1")
    stream = RawStream(api, {"resourceVersion": "0", "fieldSelector": "metadata.name=table-1",
                             "timeoutSeconds": "20"}, headers={"Accept": TABLE})
    try:
        assert stream.wait_for(lambda evs: len(evs) == 1)
        added = stream.events()[0]
        assert added["type"] == "ADDED" and added["object"]["kind"] == "Table"
        assert [c["name"] for c in added["object"]["columnDefinitions"]][:5] == \
            ["Name", "Ready", "Status", "Restarts", "Age"]
        assert added["object"]["rows"][0]["cells"][:3] == ["table-1", "0/1", "Pending"]
        assert added["object"]["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
        patch = requests.patch(api + "/api/v1/namespaces/default/pods/table-1/status",
                               data=json.dumps({"status": {"phase": "Running"}}),
                               headers={"Content-Type": "application/merge-patch+json"}, timeout=10)
        assert patch.status_code == 200, patch.text
        assert stream.wait_for(lambda evs: len(evs) == 2)
        modified = stream.events()[1]
        assert modified["type"] == "MODIFIED" and modified["object"]["rows"][0]["cells"][2] == "Running"
    finally:
        stream.close()


def test_our_client_watch_gets_every_change_across_silences_longer_than_its_read_timeout(api):
    client = Client([api], timeout=3, retry_deadline=10, watch_read_timeout=0.7)
    rv = revision(api)
    got, stop = [], threading.Event()

    def run():
        for event in client.watch("pods", "default", resource_version=rv, bookmarks=False, stop=stop):
            got.append(event)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    try:
        for i in range(2):
            time.sleep(1.6)         # more than twice the read timeout with nothing on the wire
            create_pod(api, "silent-%d" % i)
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == \
            [("ADDED", "silent-0"), ("ADDED", "silent-1")]
        assert None not in got
    finally:
        stop.set()
        reader.join(5)


def test_a_silent_watch_whose_reader_left_frees_its_slot_within_seconds(api, replica_of_api):
    from shepherd_ha.api.flow_control import LONG_RUNNING_OTHER, FlowControl
    flow = FlowControl(max_inflight=8, max_watches=4, queue_wait=1.0, replica_id="r1")
    served = Served(create_app(replica_of_api, flow=flow))
    try:
        stream = RawStream(served.url, {"resourceVersion": revision(api), "timeoutSeconds": "60"})
        assert stream.resp.status_code == 200
        assert flow.snapshot()[LONG_RUNNING_OTHER]["inFlight"] == 1
        stream.close()          # nothing was ever written to it: only the disconnect check can notice
        deadline = time.monotonic() + 5
        while flow.snapshot()[LONG_RUNNING_OTHER]["inFlight"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert flow.snapshot()[LONG_RUNNING_OTHER]["inFlight"] == 0, "the server still holds the left watch"
    finally:
        served.stop()


def test_tables_over_http_for_get_and_list_and_a_bad_include_object_is_a_400(api):
    create_pod(api, "http-table-1")
    one = requests.get(api + "/api/v1/namespaces/default/pods/http-table-1", headers={"Accept": TABLE}, timeout=10)
    assert one.status_code == 200 and one.json()["kind"] == "Table"
    assert [r["cells"][0] for r in one.json()["rows"]] == ["http-table-1"]
    listed = requests.get(api + "/api/v1/pods", params={"labelSelector": "app=framing", "includeObject": "None"},
                          headers={"Accept": TABLE}, timeout=10).json()
    assert listed["kind"] == "Table" and "http-table-1" in [r["cells"][0] for r in listed["rows"]]
    assert all("object" not in r for r in listed["rows"])
    plain = requests.get(api + "/api/v1/pods", params={"includeObject": "Whatever"}, timeout=10)
    assert plain.status_code == 200 and plain.json()["kind"] == "PodList"      # not a Table: ignored
    bad = requests.get(api + "/api/v1/pods", params={"includeObject": "Everything"}, headers={"Accept": TABLE},
                       timeout=10)
    assert bad.status_code == 400 and "Metadata, Object, None" in bad.json()["message"]


def test_a_watch_of_one_nodes_pods_leaves_no_interest_behind(api, replica_of_api):
    """A kubelet's watch (spec.nodeName=N) registers an Interest in the watch log
    (store/watch_log.py); its end, by timeout or by the client leaving, takes it away."""
    log = replica_of_api.watch_log
    before = log.interests()
    ended = RawStream(api, {"fieldSelector": "spec.nodeName=n-interest", "timeoutSeconds": "1"})
    left = RawStream(api, {"fieldSelector": "spec.nodeName=n-interest", "timeoutSeconds": "60"})
    deadline = time.monotonic() + 5
    while log.interests() < before + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.interests() == before + 2
    left.close()
    ended.thread.join(5)
    deadline = time.monotonic() + 5
    while log.interests() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.interests() == before, "an ended watch still holds its interest"
