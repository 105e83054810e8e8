import pytest

from shepherd_ha.model.selectors import (FieldSelector, LabelSelector, SelectorError,
                                         parse_field_selector, parse_label_selector,
                                         selector_from_labels, supported_fields)

WEB = {"app": "web", "tier": "frontend", "env": "prod"}


# --- label selectors: parsing and matching -------------------------------------------

@pytest.mark.parametrize("text, labels, expected", [
    ("app=web", WEB, True),
    ("app==web", WEB, True),
    ("app=db", WEB, False),
    ("app!=db", WEB, True),
    ("app!=web", WEB, False),
    ("missing!=x", WEB, True),             # != matches objects without the label
    ("env in (prod,staging)", WEB, True),
    ("env in (dev)", WEB, False),
    ("missing in (x)", WEB, False),
    ("env notin (dev,qa)", WEB, True),
    ("env notin (prod)", WEB, False),
    ("missing notin (x)", WEB, True),
    ("app", WEB, True),
    ("missing", WEB, False),
    ("!missing", WEB, True),
    ("!app", WEB, False),
    ("app=web,tier=frontend", WEB, True),
    ("app=web,tier=backend", WEB, False),
    ("app=web,env in (prod),!canary,tier", WEB, True),
    ("empty=", {"empty": ""}, True),
    ("empty=", {"empty": "x"}, False),
    ("empty=", {}, False),
    ("example.com/team=a", {"example.com/team": "a"}, True),
    ("app=web", {}, False),
    ("app=web", None, False),
    ("!app", None, True),
])
def test_label_selector_matches(text, labels, expected):
    assert parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize("text, canonical", [
    (" app = web ", "app=web"),
    ("app =web,  tier!= x", "app=web,tier!=x"),
    ("env in(a,b)", "env in (a,b)"),
    ("env   in   (  a , b  )", "env in (a,b)"),
    ("env notin(a)", "env notin (a)"),
    ("\tapp\t", "app"),
    ("! app", "!app"),
    (" ! app , tier ", "!app,tier"),
])
def test_whitespace_is_tolerated(text, canonical):
    assert str(parse_label_selector(text)) == canonical


@pytest.mark.parametrize("text", [None, "", "   "])
def test_empty_selector_matches_everything(text):
    sel = parse_label_selector(text)
    assert sel.empty
    assert sel.matches({}) and sel.matches(WEB) and sel.matches(None)
    assert str(sel) == ""


def test_non_empty_selector_is_not_empty():
    assert not parse_label_selector("a").empty


@pytest.mark.parametrize("text, canonical", [
    ("app=web", "app=web"),
    ("app==web", "app=web"),
    ("tier!=db,app=web", "app=web,tier!=db"),
    ("env in (b, a, b)", "env in (a,b)"),
    ("env notin (z,y)", "env notin (y,z)"),
    ("!x, x", "x,!x"),
    ("a=b,a=b", "a=b"),
    ("k=", "k="),
    ("example.com/tier in (fe)", "example.com/tier in (fe)"),
])
def test_canonical_string_round_trips(text, canonical):
    sel = parse_label_selector(text)
    assert str(sel) == canonical
    assert parse_label_selector(str(sel)) == sel


def test_equal_selectors_compare_and_hash_equal():
    a = parse_label_selector("b=2,a=1,c in (y,x)")
    b = parse_label_selector("c in (x,y), a==1, b=2")
    assert a == b and hash(a) == hash(b)


@pytest.mark.parametrize("text, reason", [
    ("a in (b", "missing ')'"),
    ("a in (b,", "missing ')'"),
    ("a in (", "missing ')'"),
    ("a in ()", "needs at least one value"),
    ("a in b", "expected '('"),
    ("a in (b,)", "expected a value"),
    ("a in (b c)", "expected ',' or ')'"),
    ("a b", "expected =, ==, !=, in or notin after 'a', found 'b'"),
    ("a>1", "operator '>' is not supported"),
    ("a<1", "operator '<' is not supported"),
    ("a=b,", "expected a label key"),
    (",a=b", "expected a label key"),
    ("a=b,,c", "expected a label key"),
    ("!", "expected a label key"),
    ("=b", "expected a label key"),
    ("a=b c", "expected ',' between requirements"),
    ("a=b=c", "expected ',' between requirements"),
    ("a=(", "expected a value after 'a='"),
    ("Bad Key=1", "after 'Bad'"),
    ("-a=1", "not a valid label key"),
    ("a_=1", "not a valid label key"),
    ("Bad.Prefix/a=1", "not a valid label key"),
    ("/a=1", "not a valid label key"),
    ("%s=1" % ("k" * 64), "not a valid label key"),
    ("a=-b", "not a valid label value"),
    ("a=%s" % ("v" * 64), "not a valid label value"),
    ("a in (ok,b@d)", "not a valid label value"),
])
def test_bad_label_selectors_name_the_problem(text, reason):
    with pytest.raises(SelectorError) as e:
        parse_label_selector(text)
    message = str(e.value)
    assert message.startswith("bad label selector '")
    assert reason in message


