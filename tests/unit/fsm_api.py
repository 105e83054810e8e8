"""The real API app (shepherd_ha/api/app.py) over a real FSM in memory: no Raft, no
processes, every write applied by store/fsm.py exactly as a replica applies it.
`writes` counts the commands that reached the store (a dry run must add none)."""
import threading

from shepherd_ha.api.app import create_app
from shepherd_ha.store import commands
from shepherd_ha.store.fsm import StoreFSM


class FsmReplica:
    id = "r1"

    def __init__(self):
        self.fsm = StoreFSM()
        self.lock = threading.Lock()
        self.writes = 0

    def sync(self, consistent):
        pass

    def get(self, resource, namespace, name, consistent=True):
        with self.lock:
            return self.fsm.get(resource, namespace, name), self.fsm.revision

    def list(self, resource, namespace=None, consistent=True):
        with self.lock:
            return self.fsm.list(resource, namespace), self.fsm.revision

    def revision(self):
        return self.fsm.revision

    def write(self, ops, key=None, epoch=None, timeout=None, digest=None):
        with self.lock:
            self.writes += 1
            return self.fsm.apply(commands.write(ops, key or "k%d" % self.writes, epoch, digest))

    def recall(self, key):
        with self.lock:
            return self.fsm.recall(key)


def api_client():
    """(Flask test client, FsmReplica) with namespace "default" created."""
    replica = FsmReplica()
    client = create_app(replica).test_client()
    resp = client.post("/api/v1/namespaces", json={"metadata": {"name": "default"}})
    assert resp.status_code == 201, resp.get_json()
    return client, replica
