"""Writes shepherd_ha/api/protobuf_schema.py: the protobuf field tables of the kinds the
API serves, read from Kubernetes' Go type definitions (their `protobuf:"..."` struct
tags are the wire format's field numbers; their Go types say which fields are pointers,
so that a zero sent explicitly is kept, and which are inlined in JSON).

    python scripts/gen_protobuf_schema.py /path/to/kubernetes/api /path/to/kubernetes/apimachinery

Run once per Kubernetes minor we follow; the output is data, reviewed like code.
"""
import os
import re
import sys

PACKAGES = {  # our prefix: (repo, path of the package)
    "core": ("api", "core/v1"), "apps": ("api", "apps/v1"), "rbac": ("api", "rbac/v1"),
    "authz": ("api", "authorization/v1"), "policy": ("api", "policy/v1"),
    "coord": ("api", "coordination/v1"), "autoscaling": ("api", "autoscaling/v1"),
    "meta": ("apimachinery", "pkg/apis/meta/v1"),
}
IMPORTS = {"v1": "core", "corev1": "core", "metav1": "meta", "appsv1": "apps"}
# Types with their own wire shape (see protobuf_decode.py).
SPECIAL = {"resource.Quantity": "quantity", "intstr.IntOrString": "intorstring", "metav1.Time": "time",
           "metav1.MicroTime": "microtime", "runtime.RawExtension": "raw",
           "metav1.FieldsV1": "raw", "types.UID": "string", "Time": "time", "MicroTime": "microtime",
           "FieldsV1": "raw"}
SCALARS = {"string": "string", "int32": "int", "int64": "int", "int": "int", "uint32": "int", "uint64": "int",
           "bool": "bool", "float64": "double", "float32": "float"}
# What a request body can be: (apiVersion, kind) -> message.
KINDS = {
    ("v1", "Namespace"): "core.Namespace", ("v1", "Node"): "core.Node", ("v1", "Pod"): "core.Pod",
    ("v1", "Service"): "core.Service", ("v1", "Endpoints"): "core.Endpoints", ("v1", "Event"): "core.Event",
    ("v1", "ConfigMap"): "core.ConfigMap", ("v1", "Secret"): "core.Secret",
    ("apps/v1", "Deployment"): "apps.Deployment", ("apps/v1", "ReplicaSet"): "apps.ReplicaSet",
    ("apps/v1", "ControllerRevision"): "apps.ControllerRevision",
    ("coordination.k8s.io/v1", "Lease"): "coord.Lease",
    ("rbac.authorization.k8s.io/v1", "Role"): "rbac.Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "rbac.ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rbac.RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "rbac.ClusterRoleBinding",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "authz.SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): "authz.SelfSubjectRulesReview",
    ("policy/v1", "Eviction"): "policy.Eviction", ("autoscaling/v1", "Scale"): "autoscaling.Scale",
    # Sent with the group version of the resource deleted (any group): see protobuf_decode.py.
    ("meta.k8s.io/v1", "DeleteOptions"): "meta.DeleteOptions",
}

FIELD = re.compile(r'^\s+(?:(\w+)\s+)?([\w.*\[\]]+)\s+`(.*)`')


def read_package(root, path):
    structs, aliases = {}, {}
    for name in sorted(os.listdir(os.path.join(root, path))):
        if not name.endswith(".go") or name.endswith("_test.go") or name.startswith("zz_") \
                or name.startswith("generated"):
            continue
        current = None
        for line in open(os.path.join(root, path, name), encoding="utf-8"):
            m = re.match(r"^type (\w+) struct {", line)
            if m:
                current = structs.setdefault(m.group(1), [])
                continue
            m = re.match(r"^type (\w+) ([\w.*\[\]]+)\s*(//.*)?$", line)
            if m:
                aliases[m.group(1)] = m.group(2)
                continue
            if current is not None and line.startswith("}"):
                current = None
                continue
            if current is None:
                continue
            m = FIELD.match(line)
            if not m or 'protobuf:"' not in m.group(3):
                continue
            tag = m.group(3)
            pb = re.search(r'protobuf:"([^"]*)"', tag).group(1).split(",")
            if pb[0] == "-":
                continue
            js = re.search(r'json:"([^"]*)"', tag)
            json_name = js.group(1).split(",")[0] if js else ""
            go_type = m.group(2)
            if js and "omitempty" not in js.group(1).split(",")[1:] and not go_type.startswith("*"):
                go_type = "!" + go_type       # JSON always carries it, zero or not
            current.append((int(pb[1]), json_name, go_type))
    return structs, aliases


