"""`shepherd-agent network cleanup`: remove what the agent added to the node's
network. The Services part is agent/proxy/cleanup.py; the pod network's part
(agent/network/) plugs in beside it."""
import argparse
import sys

from .proxy.cleanup import cleanup_services
from .proxy.iptables import IptablesError


def main(argv):
    parser = argparse.ArgumentParser(prog="shepherd-agent network",
                                     description="The node's network as the agent set it up.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("cleanup", help="remove the agent's chains, jump rules and routes (root)")
    parser.parse_args(argv)
    try:
        print(cleanup_services())
    except IptablesError as exc:
        print("shepherd-agent network cleanup: %s" % exc, file=sys.stderr)
        return 1
    return 0
