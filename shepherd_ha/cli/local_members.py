"""`shepherd-ha local add-replica|remove-replica --dir DIR`: the membership of a local cluster.

add-replica: the next free id and free ports, the replica's server.yaml with --join (the
current members' APIs) and, on a TLS cluster, its own certificate from the cluster CA (SANs
for its id and address), start it, add it through the API once it answers (the leader checks
the quorum, store/membership.py), wait until it has caught up, then DIR/cluster.yaml, every
replica's peers, DIR/config, DIR/kubeconfig and the agents' server lists name it
(cli/cluster_files.py).
remove-replica: remove it through the API (a leader hands over first), then stop it; its
directory is kept as DIR/<id>.removed-<time>, and the files above stop naming it.
"""
import os
import shutil
import time

import requests
import yaml

from . import netns
from .cluster_files import follow_membership
from .local_cluster import API_OFFSET, RAFT_OFFSET, LocalClusterError, port_free
from .netns_cluster import AGENT_HOST_BASE, API_PORT, RAFT_PORT, REPLICA_HOST_BASE, NetnsCluster

CHANGE_TIMEOUT = 45.0
CATCH_UP_TIMEOUT = 120.0
START_TIMEOUT = 30.0


def next_id(cluster):
    taken = set(cluster.ids()) | {name.split(".")[0] for name in os.listdir(cluster.dir)}
    numbers = [int(i[1:]) for i in taken if i.startswith("r") and i[1:].isdigit()]
    return "r%d" % (max(numbers, default=0) + 1)


def _free_ports(cluster, number):
    """API and Raft ports for replica `number`: the layout's own (BASE+N, BASE+100+N) when free."""
    base = cluster.spec().get("base_port") or 8000
    for candidate in [base] + list(range(base + 1000, base + 20000, 1000)):
        api, raft = candidate + API_OFFSET + number, candidate + RAFT_OFFSET + number
        if api < 32768 and raft < 32768 and port_free(api) and port_free(raft):
            return api, raft
    raise LocalClusterError("no free API and Raft port pair for replica %d" % number)


def _request(cluster, method, path, via=None, timeout=CHANGE_TIMEOUT, **kwargs):
    """One request to the first running replica that answers (not one in `avoid`)."""
    errors = []
    for ident in via or cluster.ids():
        if not cluster.pid(ident):
            continue
        try:
            return requests.request(method, cluster.replica(ident)["api"] + path, headers=cluster.auth_headers(),
                                    timeout=timeout, verify=cluster.verify, **kwargs)
        except requests.RequestException as exc:
            errors.append("%s: %s" % (ident, type(exc).__name__))
    raise LocalClusterError("no replica answered %s %s (%s)" % (method, path, "; ".join(errors) or "none running"))


def _checked(reply, what):
    if reply.status_code >= 400:
        try:
            message = reply.json().get("message")
        except ValueError:
            message = reply.text[:300]
        raise LocalClusterError("%s: %d %s" % (what, reply.status_code, message))
    return reply.json()


def members(cluster, via=None):
    return _checked(_request(cluster, "GET", "/shepherd/v1/members", via=via, timeout=5.0), "members")


def _new_member(cluster, ident):
    """The layout entry of a new replica: loopback ports, or its own namespace and address."""
    number = int(ident[1:])
    scheme = "https" if cluster.tls else "http"
    if not isinstance(cluster, NetnsCluster):
        api_port, raft_port = _free_ports(cluster, number)
        return {"id": ident, "raft": "127.0.0.1:%d" % raft_port, "api": "%s://127.0.0.1:%d" % (scheme, api_port)}
    net = cluster.network()
    address = "%s.%d" % (net["prefix"], REPLICA_HOST_BASE + number)
    if number >= AGENT_HOST_BASE - REPLICA_HOST_BASE:
        raise LocalClusterError("no address left for replica %s (at most %d replicas)"
                                % (ident, AGENT_HOST_BASE - REPLICA_HOST_BASE - 1))
    return {"id": ident, "raft": "%s:%d" % (address, RAFT_PORT), "api": "%s://%s:%d" % (scheme, address, API_PORT),
            "netns": "shepherd%d-%s" % (net["index"], ident), "address": address,
            "veth": "shv%d-%d" % (net["index"], REPLICA_HOST_BASE + number)}


def _drop_host(cluster, member):
    """A removed replica's namespace and link go with it (teardown only knows current hosts)."""
    if isinstance(cluster, NetnsCluster) and member.get("netns"):
        for step, name in ((netns.delete_link, member["veth"]), (netns.delete_namespace, member["netns"])):
            try:
                step(name)
            except netns.NetnsError:
                pass