def main(api_root, machinery_root):
    roots = {"api": api_root, "apimachinery": machinery_root}
    packages = {p: read_package(roots[repo], path) for p, (repo, path) in PACKAGES.items()}
    out, todo = {}, list(KINDS.values())

    def resolve(pkg, go_type):
        """Our type string of one Go type, queueing the messages it names."""
        pointer = go_type.startswith(("*", "!"))
        go_type = go_type.lstrip("*!")
        if go_type == "[]byte":
            return "bytes"
        if go_type.startswith("[]"):
            return "[]" + resolve(pkg, go_type[2:])
        if go_type.startswith("map["):
            value = go_type[go_type.index("]") + 1:]
            return "map:" + resolve(pkg, value)
        if go_type in SPECIAL and (pkg == "meta" or "." in go_type):
            return SPECIAL[go_type]
        if go_type in SCALARS:
            return SCALARS[go_type] + ("?" if pointer else "")
        if "." in go_type:
            prefix, name = go_type.split(".")
            if prefix not in IMPORTS:
                raise SystemExit("unknown package %s" % go_type)
            target = IMPORTS[prefix]
        else:
            target, name = pkg, go_type
        structs, aliases = packages[target]
        if name in aliases:
            inner = resolve(target, aliases[name])
            return inner + "?" if pointer and inner in ("string", "int", "bool") else inner
        if name not in structs:
            raise SystemExit("unknown type %s.%s" % (target, name))
        full = "%s.%s" % (target, name)
        todo.append(full)
        return full

    while todo:
        full = todo.pop()
        if full in out:
            continue
        pkg, name = full.split(".")
        out[full] = None
        out[full] = {number: (json_name, resolve(pkg, go_type))
                     for number, json_name, go_type in sorted(packages[pkg][0][name])}

    lines = ['"""Protobuf field tables of the kinds the API reads as protobuf request bodies.',
             "",
             "Generated by scripts/gen_protobuf_schema.py from the `protobuf:` struct tags of",
             "k8s.io/api and k8s.io/apimachinery (%s); do not edit by hand." % os.environ.get("K8S_REF", "master"),
             "",
             "MESSAGES: message -> {field number: (JSON name, type)}; a JSON name \"\" is a",
             "message inlined into its parent in JSON (Volume's VolumeSource). Types: string,",
             "int, bool, double, float, bytes (base64 in JSON), quantity, intorstring, time,",
             "microtime, raw (embedded JSON); a trailing ? is a scalar whose zero JSON",
             "carries too (a pointer field set to zero, or a field without omitempty): kept;",
             "[]T repeated; map:T map<string, T>;",
             "otherwise another message.",
             '"""',
             "# flake8: noqa",
             "KINDS = {"]
    for (version, kind), message in sorted(KINDS.items()):
        lines.append("    (%r, %r): %r," % (version, kind, message))
    lines.append("}")
    lines.append("")
    lines.append("MESSAGES = {")
    for full in sorted(out):
        fields = ", ".join("%d: (%r, %r)" % (n, j, t) for n, (j, t) in sorted(out[full].items()))
        lines.append("    %r: {%s}," % (full, fields))
    lines.append("}")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
