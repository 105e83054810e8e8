import pytest

from shepherd_ha.model.quantity import (QuantityError, format_cpu, format_memory, parse_cpu,
                                        parse_memory)


@pytest.mark.parametrize("value, millicores", [
    ("500m", 500), ("0.5", 500), (1, 1000), ("2", 2000), (0, 0), ("0", 0), ("100m", 100),
    (0.25, 250), (".5", 500), ("1.5", 1500), ("1e3", 1_000_000), ("1E-3", 1),
    ("0.0001", 1),          # rounds up to the smallest unit, like Kubernetes
    ("1.0005", 1001), (" 250m ", 250), ("+1", 1000), ("-0", 0),
])
def test_parse_cpu(value, millicores):
    assert parse_cpu(value) == millicores


@pytest.mark.parametrize("value, nbytes", [
    ("128Mi", 128 * 2 ** 20), ("1Gi", 2 ** 30), ("1G", 10 ** 9), ("500M", 5 * 10 ** 8),
    ("1000", 1000), (1024, 1024), ("1e3", 1000), ("512Ki", 512 * 1024), ("1k", 1000),
    ("1.5Gi", 3 * 2 ** 29), ("1Ti", 2 ** 40), ("2Pi", 2 ** 51), ("1Ei", 2 ** 60), ("1E", 10 ** 18),
    ("1E3", 1000), ("0.5", 1), (0, 0), (1.0, 1), ("0.5Ki", 512),
])
def test_parse_memory(value, nbytes):
    assert parse_memory(value) == nbytes


@pytest.mark.parametrize("value", ["12x", "", " ", "m", "1.2.3", "Mi", "1 Mi", "1Mi2", "0x10",
                                   "1,5", "∞", "1e", "1e+", True, False, None, [], {}, "5n",
                                   float("nan"), float("inf")])
def test_bad_cpu(value):
    with pytest.raises(QuantityError) as e:
        parse_cpu(value)
    assert "not a CPU quantity" in str(e.value)
    assert "500m" in str(e.value)       # tells the person what to write instead


@pytest.mark.parametrize("value", ["12x", "", "1.2.3", "1 Gi", "Gi", "0x10", "1Kib", True,
                                   None, ["1Gi"], {"a": 1}, float("-inf")])
def test_bad_memory(value):
    with pytest.raises(QuantityError) as e:
        parse_memory(value)
    assert "not a memory quantity" in str(e.value)


def test_memory_message_is_actionable():
    with pytest.raises(QuantityError) as e:
        parse_memory("12x")
    assert str(e.value) == ("'12x' is not a memory quantity: use bytes or a suffix such as "
                            "128Mi, 1Gi, 500M")


@pytest.mark.parametrize("value, hint", [("128m", "did you mean Mi"), ("1MB", "Mi"),
                                         ("1GB", "Gi"), ("1K", "Ki")])
def test_common_memory_mistakes_get_hints(value, hint):
    with pytest.raises(QuantityError) as e:
        parse_memory(value)
    assert hint in str(e.value)


@pytest.mark.parametrize("parse, value", [
    (parse_cpu, "-1"), (parse_cpu, -1), (parse_cpu, -0.5), (parse_cpu, "-500m"),
    (parse_memory, "-1"), (parse_memory, -1), (parse_memory, "-0.5"), (parse_memory, "-128Mi"),
])
def test_negative_is_an_error(parse, value):
    with pytest.raises(QuantityError, match="negative"):
        parse(value)


@pytest.mark.parametrize("parse", [parse_cpu, parse_memory])
@pytest.mark.parametrize("value", ["1e99", "1e31", "99999999999999999999Ei", 2 ** 80, "1e-99"])
def test_out_of_range(parse, value):
    with pytest.raises(QuantityError):
        parse(value)


def test_quantity_error_is_a_value_error():
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize("millicores, text", [(500, "500m"), (2000, "2"), (0, "0"), (1, "1m"),
                                              (1500, "1500m"), (1000, "1")])
def test_format_cpu(millicores, text):
    assert format_cpu(millicores) == text


@pytest.mark.parametrize("nbytes, text", [(128 * 2 ** 20, "128Mi"), (2 ** 30, "1Gi"),
                                          (1000, "1000"), (0, "0"), (1024, "1Ki"),
                                          (1536, "1536"), (3 * 2 ** 29, "1536Mi"),
                                          (2 ** 60, "1Ei"), (10 ** 9, "1000000000")])
def test_format_memory(nbytes, text):
    assert format_memory(nbytes) == text


@pytest.mark.parametrize("fmt", [format_cpu, format_memory])
@pytest.mark.parametrize("value", [-1, 1.5, "1", None, True])
def test_format_rejects_non_counts(fmt, value):
    with pytest.raises(QuantityError):
        fmt(value)


@pytest.mark.parametrize("n", [0, 1, 7, 999, 1000, 1001, 123456, 2 ** 20, 5 * 2 ** 30 + 1])
def test_round_trip(n):
    assert parse_cpu(format_cpu(n)) == n
    assert parse_memory(format_memory(n)) == n
