"""ctl.manifests: YAML/JSON, multi-document, List, directories, stdin, errors with lines."""
import io

import pytest

from ctl.manifests import ManifestError, load, parse_text


def test_multi_document_yaml_with_lines():
    text = ("---\n"
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n"
            "---\n"
            "# only a comment\n"
            "---\n"
            "kind: List\nitems:\n"
            "- kind: Service\n  metadata: {name: s}\n"
            "- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: d}\n")
    ms = parse_text(text, "x.yaml")
    assert [(m.resource.plural, m.name, m.line) for m in ms] == [
        ("pods", "a", 2), ("services", "s", 11), ("deployments", "d", 13)]
    assert ms[1].obj["apiVersion"] == "v1"  # filled in


def test_timestamps_and_numbers_keep_their_types():
    ms = parse_text("kind: Event\nmetadata: {name: e}\nlastTimestamp: 2026-11-29T17:00:00Z\n"
                    "count: 3\n", "e.yaml")
    assert ms[0].obj["lastTimestamp"] == "2026-11-29T17:00:00Z"
    assert ms[0].obj["count"] == 3


def test_json_object_and_array():
    assert parse_text('{"kind": "Namespace", "metadata": {"name": "n"}}', "-")[0].name == "n"
    ms = parse_text('[{"kind": "Pod", "metadata": {"name": "a"}}, {"kind": "Pod", "metadata": '
                    '{"name": "b"}}]', "pods.json")
    assert [m.name for m in ms] == ["a", "b"]


def test_cluster_scoped_namespace_is_dropped():
    m = parse_text("kind: Node\nmetadata: {name: n1, namespace: default}\n", "n.yaml")[0]
    assert "namespace" not in m.obj["metadata"]


@pytest.mark.parametrize("text,expected", [
    ("kind: Pod\nmetadata:\n  name: a\n   x: 1\n", "f.yaml: line 4: mapping values are not allowed here"),
    ("kind: Pod\nmetadata: [\n", "f.yaml: line 3:"),
    ("apiVersion: v1\nmetadata: {name: a}\n", "f.yaml: line 1: missing `kind`"),
    ("kind: PersistentVolume\nmetadata: {name: a}\n", "f.yaml: line 1: unknown kind 'PersistentVolume'"),
    ("kind: Pod\nmetadata: {}\n", "f.yaml: line 1: Pod has no metadata.name"),
    ("kind: Pod\napiVersion: apps/v1\nmetadata: {name: a}\n",
     "f.yaml: line 1: Pod is served as apiVersion v1, not 'apps/v1'"),
    ("just a string\n", "f.yaml: line 1: expected an object"),
    ("kind: Pod\nmetadata: {name: a}\n---\nkind: Pod\n", "f.yaml: line 4: Pod has no metadata.name"),
])
def test_errors_name_file_and_line(text, expected):
    with pytest.raises(ManifestError) as ei:
        parse_text(text, "f.yaml")
    assert str(ei.value).startswith(expected)


def test_json_error_line():
    with pytest.raises(ManifestError) as ei:
        parse_text('{\n  "kind": "Pod",\n  "metadata": }\n', "p.json")
    assert str(ei.value).startswith("p.json: line 3: Expecting value")


def test_load_paths(tmp_path):
    (tmp_path / "b.yaml").write_text("kind: Pod\nmetadata: {name: b}\n")
    (tmp_path / "a.json").write_text('{"kind": "Pod", "metadata": {"name": "a"}}')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yml").write_text("kind: Pod\nmetadata: {name: c}\n")
    (tmp_path / "README.md").write_text("# not a manifest: ignored")
    assert [m.name for m in load([str(tmp_path)])] == ["a", "b"]
    assert [m.name for m in load([str(tmp_path)], recursive=True)] == ["a", "b", "c"]
    ms = load(["-"], stdin=io.StringIO("kind: Pod\nmetadata: {name: s}\n"))
    assert (ms[0].name, ms[0].source) == ("s", "<stdin>")

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ManifestError, match="no manifests"):
        load([str(empty)])
    with pytest.raises(ManifestError) as ei:
        load([str(tmp_path / "nope.yaml"), str(tmp_path / "b.yaml")])
    assert ei.value.problems == ["%s: no such file or directory" % (tmp_path / "nope.yaml")]
    (tmp_path / "blank.yaml").write_text("---\n# nothing\n")
    with pytest.raises(ManifestError, match="no objects found"):
        load([str(tmp_path / "blank.yaml")])
