"""Options of a long-running command (server, agent): command line > SHEPHERD_*
environment > YAML file > default, from one table, so --help, the environment and
the file always agree. No heavy imports: the agent uses it too."""
import dataclasses
import os

import yaml


class ConfigError(ValueError):
    """Settings that cannot work; the message says which and how to fix it."""


@dataclasses.dataclass(frozen=True)
class Option:
    name: str
    type: type
    default: object
    help: str

    @property
    def env(self):
        return "SHEPHERD_" + self.name.upper()

    @property
    def flag(self):
        return "--" + self.name.replace("_", "-")


def defaults(options):
    """{option name: default}, for code that needs an option's default outside the parser."""
    return {opt.name: opt.default for opt in options}


def read_secret_file(path, flag):
    """The stripped text of a file holding a secret (a password, a token); ConfigError
    naming the flag when it cannot be read."""
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError as exc:
        raise ConfigError("cannot read %s %s: %s" % (flag, path, exc.strerror))


def add_arguments(parser, options, config_env):
    parser.add_argument("--config", help="YAML file with any of the options below (keys as in the flags, "
                        "with _ or -); env %s" % config_env)
    for opt in options:
        if opt.type is bool:        # a switch: --flag alone means true (env and file: true/false)
            parser.add_argument(opt.flag, dest=opt.name, default=None, action="store_const", const=True,
                                help="%s; env %s=true" % (opt.help, opt.env))
            continue
        default = "" if opt.default in (None, "") else " (default %s)" % opt.default
        parser.add_argument(opt.flag, dest=opt.name, default=None,
                            help="%s; env %s%s" % (opt.help, opt.env, default))


def resolve(args, options, config_env, environ=None):
    """Merge the sources into a dict of typed values; ConfigError names the bad one."""
    environ = os.environ if environ is None else environ
    path = getattr(args, "config", None) or environ.get(config_env)
    from_file = _read_file(path, options) if path else {}
    values = {}
    for opt in options:
        for source, raw in (("flag " + opt.flag, getattr(args, opt.name, None)),
                            ("env " + opt.env, environ.get(opt.env)),
                            ("config file key " + opt.name, from_file.get(opt.name))):
            if raw is not None:
                break
        else:
            source, raw = "default", opt.default
        values[opt.name] = _convert(opt, raw, source)
    return values


def _read_file(path, options):
    try:
        with open(path) as fh:
            loaded = yaml.safe_load(fh) or {}
    except OSError as exc:
        raise ConfigError("cannot read config file %s: %s" % (path, exc.strerror))
    except yaml.YAMLError as exc:
        raise ConfigError("config file %s is not valid YAML: %s" % (path, exc))
    if not isinstance(loaded, dict):
        raise ConfigError("config file %s must hold a mapping of option: value" % path)
    from_file = {str(k).replace("-", "_"): v for k, v in loaded.items()}
    unknown = sorted(set(from_file) - {o.name for o in options})
    if unknown:
        raise ConfigError("config file %s has unknown option(s) %s" % (path, ", ".join(unknown)))
    return from_file


def _convert(opt, raw, source):
    if raw is None:
        return None
    # YAML may give a list (servers, peers) or a mapping (labels) for a comma-separated option.
    if isinstance(raw, dict) and opt.type is str:
        raw = ",".join("%s=%s" % kv for kv in raw.items())
    elif isinstance(raw, list) and opt.type is str:
        raw = ",".join(str(item) for item in raw)
    if opt.type is bool:
        text = str(raw).strip().lower()
        if isinstance(raw, bool) or text in ("true", "false", "1", "0", "yes", "no"):
            return raw if isinstance(raw, bool) else text in ("true", "1", "yes")
        raise ConfigError("%s: %r is not true or false for %s" % (source, raw, opt.name))
    try:
        return opt.type(raw)
    except (TypeError, ValueError):
        raise ConfigError("%s: %r is not a valid %s for %s" % (source, raw, opt.type.__name__, opt.name))
