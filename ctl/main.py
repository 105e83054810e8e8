"""sheepctl: a kubectl-like command line for Shepherd HA.

    sheepctl get pods -o wide
    sheepctl apply -f manifests/
    sheepctl cluster status

main(argv) returns the exit code; user errors are printed, never a traceback.
"""
import argparse
import os
import sys

from shepherd_ha.client import ApiError, NoReplicaReachable, OutcomeUnknown

from . import __version__
from .commands import MODULES
from .config import ConfigError
from .context import Context, UserError
from .manifests import ManifestError


def _global_options(parser, suppress):
    def d(value):
        return argparse.SUPPRESS if suppress else value
    g = parser.add_argument_group("global options")
    g.add_argument("--server", "-s", metavar="URL[,URL...]", default=d(None),
                   help="replica API URLs (default: $SHEPHERD_SERVERS, then the config file)")
    g.add_argument("--token", metavar="TOKEN", default=d(None),
                   help="bearer token for replicas that require one (default: $SHEPHERD_TOKEN, then the "
                        "config file's `token`; prefer those: a flag shows in `ps`)")
    g.add_argument("--config", metavar="FILE", default=d(None),
                   help="config file (default: $SHEPHERD_CONFIG, then ~/.shepherd/config); a kubeconfig works too")
    g.add_argument("--kubeconfig", metavar="FILE", default=d(None),
                   help="a kubeconfig (DIR/kubeconfig; default: $KUBECONFIG), when no --config is given")
    g.add_argument("--certificate-authority", metavar="FILE", default=d(None),
                   help="the cluster CA that https servers are verified against (default: the config's)")
    g.add_argument("-n", "--namespace", default=d(None), help="namespace (default: from config, "
                                                               "else default)")
    g.add_argument("-A", "--all-namespaces", action="store_true", default=d(False),
                   help="list across all namespaces")
    g.add_argument("--request-timeout", type=float, metavar="SECONDS", default=d(None),
                   help="timeout of one HTTP request (default 5)")
    g.add_argument("--retry-deadline", type=float, metavar="SECONDS", default=d(None),
                   help="how long to keep trying other replicas (default 15)")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="sheepctl", description="Command line of a Shepherd HA cluster (kubectl-like).")
    parser.add_argument("--version", action="version", version="sheepctl %s" % __version__)
    _global_options(parser, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, suppress=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in MODULES:
        module.register(sub, common)
    return parser


def main(argv=None, stdin=None):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    ctx = Context(args)
    ctx.stdin = stdin
    try:
        return args.func(args, ctx) or 0
    except ApiError as exc:
        ctx.error("Error from server (%s): %s" % (exc.reason, exc.message))
    except NoReplicaReachable as exc:
        ctx.error(str(exc))
    except OutcomeUnknown as exc:
        ctx.error("error: %s" % exc)
    except (ConfigError, UserError, ManifestError) as exc:
        for line in str(exc).splitlines() or [""]:
            ctx.error("error: %s" % line)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # output piped into `head`: stop quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 0
    finally:
        ctx.close()
    return 1


if __name__ == "__main__":
    sys.exit(main())
