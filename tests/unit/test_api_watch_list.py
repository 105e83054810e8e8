"""Watch-list as client-go uses it (sendInitialEvents=true, allowWatchBookmarks=true,
resourceVersionMatch=NotOlderThan): the initial state as ADDED events, then one
BOOKMARK annotated k8s.io/initial-events-end, then the live events; the parameter
combinations Kubernetes refuses are 400."""
import requests

from test_api_watch_framing import RawStream, api, create_pod, quick_bookmarks, revision, served_replica  # noqa: F401

WATCH_LIST = {"sendInitialEvents": "true", "allowWatchBookmarks": "true", "resourceVersionMatch": "NotOlderThan",
              "timeoutSeconds": "20"}


def test_initial_events_then_the_end_bookmark_then_live_events(api):
    for name in ("wl-1", "wl-2"):
        create_pod(api, name)
    stream = RawStream(api, dict(WATCH_LIST, labelSelector="app=framing"))
    try:
        assert stream.wait_for(lambda evs: any(e["type"] == "BOOKMARK" for e in evs))
        events = stream.events()
        end = next(i for i, e in enumerate(events) if e["type"] == "BOOKMARK")
        added = {e["object"]["metadata"]["name"] for e in events[:end]}
        assert {"wl-1", "wl-2"} <= added and all(e["type"] == "ADDED" for e in events[:end])
        marker = events[end]["object"]["metadata"]
        assert marker["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert int(marker["resourceVersion"]) >= max(int(e["object"]["metadata"]["resourceVersion"])
                                                     for e in events[:end])
        create_pod(api, "wl-3")
        assert stream.wait_for(lambda evs: any(e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "wl-3"
                                               for e in evs[end + 1:]))
    finally:
        stream.close()


def test_an_empty_initial_state_still_ends_with_the_bookmark(api):
    stream = RawStream(api, dict(WATCH_LIST, labelSelector="app=nothing-has-this"))
    try:
        assert stream.wait_for(lambda evs: len(evs) >= 1)
        first = stream.events()[0]
        assert first["type"] == "BOOKMARK"
        assert first["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    finally:
        stream.close()


def test_send_initial_events_false_starts_from_now(api):
    create_pod(api, "wl-before")
    stream = RawStream(api, dict(WATCH_LIST, sendInitialEvents="false", labelSelector="app=framing"))
    try:
        create_pod(api, "wl-after")
        assert stream.wait_for(lambda evs: any(e["type"] == "ADDED" for e in evs))
        names = [e["object"]["metadata"]["name"] for e in stream.events() if e["type"] == "ADDED"]
        assert names == ["wl-after"]
    finally:
        stream.close()


def test_refused_combinations_are_400(api):
    url = api + "/api/v1/namespaces/default/pods"
    for params, words in (
            (dict(WATCH_LIST, resourceVersionMatch="Exact"), "NotOlderThan"),
            ({k: v for k, v in WATCH_LIST.items() if k != "allowWatchBookmarks"}, "allowWatchBookmarks"),
            (dict(WATCH_LIST, sendInitialEvents="maybe"), "true or false"),
            ({"resourceVersionMatch": "NotOlderThan", "resourceVersion": revision(api)}, "sendInitialEvents")):
        resp = requests.get(url, params=dict(params, watch="1"), timeout=10)
        assert resp.status_code == 400 and words in resp.json()["message"], (params, resp.text)
