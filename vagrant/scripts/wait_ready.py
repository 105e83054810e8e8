"""Wait until the VM cluster works: every replica answers, one leader, every
worker's Node Ready. Prints progress every 10 s; exit 1 with what is missing when
the timeout passes.  Usage: wait_ready.py [--timeout SECONDS]"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))        # cluster_layout
sys.path.insert(0, os.path.join(HERE, "..", ".."))  # the project, when it is not installed
from cluster_layout import ClusterLayout, admin_token, pki_dir  # noqa: E402
from shepherd_ha.client import Client  # noqa: E402


def node_ready(node):
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def ca_file():
    """The cluster CA prepare-artifacts.sh made: the VMs serve HTTPS from it."""
    path = os.path.join(pki_dir(), "ca.crt")
    return path if os.path.exists(path) else None


def missing(layout):
    """What is not there yet, as a list of short phrases (empty when ready)."""
    gaps = []
    leaders = set()
    for host, url in zip(layout.control_planes, layout.api_urls()):
        try:
            with Client([url], timeout=3, retry_deadline=0, token=admin_token(), ca_file=ca_file()) as one:
                view = one.cluster()
            if view.get("leader"):
                leaders.add(view["leader"])
            else:
                gaps.append(f"{host} knows no leader")
        except Exception as exc:  # any failure means "not yet"
            gaps.append(f"{host} API not answering ({type(exc).__name__})")
    if len(leaders) > 1:
        gaps.append(f"replicas disagree on the leader: {sorted(leaders)}")
    if layout.workers and not gaps:
        with Client(layout.api_urls(), timeout=3, retry_deadline=5, token=admin_token(),
                    ca_file=ca_file()) as client:
            nodes = {n["metadata"]["name"]: n for n in client.list("nodes").get("items", [])}
        for worker in layout.workers:
            if worker not in nodes:
                gaps.append(f"node {worker} not registered")
            elif not node_ready(nodes[worker]):
                gaps.append(f"node {worker} not Ready")
    return gaps


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    layout = ClusterLayout.from_env()
    start = time.monotonic()
    last_print = 0.0
    while True:
        try:
            gaps = missing(layout)
        except Exception as exc:
            gaps = [f"cluster not answering ({exc})"]
        elapsed = time.monotonic() - start
        if not gaps:
            print(f"cluster ready after {elapsed:.0f} s")
            return 0
        if elapsed > args.timeout:
            print(f"error: cluster not ready after {args.timeout:.0f} s: {'; '.join(gaps)}", file=sys.stderr)
            return 1
        if elapsed - last_print >= 10:
            print(f"  {elapsed:4.0f} s: waiting for {'; '.join(gaps)}", flush=True)
            last_print = elapsed
        time.sleep(2)


if __name__ == "__main__":
    sys.exit(main())
