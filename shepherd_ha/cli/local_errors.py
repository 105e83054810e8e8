"""The error of a local cluster's operations (cli/local_cluster.py, cli/local_agents.py):
its message says what is wrong and what to do."""


class LocalClusterError(Exception):
    pass