def start_new_replica(cluster, progress=print):
    """Write the layout of the next replica (--join the current members' APIs) and start it; it is
    not a member until added. Returns its layout entry."""
    spec = cluster.spec()
    ident = next_id(cluster)
    member = _new_member(cluster, ident)
    rdir = os.path.join(cluster.dir, ident)
    os.makedirs(os.path.join(rdir, "data"), mode=0o700, exist_ok=True)
    template = _server_yaml(cluster, spec["replicas"][0]["id"])
    api_bind = "%s:%s" % (member["address"], API_PORT) if member.get("address") else member["api"].split("://", 1)[1]
    server = dict(template, id=ident, raft_address=member["raft"], api_bind=api_bind,
                  data_dir=os.path.join(rdir, "data"), join=",".join(cluster.api_urls()))
    server.pop("peers", None)
    # its own certificate (the template's names r1): SANs for its id and address, from the cluster CA
    server.update(cluster._tls_server_options(cluster.tls, member, member.get("address") or "127.0.0.1"))
    with open(os.path.join(rdir, "server.yaml"), "w") as fh:
        yaml.safe_dump(server, fh, sort_keys=False)
    spec["replicas"].append(member)
    cluster._write_spec(spec)
    try:
        pid = cluster.start(ident)
        progress("%s started (pid %d), API %s, Raft %s; waiting for it to answer" % (ident, pid, member["api"],
                                                                                   member["raft"]))
        _wait_answering(cluster, ident)
    except BaseException:
        forget_new_replica(cluster, ident)
        raise
    return member


def forget_new_replica(cluster, ident):
    """Undo start_new_replica for one that never became a member."""
    member = cluster.replica(ident)
    cluster.stop(ident)
    spec = cluster.spec()
    spec["replicas"] = [r for r in spec["replicas"] if r["id"] != ident]
    cluster._write_spec(spec)
    _drop_host(cluster, member)
    shutil.rmtree(os.path.join(cluster.dir, ident), ignore_errors=True)     # never a member: nothing to keep


def add_replica(cluster, progress=print, force=False):
    member = start_new_replica(cluster, progress)
    ident = member["id"]
    try:
        via = [i for i in cluster.ids() if i != ident]
        info = _checked(_request(cluster, "POST", "/shepherd/v1/members", via=via, json={"id": ident, "raft": member["raft"],
                                                                                  "api": member["api"], "force": force}),
                        "add %s" % ident)
    except BaseException:
        forget_new_replica(cluster, ident)
        raise
    progress("%s added: quorum %s of %d; catching up" % (ident, info["quorum"], len(info["members"])))
    wait_caught_up(cluster, ident, via)
    follow_membership(cluster)
    return ident


def _server_yaml(cluster, ident):
    with open(os.path.join(cluster.dir, ident, "server.yaml")) as fh:
        return yaml.safe_load(fh)


def _wait_answering(cluster, ident):
    deadline = time.monotonic() + START_TIMEOUT
    url = cluster.replica(ident)["api"]
    while time.monotonic() < deadline:
        if not cluster.pid(ident):
            # its directory goes with it (never a member): the reason goes into the message
            raise LocalClusterError("%s exited: %s" % (ident, _last_lines(os.path.join(cluster.dir, ident,
                                                                                   "server.log"))))
        try:
            if requests.get(url + "/version", timeout=1.0, verify=cluster.verify).json().get("replica") == ident:
                return
        except (requests.RequestException, ValueError):
            pass
        time.sleep(0.2)
    raise LocalClusterError("%s does not answer at %s within %.0fs" % (ident, url, START_TIMEOUT))


def _last_lines(path, count=3):
    try:
        with open(path, errors="replace") as fh:
            return " | ".join(line.strip() for line in fh.read().splitlines()[-count:]) or "no output"
    except OSError:
        return "no log at %s" % path


def wait_caught_up(cluster, ident, via=None, timeout=CATCH_UP_TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        try:
            info = members(cluster, via)
            row = next((m for m in info["members"] if m["id"] == ident), None)
            if row is not None and (row.get("caughtUp") or row.get("self")):
                return info
        except LocalClusterError:
            pass
        if time.monotonic() >= deadline:
            raise LocalClusterError("%s has not caught up within %.0fs (it counts toward the quorum meanwhile): "
                                    "see %s" % (ident, timeout, os.path.join(cluster.dir, ident, "server.log")))
        time.sleep(0.3)


def remove_replica(cluster, ident, progress=print):
    cluster.replica(ident)
    via = [i for i in cluster.ids() if i != ident] + [ident]
    deadline = time.monotonic() + CHANGE_TIMEOUT
    while True:
        reply = _request(cluster, "DELETE", "/shepherd/v1/members/" + ident, via=via)
        if reply.status_code != 503 or time.monotonic() >= deadline:
            break
        time.sleep(0.5)        # leadership moved mid-change, or the log is settling: try again
    if reply.status_code != 404:       # 404: not a member any more (an earlier attempt did it)
        info = _checked(reply, "remove %s" % ident)
        progress("%s removed: quorum %s of %d" % (ident, info["quorum"], len(info["members"])))
    kept = retire_replica(cluster, ident)
    progress("%s stopped; its files are kept in %s" % (ident, kept))


def retire_replica(cluster, ident):
    """After its removal from the membership: stop it, drop it from the layout (its files are kept
    as DIR/<id>.removed-<time>), and make every file that names the replicas follow."""
    member = cluster.replica(ident)
    cluster.stop(ident)
    spec = cluster.spec()
    spec["replicas"] = [r for r in spec["replicas"] if r["id"] != ident]
    cluster._write_spec(spec)
    _drop_host(cluster, member)
    kept = os.path.join(cluster.dir, "%s.removed-%d" % (ident, int(time.time())))
    os.rename(os.path.join(cluster.dir, ident), kept)
    follow_membership(cluster)
    return kept
