"""`shepherd-ha restore --snapshot FILE --dir DIR`: a new cluster holding a snapshot's objects.

The whole file is checked first (format version, every line, object count, sha256:
shepherd_ha/snapshot_file.py) and every object (a known kind, a name, unique, not newer
than the snapshot's revision); only then is anything written, into a hidden directory
beside DIR that is renamed to DIR at the end, so a refused file or a failure midway
leaves nothing behind. The result is a `shepherd-ha local` cluster (cli/local_cluster.py
layout) with a new cluster id, a new Raft password and new tokens, whose replicas' data
dirs each hold the same Raft dump of the objects at the snapshot's revision
(store/pysyncobj_overrides/dump_file.py); `shepherd-ha local up --dir DIR` starts it.
The controller epoch starts again at [0, ""]: the new cluster's Raft terms start again.
"""
import os
import shutil
import sys
import tempfile

import yaml

from shepherd_ha import cluster_identity, snapshot_file
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.config import CONTROLLERS
from shepherd_ha.store import commands, data_at_rest
from shepherd_ha.store.fsm import StoreFSM
from shepherd_ha.store.pysyncobj_overrides.dump_file import dump_bytes, write_dump

from .local_cluster import LocalCluster, LocalClusterError, find_base_port


def add_parser(subparsers):
    parser = subparsers.add_parser("restore", help="make a new cluster on this machine from a snapshot "
                                   "(sheepctl cluster snapshot save)")
    parser.add_argument("--snapshot", required=True, help="the snapshot file")
    parser.add_argument("--dir", required=True, help="cluster directory to create (must not hold a cluster)")
    parser.add_argument("--replicas", type=int, default=3, help="number of replicas (default 3)")
    parser.add_argument("--base-port", type=int, default=None,
                        help="replica N serves its API on BASE+N and Raft on BASE+100+N (default: a free range)")
    parser.add_argument("--no-auth", dest="auth", action="store_false",
                        help="the new cluster's API answers without a token (default: new bearer tokens)")
    parser.add_argument("--insecure-http", dest="tls", action="store_false",
                        help="the new cluster serves plain HTTP (default: HTTPS from a new cluster CA, as `local up`)")
    parser.set_defaults(func=run)


def store_of(snapshot):
    """The StoreFSM holding a checked snapshot's objects at its revision; SnapshotError for an
    object that cannot be restored (the message names it)."""
    fsm = StoreFSM()
    revision = snapshot.header["revision"]
    for number, (resource, obj) in enumerate(snapshot.objects, start=1):
        where = "%s: object %d" % (snapshot.source, number)
        info = RESOURCES.get(resource)
        if info is None:
            raise snapshot_file.SnapshotError("%s is of kind %r, which this shepherd-ha does not know (a newer "
                                              "release's snapshot?)" % (where, resource))
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise snapshot_file.SnapshotError("%s (%s) has no metadata.name" % (where, resource))
        namespace = meta.get("namespace") or ""
        if bool(namespace) != bool(info.namespaced):
            raise snapshot_file.SnapshotError("%s: %s %s %s a namespace" % (
                where, resource, meta["name"], "lacks" if info.namespaced else "must not have"))
        rv = meta.get("resourceVersion")
        if not (isinstance(rv, str) and rv.isdigit() and int(rv) <= revision):
            raise snapshot_file.SnapshotError("%s: %s %s has resourceVersion %r, not a revision up to the snapshot's "
                                              "%d" % (where, resource, meta["name"], rv, revision))
        bucket = fsm.objects.setdefault(resource, {})
        key = (namespace, meta["name"])
        if key in bucket:
            raise snapshot_file.SnapshotError("%s: %s %s/%s appears twice" % (where, resource, namespace, meta["name"]))
        try:
            bucket[key] = obj          # kept as its compressed JSON (store/encoded_objects.py)
        except ValueError as exc:
            raise snapshot_file.SnapshotError("%s: %s %s cannot be stored: %s" % (where, resource, meta["name"], exc))
    fsm.revision = revision
    fsm.reindex()
    return fsm


