"""The controllers a leader runs. Each module exposes
`controllers(store, recorder, settings) -> [Controller, ...]`, built afresh for
every epoch with its StoreAccess, the shared EventRecorder and ControllerSettings."""
import importlib
import importlib.util
import logging

from .events import EventRecorder
from .settings import ControllerSettings

log = logging.getLogger("shepherd_ha.controllers")

CONTROLLER_MODULES = ("scheduler", "deployments", "endpoints", "node_lifecycle", "garbage_collector",
                      "event_pruner")


def default_factories(settings=None):
    settings = settings or ControllerSettings()
    present = [m for m in CONTROLLER_MODULES if importlib.util.find_spec("shepherd_ha.controllers." + m)]
    missing = sorted(set(CONTROLLER_MODULES) - set(present))
    if missing:   # only while issue 3 is being built
        log.warning("controller modules not present yet: %s", ", ".join(missing))

    def build(store):
        recorder = EventRecorder(store, "shepherd-controller-manager")
        controllers = []
        for module_name in present:
            try:
                module = importlib.import_module("shepherd_ha.controllers." + module_name)
                controllers.extend(module.controllers(store, recorder, settings))
            except Exception:   # one broken controller must not stop the others
                log.exception("controller module %s failed to start", module_name)
        return controllers
    return [build]
