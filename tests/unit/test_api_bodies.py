"""Lists are serialized in chunks (shepherd_ha/api/bodies.py dumps_list): the same bytes as
one json.dumps, so clients see no difference, but no single call holds the GIL for long."""
import json

import pytest

from shepherd_ha.api.bodies import LIST_CHUNK_ITEMS, dumps, dumps_list

HEAD = {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "12"}}


@pytest.mark.parametrize("count", [0, 1, LIST_CHUNK_ITEMS - 1, LIST_CHUNK_ITEMS, LIST_CHUNK_ITEMS + 1, 1000])
def test_a_chunked_list_is_the_same_json(count):
    items = [{"metadata": {"name": "p%d" % i, "annotations": {"q": 'a "quoted", {braced} [x]'}}}
             for i in range(count)]
    chunks = dumps_list(HEAD, items)
    body = b"".join(chunks)
    assert body.decode() == dumps(dict(HEAD, items=items))
    assert json.loads(body) == dict(HEAD, items=items)
    assert len(chunks) == 2 + -(-count // LIST_CHUNK_ITEMS)       # head, one per chunk of items, tail


@pytest.mark.parametrize("value", [
    {"metadata": {"labels": {"city": "Zürich", "note": "雪"}}},          # UTF-8 text, not escaped
    {"spec": {"n": 2 ** 70, "m": -(2 ** 70)}},                           # beyond orjson's 64 bits: json writes it
    {"a": [1, 2.5, True, None, "x\ny\"z\\", [], {}]},
    {"tuple": ("kept", "as a list")},
])
def test_every_body_is_compact_json_that_reads_back_the_same(value):
    text = dumps(value)
    assert ": " not in text and ", " not in text.replace('", "', "")     # compact
    back = json.loads(text)
    assert back == json.loads(json.dumps(value))
    if "metadata" in value:
        assert "Zürich" in text and "\\u" not in text


def test_a_value_no_json_can_carry_is_refused_not_mangled():
    with pytest.raises(TypeError):
        dumps({"when": object()})