def started_digest(snapshot):
    """The store digest a restored cluster has once started: the snapshot's objects plus the
    pod-CIDR plan its first leader commits from --cluster-cidr (the default: a snapshot holds
    objects, not the plan, and restore writes no --cluster-cidr)."""
    fsm = store_of(snapshot)
    fsm.apply(commands.network(CONTROLLERS["cluster_cidr"], CONTROLLERS["node_cidr_mask_size"]))
    return fsm.digest()


def _refuse_existing(directory):
    if os.path.exists(os.path.join(directory, "cluster.yaml")):
        raise LocalClusterError("%s already holds a cluster: restore into a new directory" % directory)
    if os.path.isdir(directory) and os.listdir(directory):
        raise LocalClusterError("%s is not empty: restore into a new or empty directory" % directory)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise LocalClusterError("%s exists and is not a directory" % directory)


def _relocate(staging, final):
    """The replicas' configs name their files by absolute path: point them at `final`."""
    for entry in os.listdir(staging):
        path = os.path.join(staging, entry, "server.yaml")
        if not os.path.exists(path):
            continue
        with open(path) as fh:
            server = yaml.safe_load(fh)
        for key, value in server.items():
            if isinstance(value, str) and value.startswith(staging + os.sep):
                server[key] = final + value[len(staging):]
        with open(path, "w") as fh:
            yaml.safe_dump(server, fh, sort_keys=False)


def restore(snapshot_path, directory, replicas=3, base_port=None, auth=True, tls=True):
    """Make the new cluster; returns (LocalCluster, snapshot header). SnapshotError or
    LocalClusterError, with nothing written, when it cannot. With `tls` (the default) it
    gets a CA of its own, never the old cluster's: new certificates, DIR/config and
    DIR/kubeconfig naming its https URLs (the CA key and certificates move with the
    directory; server.yaml's absolute paths are pointed at DIR)."""
    snapshot = snapshot_file.read(snapshot_path)
    fsm = store_of(snapshot)
    final = os.path.abspath(directory)
    _refuse_existing(final)
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".%s.restore-" % os.path.basename(final), dir=parent)
    try:
        staged = LocalCluster(staging)
        cluster_id = cluster_identity.new_cluster_id()
        staged.create(replicas, base_port if base_port is not None else find_base_port(replicas), auth=auth,
                      tls=tls, cluster_id=cluster_id)
        spec = staged.spec()
        dump = dump_bytes(fsm, [m["raft"] for m in spec["replicas"]])
        for member in spec["replicas"]:
            data_dir = os.path.join(staging, member["id"], "data")
            write_dump(data_dir, dump)
            data_at_rest.write_private(os.path.join(data_dir, cluster_identity.FILE_NAME), cluster_id + "\n")
        spec["restored_from"] = {"snapshot": os.path.abspath(snapshot_path),
                                 "clusterId": snapshot.header["clusterId"],
                                 "revision": snapshot.header["revision"], "objects": snapshot.header["objects"],
                                 "sha256": snapshot.trailer["sha256"]}
        staged._write_spec(spec)
        _relocate(staging, final)
        if os.path.isdir(final):
            os.rmdir(final)            # empty (checked above): rename needs it gone
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return LocalCluster(final), snapshot.header


def run(args):
    try:
        cluster, header = restore(args.snapshot, args.dir, args.replicas, args.base_port, args.auth, args.tls)
    except (snapshot_file.SnapshotError, LocalClusterError, OSError) as exc:
        print("shepherd-ha restore: refused: %s; nothing was written" % exc, file=sys.stderr)
        return 1
    print("restored %d objects at revision %d (from cluster %s) into a new cluster %s in %s"
          % (header["objects"], header["revision"], header["clusterId"], cluster.cluster_id(), cluster.dir))
    for member in cluster.spec()["replicas"]:
        print("  %s  API %s  Raft %s" % (member["id"], member["api"], member["raft"]))
    if cluster.tls:
        print("  HTTPS from a new cluster CA %s; clients: %s, %s" % (cluster.ca_file, os.path.join(cluster.dir, "config"),
                                                                    cluster.kubeconfig_path))
    print("start it:  shepherd-ha local up --dir %s   (it shares nothing with the old cluster: new cluster id, "
          "Raft password, tokens%s)" % (args.dir, " and CA" if cluster.tls else ""))
    return 0
