"""Cluster DNS of a node (docs/networking.md): records.py (the zone, pure), server.py
(UDP/TCP on dnslib), forwarder.py (the node's resolver), watch.py (Services and
Endpoints from the API), pod_dns.py (a pod's resolv.conf, pure), node_dns.py (wiring)."""
