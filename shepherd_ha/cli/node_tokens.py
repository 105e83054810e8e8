"""One token per node: `shepherd-ha token create --node NAME [--token-file F]`.

The token's user is system:node:NAME in group system:nodes (Kubernetes' convention),
which is what api/authz/node_restriction.py recognises as that node. The token file
is rewritten beside itself and renamed over (0600), so a replica watching it
(api/token_reload.py) never sees half a file; the new token works at once.
"""
import csv
import io
import os
import secrets
import sys
import tempfile

from shepherd_ha.model.names import is_dns1123_subdomain

NODE_GROUP = "system:nodes"
DEFAULT_TOKEN_FILE = "/etc/shepherd/tokens.csv"


class TokenFileError(Exception):
    pass


def node_user(node):
    return "system:node:" + node


def _rows(path):
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            return list(csv.reader(fh))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise TokenFileError("cannot read %s: %s" % (path, exc.strerror))


def _write_atomically(path, rows):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        writer.writerow(row)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tokens.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(out.getvalue())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def add_node_token(path, node, rotate=False, token=None):
    """Give node NAME its own token in the token file; returns the token. An existing
    token of that node is an error unless `rotate` (then it is replaced: the old one
    stops working at once)."""
    if not is_dns1123_subdomain(node):
        raise TokenFileError("node name %r is not a valid name: lowercase letters, digits, '-' and '.'" % node)
    user = node_user(node)
    rows = _rows(path)
    mine = [r for r in rows if len(r) >= 2 and r[1].strip() == user]
    if mine and not rotate:
        raise TokenFileError("%s already has a token for node %s: pass --rotate to replace it" % (path, node))
    token = token or secrets.token_hex(32)
    kept = [r for r in rows if r not in mine]
    _write_atomically(path, kept + [[token, user, user, NODE_GROUP]])
    return token


def remove_node_token(path, node):
    """Drop node NAME's token; True if it had one."""
    user = node_user(node)
    rows = _rows(path)
    kept = [r for r in rows if not (len(r) >= 2 and r[1].strip() == user)]
    if len(kept) == len(rows):
        return False
    _write_atomically(path, kept)
    return True


def add_parser(subparsers):
    parser = subparsers.add_parser("token", help="manage per-node tokens in the replicas' --token-file")
    sub = parser.add_subparsers(dest="token_command", metavar="ACTION")
    for name, text in (("create", "give a node its own token (user system:node:NAME, group system:nodes)"),
                       ("delete", "remove a node's token (it stops working at once)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--node", required=True, help="the node's name (the agent's --node-name)")
        p.add_argument("--token-file", default=DEFAULT_TOKEN_FILE,
                       help="the replicas' token file (default %s); copy it to every replica" % DEFAULT_TOKEN_FILE)
        if name == "create":
            p.add_argument("--rotate", action="store_true", help="replace the node's existing token")
            p.add_argument("--output", help="write the token to this file (0600) for the agent's token_file, "
                           "instead of printing it")
        p.set_defaults(func=run)


def run(args):
    try:
        if args.token_command == "delete":
            if not remove_node_token(args.token_file, args.node):
                print("%s holds no token for node %s" % (args.token_file, args.node), file=sys.stderr)
                return 1
            print("removed node %s's token from %s" % (args.node, args.token_file), file=sys.stderr)
            return 0
        token = add_node_token(args.token_file, args.node, rotate=args.rotate)
    except TokenFileError as exc:
        print("shepherd-ha token: %s" % exc, file=sys.stderr)
        return 1
    if args.output:
        fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token + "\n")
        print("node %s's token is in %s (user %s); %s has it" % (args.node, args.output, node_user(args.node),
                                                              args.token_file), file=sys.stderr)
    else:
        print(token)
    return 0


def main(argv=None):
    """`python -m shepherd_ha.cli.node_tokens create --node NAME ...`: the same without the
    server's imports (the Vagrant host's prepare-artifacts.sh runs it with a bare Python)."""
    import argparse
    parser = argparse.ArgumentParser(prog="shepherd-ha")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["token"] + list(sys.argv[1:] if argv is None else argv))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
