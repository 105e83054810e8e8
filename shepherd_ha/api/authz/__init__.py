"""Authorization: who may do what (Kubernetes' Node authorizer + NodeRestriction for
agents, RBAC for people). `install(app, replica)` (authorizer.py) wires it in."""
