"""The controllers a leader runs. Each module exposes
`controllers(store, recorder, settings) -> [Controller, ...]`, built afresh for
every epoch with its StoreAccess, the shared EventRecorder and ControllerSettings.
A module may name its own event component (`EVENT_COMPONENT`, the scheduler's); each
component's events have their own budget (--event-qps), which outlives epochs."""
import importlib
import logging

from .events import EventRecorder
from .settings import ControllerSettings

log = logging.getLogger("shepherd_ha.controllers")

CONTROLLER_MODULES = ("scheduler", "deployments", "replica_sets", "endpoints", "node_lifecycle", "pod_gc", "garbage_collector",
                      "event_pruner", "node_ipam", "service_network", "namespaces")


COMPONENT = "shepherd-controller-manager"


def default_factories(settings=None, event_budgets=None):
    """event_budgets: events.EventBudgets of the recorders (None: events unlimited)."""
    settings = settings or ControllerSettings()
    modules = [importlib.import_module("shepherd_ha.controllers." + name) for name in CONTROLLER_MODULES]

    def build(store):
        recorders = {}
        controllers = []
        for module in modules:
            component = getattr(module, "EVENT_COMPONENT", COMPONENT)
            if component not in recorders:
                recorders[component] = EventRecorder(
                    store, component, budget=event_budgets.of(component) if event_budgets is not None else None)
            try:
                controllers.extend(module.controllers(store, recorders[component], settings))
            except Exception:   # one broken controller must not stop the others
                log.exception("controller module %s failed to start", module.__name__)
        return controllers
    return [build]
