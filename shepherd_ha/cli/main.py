"""`shepherd-ha`: run a replica (`server`) or a whole cluster on this machine (`local`)."""
import argparse
import sys

import shepherd_ha

from . import local, node_tokens, restore, server


def build_parser():
    parser = argparse.ArgumentParser(prog="shepherd-ha", description="Shepherd HA control plane.")
    parser.add_argument("--version", action="version", version="shepherd-ha " + shepherd_ha.__version__)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    server.add_parser(subparsers)
    local.add_parser(subparsers)
    restore.add_parser(subparsers)
    node_tokens.add_parser(subparsers)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
