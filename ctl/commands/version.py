"""sheepctl version [--client] [-o json]"""
from .. import __version__, printers


def register(sub, common):
    p = sub.add_parser("version", parents=[common], help="client and server versions")
    p.add_argument("--client", action="store_true", help="the client version only")
    p.add_argument("-o", "--output", choices=("json", "yaml"))
    p.set_defaults(func=run)


def run(args, ctx):
    result = {"clientVersion": __version__}
    if not args.client:
        server = ctx.client.version() or {}
        result["serverVersion"] = server
        result["server"] = ctx.client.last_server
    if args.output == "json":
        ctx.print(printers.to_json(result))
        return 0
    if args.output == "yaml":
        ctx.out.write(printers.to_yaml(result))
        return 0
    ctx.print("Client Version: %s" % __version__)
    if not args.client:
        server = result["serverVersion"]
        if isinstance(server, dict):
            ctx.print("Server Version: %s (replica %s at %s)" % (
                server.get("version", "<unknown>"), server.get("replica", "?"), result["server"]))
        else:
            ctx.print("Server Version: %s" % server)
    return 0
