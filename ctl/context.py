"""What every sheepctl command gets: parsed options, output streams, the
namespace and a lazily built client."""
import sys

from shepherd_ha.client import Client
from shepherd_ha.client.http_client import resolve_resource as _resolve
from shepherd_ha.model.resources import RESOURCES, lookup

from . import __version__ as _ctl_version  # noqa: F401  (re-exported for commands)
from . import config


class UserError(Exception):
    """A mistake on the command line; printed as `error: ...`, exit 1."""


class Context:
    def __init__(self, args, out=None, err=None, env=None):
        self.args = args
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.env = env
        self._client = None
        self._settings = None
        self._namespace = None

    # -- configuration ------------------------------------------------------

    @property
    def settings(self):
        if self._settings is None:
            a = self.args
            self._settings = config.resolve(getattr(a, "server", None), getattr(a, "config", None),
                                            getattr(a, "namespace", None), env=self.env,
                                            token_arg=getattr(a, "token", None),
                                            kubeconfig_arg=getattr(a, "kubeconfig", None),
                                            ca_arg=getattr(a, "certificate_authority", None))
        return self._settings

    @property
    def namespace(self):
        if self._namespace is None:
            a = self.args
            self._namespace = config.resolve_namespace(getattr(a, "config", None),
                                                       getattr(a, "namespace", None), env=self.env,
                                                       kubeconfig_arg=getattr(a, "kubeconfig", None))
        return self._namespace

    @property
    def namespace_given(self):
        return bool(getattr(self.args, "namespace", None))

    @property
    def all_namespaces(self):
        return bool(getattr(self.args, "all_namespaces", False))

    @property
    def client(self):
        if self._client is None:
            a = self.args
            self._client = Client(self.settings.servers,
                                  timeout=getattr(a, "request_timeout", None) or 5.0,
                                  retry_deadline=(a.retry_deadline if getattr(a, "retry_deadline", None)
                                                  is not None else 15.0),
                                  user_agent="sheepctl/%s" % _ctl_version, token=self.settings.token,
                                  ca_file=self.settings.ca_file, client_cert=self.settings.client_cert,
                                  cluster_id=self.settings.cluster_id)
        return self._client

    def close(self):
        if self._client is not None:
            self._client.close()

    # -- output -------------------------------------------------------------

    def print(self, text=""):
        self.out.write(text + "\n")
        self.out.flush()

    def error(self, text):
        self.err.write(text + "\n")
        self.err.flush()


def resolve_resource(name):
    """What the user typed -> Resource, or UserError like kubectl's."""
    r = RESOURCES.get(name) or lookup(name)
    if r is None:
        try:
            r = _resolve(name)
        except ValueError:
            raise UserError('the server doesn\'t have a resource type "%s" (known: %s)'
                            % (name, ", ".join(sorted(RESOURCES)))) from None
    return r


def parse_targets(resource_arg, names):
    """`pods a b`, `pod/a deploy/b` -> [(Resource, name)], or (Resource, []) for
    a type alone.  Returns (resource or None, [(Resource, name), ...])."""
    args = [resource_arg] + list(names)
    if "/" in resource_arg:
        out = []
        for a in args:
            if "/" not in a:
                raise UserError("there is no need to specify a resource type as a separate argument "
                                "when passing arguments in resource/name form (e.g. 'sheepctl get "
                                "resource/<resource_name>' instead of 'sheepctl get resource "
                                "resource/<resource_name>')")
            t, _, n = a.partition("/")
            if not n:
                raise UserError("%r: missing a name after the slash" % a)
            out.append((resolve_resource(t), n))
        return None, out
    r = resolve_resource(resource_arg)
    return r, [(r, n) for n in names]