def test_error_message_format():
    with pytest.raises(SelectorError) as e:
        parse_label_selector("a in (b")
    assert str(e.value) == "bad label selector 'a in (b': missing ')'"


def test_selector_error_is_a_value_error():
    assert issubclass(SelectorError, ValueError)


@pytest.mark.parametrize("value", [1, ["a=b"], {"a": "b"}, True])
def test_non_string_label_selector(value):
    with pytest.raises(SelectorError):
        parse_label_selector(value)


def test_valid_edge_keys_and_values():
    key = "a" * 63
    sel = parse_label_selector("%s=%s,x.y_z-1=A.b_C-9,sub.example.com/k" % (key, "v" * 63))
    assert sel.matches({key: "v" * 63, "x.y_z-1": "A.b_C-9", "sub.example.com/k": ""})


def test_keywords_can_be_keys():
    assert parse_label_selector("in").matches({"in": "x"})
    assert parse_label_selector("notin=1").matches({"notin": "1"})


def test_matches_tolerates_odd_labels():
    sel = parse_label_selector("a=b")
    assert not sel.matches(["a"])
    assert not sel.matches({"a": 1})
    assert not sel.matches({"a": ["b"]})


# --- from_spec and selector_from_labels -----------------------------------------------

def test_from_spec_match_labels_and_expressions():
    sel = LabelSelector.from_spec({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "staging"]},
            {"key": "tier", "operator": "NotIn", "values": ["db"]},
            {"key": "app", "operator": "Exists"},
            {"key": "canary", "operator": "DoesNotExist", "values": []},
        ]})
    assert str(sel) == "app,app=web,!canary,env in (prod,staging),tier notin (db)"
    assert sel.matches(WEB)
    assert not sel.matches(dict(WEB, canary="1"))
    assert not sel.matches(dict(WEB, env="dev"))
    assert parse_label_selector(str(sel)) == sel


@pytest.mark.parametrize("spec", [None, {}, {"matchLabels": {}}, {"matchExpressions": []},
                                  {"matchLabels": None, "matchExpressions": None}])
def test_from_spec_empty(spec):
    assert LabelSelector.from_spec(spec).empty


@pytest.mark.parametrize("spec, reason", [
    ("app=web", "must be an object"),
    ([], "must be an object"),
    ({"app": "web"}, "unknown field 'app': use matchLabels or matchExpressions"),
    ({"matchLabels": ["app"]}, "matchLabels must be an object"),
    ({"matchLabels": {"app": 1}}, "not a valid label value"),
    ({"matchLabels": {"bad key": "x"}}, "not a valid label key"),
    ({"matchExpressions": {"key": "a"}}, "must be a list"),
    ({"matchExpressions": ["a"]}, "matchExpressions[0] must be an object"),
    ({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
     "matchExpressions[0].operator: 'Equals' is not supported: use In, NotIn, Exists or "
     "DoesNotExist"),
    ({"matchExpressions": [{"key": "a", "operator": "in", "values": ["x"]}]}, "not supported"),
    ({"matchExpressions": [{"key": "a"}]}, "operator: null is not supported"),
    ({"matchExpressions": [{"key": "a", "operator": ["In"]}]}, "not supported"),
    ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "must not be empty"),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]}, "must not be empty"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]}, "must be a list"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]},
     "not a valid label value"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
     "must be empty"),
    ({"matchExpressions": [{"operator": "Exists"}]}, "matchExpressions[0].key"),
])
def test_from_spec_errors(spec, reason):
    with pytest.raises(SelectorError) as e:
        LabelSelector.from_spec(spec)
    assert reason in str(e.value)


def test_selector_from_labels():
    sel = selector_from_labels({"app": "web", "tier": "frontend"})
    assert str(sel) == "app=web,tier=frontend"
    assert sel.matches(WEB)
    assert not sel.matches({"app": "web"})
    assert selector_from_labels({}).empty
    assert selector_from_labels(None).empty


@pytest.mark.parametrize("labels", [{"app": 1}, {"a b": "x"}, ["app"], "app=web"])
def test_selector_from_labels_errors(labels):
    with pytest.raises(SelectorError):
        selector_from_labels(labels)


# --- field selectors ------------------------------------------------------------------

POD = {"metadata": {"name": "web-1", "namespace": "default"},
       "spec": {"nodeName": "node-a"}, "status": {"phase": "Running"}}


