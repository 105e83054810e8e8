"""`shepherd-ha server --join URL[,URL...]`: start with the cluster's current membership.

The new replica asks one of the given replicas for the members (GET /shepherd/v1/members,
with the replicas' own status token derived from the Raft password) and starts with them
as its peers. It is not a member yet: it waits, passive, until an admin adds it
(`sheepctl cluster add-replica`, or `shepherd-ha local add-replica`), then the leader
sends it a snapshot and the entries after it. The list it got is kept in
DATA_DIR/members.json, so a restart finds the peers even when no URL answers; once it
has a Raft log, its journal and snapshot hold the membership anyway.
"""
import json
import os
import time

import requests

from shepherd_ha.options import ConfigError
from shepherd_ha.store import data_at_rest
from shepherd_ha.store.replica import Peer
from shepherd_ha.tls.outbound import PLAIN, tls_reason

MEMBERS_FILE = "members.json"
JOIN_TIMEOUT = 30.0          # seconds to find one replica that answers
ASK_TIMEOUT = 2.0


def has_raft_state(data_dir):
    return any(os.path.exists(os.path.join(data_dir, name)) for name in ("raft.journal", "raft.dump"))


def ask(urls, peer_token, timeout=JOIN_TIMEOUT, outbound=PLAIN):
    """The member list from the first of `urls` that answers; ConfigError naming each failure.
    `peer_token`: the replicas' own (api/replica_credentials.py), which may read the members.
    `outbound`: how this replica reaches the others (HTTPS verified against the cluster CA
    unless --insecure-http; the token is never sent to a server that fails verification)."""
    headers = {"Authorization": "Bearer " + peer_token} if peer_token else {}
    errors = {}
    deadline = time.monotonic() + timeout
    while True:
        for url in urls:
            try:
                with outbound.session() as session:
                    reply = session.get(url.rstrip("/") + "/shepherd/v1/members", headers=headers,
                                        timeout=ASK_TIMEOUT)
                if reply.status_code in (401, 403):
                    raise ConfigError("%s refused to list its members (%d): are --raft-password and --raft-salt the cluster's?"
                                      % (url, reply.status_code))
                reply.raise_for_status()
                members = reply.json()["members"]
                if members:
                    return members
                errors[url] = "no members listed"
            except ConfigError:       # a ValueError too: a refusal is an answer, not a failure to retry
                raise
            except requests.exceptions.SSLError as exc:
                errors[url] = "TLS: %s" % tls_reason(exc)
            except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
                errors[url] = type(exc).__name__
        if time.monotonic() >= deadline:
            raise ConfigError("--join: no replica answered within %.0fs (%s)" % (
                timeout, "; ".join("%s: %s" % item for item in errors.items())))
        time.sleep(0.5)


def peers_to_join(values, settings, peer_token, outbound=PLAIN):
    """The peers to start with (and whether this is a first join, passive until added)."""
    urls = [u.strip() for u in values["join"].split(",") if u.strip()]
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ConfigError("--join takes API URLs like http://HOST:PORT, not %r" % url)
    saved = os.path.join(settings.data_dir, MEMBERS_FILE)
    first = not has_raft_state(settings.data_dir)
    try:
        members = ask(urls, peer_token, JOIN_TIMEOUT if first else 3.0, outbound)
    except ConfigError:
        if first or not os.path.exists(saved):
            raise
        with open(saved) as fh:
            members = json.load(fh)
    for member in members:
        if member["id"] == values["id"] and member["raft"] != settings.self_address:
            raise ConfigError("replica id %s is already a member at Raft %s: pick another --id, or remove it "
                              "first" % (values["id"], member["raft"]))
    data_at_rest.write_private(saved, json.dumps(members))     # 0600 in a 0700 dir, as the rest of it
    peers = [Peer(m["id"], m["raft"], m.get("api")) for m in members if m["raft"] != settings.self_address]
    return peers, first
