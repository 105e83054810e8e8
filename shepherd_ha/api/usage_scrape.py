"""Ask the agents of some nodes for their pods' usage, all at once, within a deadline.

What metrics-server does with each kubelet's summary API, but on request: one GET
/stats/pods per node hosting pods asked for, at most WORKERS at a time, each with
short timeouts, and the whole scrape bounded by DEADLINE_SECONDS. A node whose agent
does not answer in time (or answers an error) is left out with the reason; the
caller says so (api/pod_metrics.py). Nothing is cached and nothing is written: a
scrape costs the API no Raft write, whatever the number of pods.

Authentication as for logs (api/pod_logs.py): a metrics grant signed for that node
and the scope RBAC allowed (namespace, pod), never a token; the agent's address comes
from its Node object, and over TLS its certificate must name that node.
"""
import concurrent.futures
import json
import math
import time

import requests
import urllib3

from shepherd_ha.tls.outbound import PLAIN

from .pod_logs import _describe, _host_port, agent_endpoint
from .errors import ApiError

WORKERS = 16
CONNECT_TIMEOUT = 1.5       # seconds
READ_TIMEOUT = 3.0
DEADLINE_SECONDS = 5.0      # for the whole scrape: `kubectl top` never hangs on a dead node
MAX_BODY = 8 * 1024 * 1024  # a node's answer (110 pods of a few containers is some 30 KB)


class NodeFailed(Exception):
    """This node's usage could not be read; str() says why, for a person."""


def _message(raw):
    try:
        body = json.loads(raw)
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            return body["message"][:300]
    except (ValueError, RecursionError):
        pass
    return " ".join(raw.decode("utf-8", "replace").split())[:300] or "(no body)"


def scrape_node(node, namespace, pod, replica_id, grants=None, outbound=None):
    """[pod usage] from one node's agent (agent/pod_usage.py's shape); NodeFailed."""
    outbound = outbound or PLAIN
    name = (node.get("metadata") or {}).get("name")
    try:
        host, port = agent_endpoint(node)
    except ApiError as exc:
        raise NodeFailed(exc.message)
    where = _host_port(host, port)
    headers = {"User-Agent": "shepherd-ha/%s" % replica_id}
    if grants is not None:
        headers["Authorization"] = grants.metrics_grant(name, namespace, pod)
    query = {k: v for k, v in (("namespace", namespace), ("pod", pod)) if v}
    session = outbound.agent_session(name)
    end = time.monotonic() + DEADLINE_SECONDS
    try:
        resp = session.get(outbound.scheme + "://%s/stats/pods" % where, params=query, headers=headers,
                           timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), stream=True)
        if resp.status_code != 200:
            raise NodeFailed("its agent at %s answered %d: %s" % (where, resp.status_code,
                                                                  _message(_read_bounded(resp, end, where))))
        body = json.loads(_read_bounded(resp, end, where))
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise NodeFailed("its agent at %s is unreachable (%s)" % (where, _describe(exc)))
    except (ValueError, RecursionError):
        raise NodeFailed("its agent at %s answered no JSON" % where)
    finally:
        session.close()
    node_named = body.get("node") if isinstance(body, dict) else None
    pods = body.get("pods") if isinstance(body, dict) else None
    if node_named != name or not isinstance(pods, list):
        raise NodeFailed("its agent at %s answered for node %r, not with this node's pods" % (where, node_named))
    return [p for p in pods if _well_formed(p)]


def _read_bounded(resp, end, where):
    """The body, read within the node's deadline and MAX_BODY: the read timeout bounds
    each wait for a byte, not the whole answer (an agent trickling a byte a second would
    hold this thread, and the replica's memory, for as long as it liked)."""
    data = bytearray()
    while True:
        chunk = resp.raw.read1(64 * 1024, decode_content=True)   # what has arrived, not a full 64 KiB
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_BODY:
            raise NodeFailed("its agent at %s answered more than %d bytes" % (where, MAX_BODY))
        if time.monotonic() > end:
            raise NodeFailed("its agent at %s did not finish its answer within %.0f s" % (where, DEADLINE_SECONDS))
    return bytes(data)


def _number(value, high):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and 0 <= value <= high


def _well_formed(pod):
    """One pod of an agent's answer in agent/pod_usage.py's shape, with finite bounded
    numbers; anything else is left out (one odd answer must not fail the listing)."""
    if not isinstance(pod, dict) or not all(isinstance(pod.get(k), str) for k in ("name", "namespace")):
        return False
    if pod.get("uid") is not None and not isinstance(pod["uid"], str):
        return False
    if not _number(pod.get("windowSeconds"), 86400) or not isinstance(pod.get("containers"), list):
        return False
    return all(isinstance(c, dict) and isinstance(c.get("name"), str)
               and _number(c.get("cpuNanoCores"), 10 ** 15) and _number(c.get("memoryWorkingSetBytes"), 2 ** 50)
               for c in pod["containers"])


def scrape(nodes, namespace, pod, replica_id, grants=None, outbound=None, deadline=DEADLINE_SECONDS,
           scrape_one=scrape_node):
    """({node name: [pod usage]}, {node name: why it is left out}) for these Node objects."""
    answers, failures = {}, {}
    if not nodes:
        return answers, failures
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(WORKERS, len(nodes)),
                                                 thread_name_prefix="usage-scrape")
    end = time.monotonic() + deadline
    try:
        futures = {pool.submit(scrape_one, node, namespace, pod, replica_id, grants, outbound):
                   (node.get("metadata") or {}).get("name") for node in nodes}
        done, late = concurrent.futures.wait(futures, timeout=max(0.0, end - time.monotonic()))
        for future in done:
            name = futures[future]
            try:
                answers[name] = future.result()
            except NodeFailed as exc:
                failures[name] = str(exc)
            except Exception as exc:  # noqa: BLE001 - one node's odd answer must not fail the rest
                failures[name] = "its answer could not be read (%s)" % type(exc).__name__
        for future in late:
            future.cancel()
            failures[futures[future]] = "its agent did not answer within %.0f s" % deadline
    finally:
        pool.shutdown(wait=False)       # a late one ends by its own timeouts, its answer unused
    return answers, failures
