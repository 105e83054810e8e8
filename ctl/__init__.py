"""sheepctl: the kubectl-like command line of Shepherd HA."""
from shepherd_ha import __version__

__all__ = ["__version__"]
