"""The controllers a leader runs. Each factory takes the StoreAccess of the current
epoch and returns the controllers it builds (sharing an event recorder, say)."""


def default_factories(settings=None):
    return []
