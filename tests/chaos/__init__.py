"""Chaos suite: a harness that injects faults under load and a checker of the recorded history."""
