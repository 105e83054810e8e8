"""Bounds on query numbers and the body checks that need no server (api/params.py,
api/bodies.py); the server-side limits are tested on real replicas in
tests/integration/test_api_limits.py."""
import json

import pytest
from flask import Flask

from shepherd_ha.api import params
from shepherd_ha.api.bodies import _unsupported_value, field_path, json_body
from shepherd_ha.api.errors import ApiError
from shepherd_ha.api.http_server import Limits

app = Flask("t")


@pytest.mark.parametrize("text,ok", [("0", 0), ("17", 17), (str(params.INT32_MAX), params.INT32_MAX),
                                     (str(params.INT32_MAX + 1), None), ("9" * 4301, None), ("-1", None),
                                     ("1e3", None), ("²", None), (" 1", None)])
def test_query_numbers_are_bounded(text, ok):
    with app.test_request_context("/?tailLines=" + text):
        if ok is None:
            with pytest.raises(ApiError) as exc:
                params.query_int("tailLines")
            assert exc.value.code == 400 and "tailLines" in exc.value.message and len(exc.value.message) < 200
        else:
            assert params.query_int("tailLines") == ok


def test_resource_version_is_a_bounded_revision():
    with app.test_request_context("/?resourceVersion=" + "9" * 4301):
        with pytest.raises(ApiError) as exc:
            params.resource_version()
        assert exc.value.code == 400
    with app.test_request_context("/?resourceVersion=%d" % params.INT64_MAX):
        assert params.resource_version() == params.INT64_MAX
    with app.test_request_context("/?resourceVersion="):
        assert params.resource_version() is None


def test_json_numbers_are_bounded_too():
    assert params.parse_int("gracePeriodSeconds", 30) == 30
    for bad in (True, 10 ** 40, -1, 1.5, "x"):
        with pytest.raises(ApiError):
            params.parse_int("gracePeriodSeconds", bad)


@pytest.mark.parametrize("body,field", [
    ({"metadata": {"annotations": {"a": "\ud800"}}}, "metadata.annotations.a"),
    ({"spec": {"containers": [{"name": "ok"}, {"args": ["x", "\udfff"]}]}}, "spec.containers[1].args[1]"),
    ({"data": {"\ud800": "v"}}, "data.\\ud800"),
])
def test_a_lone_surrogate_is_found_with_its_field(body, field):
    found, message = _unsupported_value(body)
    assert found == field and "surrogate" in message
    with app.test_request_context("/", method="POST", data=json.dumps(body)):
        with pytest.raises(ApiError) as exc:
            json_body()
        assert exc.value.code == 422 and exc.value.details["causes"][0]["field"] == field


def test_valid_unicode_passes():
    assert _unsupported_value({"a": "é日本😀", "b": ["ü"]}) is None
    assert field_path(None) == "(the body)"


def test_connection_limits_per_address_and_in_all():
    limits = Limits(total=3, per_address=2)
    assert limits.take("a") is None and limits.take("a") is None
    assert limits.take("a") == "per-address"
    assert limits.take("b") is None
    assert limits.take("c") == "total"
    limits.give_back("a")
    assert limits.take("c") is None
    assert limits.snapshot()["open"] == 3 and limits.snapshot()["refused"] == {"per-address": 1}
