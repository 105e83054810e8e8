"""GET /shepherd/v1/snapshot: every object at one revision, streamed (snapshot_file.py).

Taken on any replica: a read barrier first (everything acknowledged before the request
is in it), then the references to every object and the revision, together under the
store lock (stored objects are immutable, so what is copied out is one revision, never
a mix of two while writes go on). The lines are built and sent after the lock is let go,
in chunks: the whole store is never one string. Admins only (system:masters) when the
API wants tokens: a snapshot holds every Secret.
"""
from flask import Response, request

from shepherd_ha import snapshot_file
from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.model.times import now_rfc3339

from .auth import GROUP_ADMIN
from .errors import ApiError, unavailable

PATH = "/shepherd/v1/snapshot"
CHUNK_BYTES = 256 * 1024


def take(replica):
    """(revision, [(resource, object)] sorted) of the store at one revision, after a barrier."""
    replica.sync(True)
    node = replica.node
    with node.lock:
        revision = node.fsm.revision
        refs = [(resource, key, obj) for resource, bucket in node.fsm.objects.items() for key, obj in bucket.items()]
    refs.sort(key=lambda item: (item[0], item[1]))
    return revision, [(resource, obj) for resource, _, obj in refs]


def register(app, replica):
    @app.get(PATH)
    def snapshot():
        groups = request.environ.get("shepherd.groups")
        if groups is not None and GROUP_ADMIN not in groups:
            raise ApiError(403, "a snapshot holds every object, Secrets too: it needs the group %s" % GROUP_ADMIN,
                           "Forbidden")
        try:
            revision, items = take(replica)
            epoch = replica.status().get("epoch")
        except Unavailable as exc:
            raise unavailable(exc)
        counts = {}
        for resource, _ in items:
            counts[resource] = counts.get(resource, 0) + 1
        header = {"clusterId": getattr(replica, "cluster_id", None) or "", "revision": revision,
                  "objects": len(items), "resources": counts, "epoch": epoch, "replica": replica.id,
                  "createdAt": now_rfc3339()}
        return Response(_chunks(snapshot_file.encode(header, items)), mimetype="application/x-ndjson",
                        headers={"Shepherd-Snapshot-Revision": str(revision),
                                 "Shepherd-Snapshot-Objects": str(len(items))})


def _chunks(lines):
    buffer, size = [], 0
    for line in lines:
        buffer.append(line)
        size += len(line)
        if size >= CHUNK_BYTES:
            yield b"".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield b"".join(buffer)
