"""Services on the node: kube-proxy's iptables mode (see rules.py for the chains).

rules.py (pure renderer), iptables.py (the binaries), conntrack.py (stale UDP
flows), proxier.py (watches and the sync loop), node_setup.py (sysctls, the
service route, hairpin), cleanup.py (what `shepherd-agent network cleanup` removes).
"""
