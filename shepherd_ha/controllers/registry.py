"""The controllers a leader runs. Each module exposes
`controllers(store, recorder, settings) -> [Controller, ...]`, built afresh for
every epoch with its StoreAccess, the shared EventRecorder and ControllerSettings.
The recorder's EventBudget (--event-qps) outlives epochs: what it dropped is counted
for as long as the process lives."""
import importlib
import logging

from .events import EventRecorder
from .settings import ControllerSettings

log = logging.getLogger("shepherd_ha.controllers")

CONTROLLER_MODULES = ("scheduler", "deployments", "replica_sets", "endpoints", "node_lifecycle", "pod_gc", "garbage_collector",
                      "event_pruner", "node_ipam", "service_network")


def default_factories(settings=None, event_budget=None):
    """event_budget: the EventBudget of every epoch's recorder (None: events unlimited)."""
    settings = settings or ControllerSettings()
    modules = [importlib.import_module("shepherd_ha.controllers." + name) for name in CONTROLLER_MODULES]

    def build(store):
        recorder = EventRecorder(store, "shepherd-controller-manager", budget=event_budget)
        controllers = []
        for module in modules:
            try:
                controllers.extend(module.controllers(store, recorder, settings))
            except Exception:   # one broken controller must not stop the others
                log.exception("controller module %s failed to start", module.__name__)
        return controllers
    return [build]
