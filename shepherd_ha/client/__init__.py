"""Client library of the Shepherd HA API (used by sheepctl and the node agent)."""
from .errors import ApiError, ClientError, NoReplicaReachable, OutcomeUnknown, WatchExpired
from .http_client import Client, normalize_servers, resolve_resource

__all__ = ["ApiError", "Client", "ClientError", "NoReplicaReachable", "OutcomeUnknown",
           "WatchExpired", "normalize_servers", "resolve_resource"]
