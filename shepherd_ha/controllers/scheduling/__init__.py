"""The scheduler's parts: what it knows of pods and nodes in one pass (`view`),
the filters and scorers it applies (`filters`, `scorers`), and how it picks a
node and explains a failure (`algorithm`). The controller that drives them is
`shepherd_ha.controllers.scheduler`.
"""
