"""The controllers a leader runs. Each factory takes (StoreAccess, EventRecorder,
ControllerSettings) for the current epoch and returns the controllers it builds."""
from .events import EventRecorder
from .settings import ControllerSettings

# Module and factory names, filled in as controllers land (issue 3).
CONTROLLER_MODULES = ()


def default_factories(settings=None):
    import importlib
    settings = settings or ControllerSettings()

    def build(store):
        recorder = EventRecorder(store, "shepherd-controller-manager")
        controllers = []
        for module_name in CONTROLLER_MODULES:
            module = importlib.import_module("shepherd_ha.controllers." + module_name)
            controllers.extend(module.controllers(store, recorder, settings))
        return controllers
    return [build]
