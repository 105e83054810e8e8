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


def _message(resp):
    try:
        body = resp.json()
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            return body["message"][:300]
    except ValueError:
        pass
    return " ".join(resp.text.split())[:300] or "(no body)"


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
    try:
        resp = session.get(outbound.scheme + "://%s/stats/pods" % where, params=query, headers=headers,
                           timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
        if resp.status_code != 200:
            raise NodeFailed("its agent at %s answered %d: %s" % (where, resp.status_code, _message(resp)))
        if len(resp.content) > MAX_BODY:
            raise NodeFailed("its agent at %s answered more than %d bytes" % (where, MAX_BODY))
        body = resp.json()
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise NodeFailed("its agent at %s is unreachable (%s)" % (where, _describe(exc)))
    except ValueError:
        raise NodeFailed("its agent at %s answered no JSON" % where)
    finally:
        session.close()
    pods = body.get("pods") if isinstance(body, dict) else None
    if body.get("node") != name or not isinstance(pods, list):
        raise NodeFailed("its agent at %s answered for node %r, not with this node's pods"
                         % (where, body.get("node") if isinstance(body, dict) else None))
    return [p for p in pods if isinstance(p, dict)]


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
