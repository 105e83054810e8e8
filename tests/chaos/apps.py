"""Controllers under faults: deployments scaled up and down during the run (their pods go
to the hollow node agents), and the namespaces and objects the run needs."""
import random
import threading

from shepherd_ha.client import ApiError, ClientError

from .probes import CTL_NAMESPACE, PROBE_NAME, PROBE_NAMESPACE, deployment_body
from .workload import NAMESPACE

APPS_NAMESPACE = "chaos-apps"
DEPLOYMENTS = ("web-a", "web-b")
MAX_SCALE = 4


def ensure(client, resource, obj, namespace=None):
    try:
        client.create(resource, obj, namespace=namespace)
    except ApiError as exc:
        if exc.code != 409:
            raise


def setup(client):
    """Namespaces, the gap probe's ConfigMap and the scaled deployments."""
    for ns in (NAMESPACE, PROBE_NAMESPACE, CTL_NAMESPACE, APPS_NAMESPACE):
        ensure(client, "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    ensure(client, "configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": PROBE_NAME, "namespace": PROBE_NAMESPACE},
                                  "data": {"n": "0"}}, namespace=PROBE_NAMESPACE)
    for name in DEPLOYMENTS:
        ensure(client, "deployments", deployment_body(name, 2, name), namespace=APPS_NAMESPACE)


class Scaler(threading.Thread):
    """Scales each deployment to a random size every `period` s (failures are counted:
    the cluster is being broken on purpose)."""

    def __init__(self, client, seed=0, period=3.0):
        super().__init__(name="chaos-scaler", daemon=True)
        self.client = client
        self.rng = random.Random(seed)
        self.period = period
        self.stop = threading.Event()
        self.scaled = 0
        self.failed = 0

    def run(self):
        while not self.stop.wait(self.rng.uniform(0.5, 1.5) * self.period):
            name = self.rng.choice(DEPLOYMENTS)
            try:
                self.client.scale("deployments", name, self.rng.randint(0, MAX_SCALE), namespace=APPS_NAMESPACE)
                self.scaled += 1
            except ClientError:
                self.failed += 1
