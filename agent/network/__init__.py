"""The pod network (flannel host-gw shape): bridge.py, ipam.py, routes.py, rules.py,
pod_network.py (what the pod code sees), cleanup.py (`shepherd-agent network cleanup`)."""