@pytest.mark.parametrize("text, expected", [
    ("metadata.name=web-1", True),
    ("metadata.name==web-1", True),
    ("metadata.name!=web-1", False),
    ("metadata.name=web-2", False),
    ("metadata.namespace=default,status.phase=Running", True),
    ("metadata.namespace=default,status.phase!=Running", False),
    ("spec.nodeName=node-a", True),
    (" spec.nodeName = node-a ", True),
    ("spec.nodeName!=", True),
    ("status.phase in (x)=1", None),
])
def test_pod_field_selector(text, expected):
    if expected is None:
        with pytest.raises(SelectorError):
            parse_field_selector(text, "pods")
        return
    assert parse_field_selector(text, "pods").matches(POD) is expected


def test_missing_field_compares_as_empty():
    unscheduled = {"metadata": {"name": "p"}, "spec": {}}
    assert parse_field_selector("spec.nodeName=", "pods").matches(unscheduled)
    assert parse_field_selector("spec.nodeName==", "pods").matches({"metadata": {"name": "p"}})
    assert not parse_field_selector("spec.nodeName!=", "pods").matches(unscheduled)
    assert parse_field_selector("status.phase=", "pods").matches({"status": "odd"})


def test_boolean_fields_compare_as_text():
    node = {"metadata": {"name": "n"}, "spec": {"unschedulable": True}}
    assert parse_field_selector("spec.unschedulable=true", "nodes").matches(node)
    assert not parse_field_selector("spec.unschedulable=false", "nodes").matches(node)
    node["spec"]["unschedulable"] = False
    assert parse_field_selector("spec.unschedulable=false", "nodes").matches(node)


def test_event_fields():
    event = {"metadata": {"name": "e1", "namespace": "default"},
             "involvedObject": {"kind": "Pod", "name": "web-1"},
             "reason": "Scheduled", "type": "Normal"}
    sel = parse_field_selector(
        "involvedObject.kind=Pod,involvedObject.name=web-1,reason=Scheduled,type!=Warning",
        "events")
    assert sel.matches(event)
    assert not sel.matches(dict(event, type="Warning"))


@pytest.mark.parametrize("plural, field", [
    ("pods", "spec.foo"), ("pods", "reason"), ("nodes", "spec.nodeName"),
    ("services", "status.phase"), ("deployments", "spec.replicas"), ("events", "status.phase"),
    ("namespaces", "spec.unschedulable"),
])
def test_unsupported_fields(plural, field):
    with pytest.raises(SelectorError) as e:
        parse_field_selector(field + "=x", plural)
    assert str(e.value) == "field selector '%s' is not supported for %s; supported: %s" % (
        field, plural, ", ".join(supported_fields(plural)))


def test_unsupported_field_message_lists_pod_fields():
    with pytest.raises(SelectorError) as e:
        parse_field_selector("spec.foo=1", "pods")
    assert str(e.value) == ("field selector 'spec.foo' is not supported for pods; supported: "
                            "metadata.name, metadata.namespace, spec.nodeName, spec.restartPolicy, "
                            "spec.schedulerName, spec.serviceAccountName, spec.hostNetwork, status.phase, "
                            "status.podIP, status.nominatedNodeName")


@pytest.mark.parametrize("plural", ["pods", "nodes", "services", "endpoints", "events",
                                    "deployments", "namespaces"])
def test_common_fields_everywhere(plural):
    sel = parse_field_selector("metadata.name=x,metadata.namespace!=y", plural)
    assert sel.matches({"metadata": {"name": "x"}})


@pytest.mark.parametrize("text", ["metadata.name", "=x", "!=x", "metadata.name=x,", ",",
                                  "metadata.name=x,,status.phase=y"])
def test_bad_field_selector_syntax(text):
    with pytest.raises(SelectorError) as e:
        parse_field_selector(text, "pods")
    assert "field selector" in str(e.value)


@pytest.mark.parametrize("text", [None, "", "  "])
def test_empty_field_selector(text):
    sel = parse_field_selector(text, "pods")
    assert sel.empty and sel.matches({}) and str(sel) == ""


def test_field_selector_canonical_string():
    sel = parse_field_selector("status.phase!=Failed, metadata.name==web", "pods")
    assert str(sel) == "metadata.name=web,status.phase!=Failed"
    assert parse_field_selector(str(sel), "pods") == sel
    assert isinstance(sel, FieldSelector)


def test_field_selector_matches_odd_objects():
    sel = parse_field_selector("metadata.name=x", "pods")
    for obj in (None, [], "x", {"metadata": None}, {"metadata": ["x"]}, {"metadata": {"name": 5}}):
        assert sel.matches(obj) is False
