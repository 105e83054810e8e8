"""The cluster id: which cluster a replica's data, an agent's config or a snapshot belongs to.

Made once, at random, when a cluster is created (`shepherd-ha local up`, the Vagrant
provisioning, `shepherd-ha restore`), written into every replica's config and data dir
(`DATA_DIR/cluster-id`) and every agent's config. It is carried in every Raft message
(store/raft_cipher.py: a replica of another cluster is refused by its peers, and both
log why), answered by /version and the replica status, and sent by clients and agents in
the `Shepherd-Cluster-Id` header: the API answers 421 to a caller configured for another
cluster.

A data dir made before cluster ids (no `cluster-id` file) adopts one derived from the
Raft password, which every replica of that cluster shares, so they all adopt the same
one without talking to each other; the server logs that it did.
"""
import hashlib
import logging
import os
import re
import uuid

from shepherd_ha.store import data_at_rest

HEADER = "Shepherd-Cluster-Id"
FILE_NAME = "cluster-id"
_FORMAT = re.compile(r"[0-9a-f]{32}")
_DERIVATION_CONTEXT = b"shepherd-ha cluster id v1\0"

log = logging.getLogger("shepherd_ha.cluster_identity")


class IdentityError(ValueError):
    """A cluster id that is malformed or names another cluster; the message says which."""


def new_cluster_id():
    return uuid.uuid4().hex


def derived_cluster_id(raft_password):
    """The id a cluster made before cluster ids adopts: the same on every replica."""
    return hashlib.sha256(_DERIVATION_CONTEXT + str(raft_password).encode()).hexdigest()[:32]


def check_format(cluster_id, where):
    if not isinstance(cluster_id, str) or not _FORMAT.fullmatch(cluster_id):
        raise IdentityError("%s: cluster id %r is not 32 lowercase hex digits (as `shepherd-ha local up` makes)"
                            % (where, cluster_id))
    return cluster_id


def mismatch(ours, theirs, what):
    """The sentence for `what` (e.g. "this agent's config") naming another cluster."""
    return ("%s names cluster %s, but this is cluster %s: it belongs to another cluster (a restored copy, or a "
            "config from another cluster?); fix its cluster_id or point it at its own cluster" % (what, theirs, ours))


def bytes_of(cluster_id):
    """16 bytes for the Raft message header (zeros for None: unit tests' ciphers)."""
    return bytes.fromhex(cluster_id) if cluster_id else bytes(16)


def resolve_replica_id(data_dir, configured, raft_password):
    """The cluster id of the replica whose data is in `data_dir`, writing it there the
    first time. `configured` (the server's --cluster-id, or None) must agree with the
    one already in the data dir. IdentityError when they differ."""
    path = os.path.join(data_dir, FILE_NAME)
    if configured is not None:
        check_format(configured, "--cluster-id")
    try:
        with open(path) as fh:
            stored = check_format(fh.read().strip(), path)
    except FileNotFoundError:
        stored = None
    if stored is not None:
        if configured is not None and configured != stored:
            raise IdentityError("the data in %s belongs to cluster %s, but --cluster-id says %s: this data dir "
                                "is another cluster's; use that cluster's config, or an empty --data-dir to "
                                "join this one" % (data_dir, stored, configured))
        return stored
    had_data = any(os.path.exists(os.path.join(data_dir, name)) for name in ("raft.journal", "raft.dump"))
    if configured is not None:
        chosen = configured
    else:
        chosen = derived_cluster_id(raft_password)
        log.warning("%s %s has no cluster id and none is configured (--cluster-id): adopting %s, derived from the "
                    "Raft password, as every replica of this cluster does", "data dir" if had_data else "new data dir",
                    data_dir, chosen)
    data_at_rest.write_private(path, chosen + "\n")       # 0600 in a 0700 dir, as the rest of it
    if had_data and configured is not None:
        log.warning("data dir %s had no cluster id (made before cluster ids): adopted the configured %s",
                    data_dir, chosen)
    return chosen
