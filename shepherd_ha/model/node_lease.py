"""The node lease contract between agents and the node lifecycle controller: where a
node's Lease lives and how often its agent renews it by default. One place, because
the controller's grace period is checked against the agents' interval."""

LEASE_NAMESPACE = "kube-node-lease"
LEASE_INTERVAL = 5.0      # seconds between renewals: the agent's default, the server's assumption
