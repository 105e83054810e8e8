"""One module per sheepctl command group; each has register(subparsers, common)."""
from . import apply, cluster, describe, delete, get, misc, scale, version  # noqa: F401
from . import drain  # noqa: F401
from . import rollout  # noqa: F401
from . import logs, top  # noqa: F401
from . import auth  # noqa: F401

MODULES = (get, describe, apply, delete, scale, cluster, version, misc, drain, rollout, logs, top, auth)
