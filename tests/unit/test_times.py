"""RFC 3339 times (shepherd_ha/model/times.py): what the server, the agent and sheepctl
write, and what they accept from clients."""
import datetime

import pytest

from shepherd_ha.model import times

UTC = datetime.timezone.utc


def test_a_time_is_written_to_the_second_and_a_micro_time_to_the_microsecond():
    assert times.format_time(0) == "1970-01-01T00:00:00Z"
    assert times.format_time(86400 + 3661.9) == "1970-01-02T01:01:01Z"        # truncated, not rounded
    assert times.format_micro_time(1.5) == "1970-01-01T00:00:01.500000Z"
    assert times.format_datetime(datetime.datetime(2026, 11, 29, 17, 0, 0, 123456)) == "2026-11-29T17:00:00Z"
    assert times.format_datetime(datetime.datetime(2026, 11, 29, 17, 0, 0, 123456), micro=True) == \
        "2026-11-29T17:00:00.123456Z"
    # an aware time in another zone is written in UTC
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    assert times.format_datetime(datetime.datetime(2026, 11, 29, 19, 0, tzinfo=plus_two)) == "2026-11-29T17:00:00Z"


def test_now_is_now_and_an_offset_moves_it():
    before = times.parse_seconds(times.format_time())
    ago = times.parse_seconds(times.now_rfc3339(-3600))
    assert abs(before - ago - 3600) <= 1


@pytest.mark.parametrize("text,seconds", [
    ("1970-01-01T00:00:10Z", 10),
    ("1970-01-01T00:00:10z", 10),
    (" 1970-01-01T00:00:10Z ", 10),
    ("1970-01-01T00:00:10.5Z", 10.5),
    ("1970-01-01T00:00:10.123456789Z", 10.123456),   # nanoseconds, as client-go sends them
    ("1970-01-01T02:00:10+02:00", 10),
    ("1970-01-01T02:00:10.5+02:00", 10.5),           # the agent's own parser made this 7210.502
    ("1970-01-01T00:00:10", 10),                     # no offset: UTC
])
def test_clients_times_are_read(text, seconds):
    assert times.parse_seconds(text) == pytest.approx(seconds)
    assert times.parse_datetime(text).tzinfo is not None


def test_a_since_time_keeps_microseconds():
    moment = times.parse_datetime("2026-11-29T17:00:00.123456789Z")
    assert (moment.microsecond, moment.utcoffset().total_seconds()) == (123456, 0)
    assert times.parse_datetime("2026-11-29T17:00:00Z").microsecond == 0


@pytest.mark.parametrize("text", ["garbage", "2026-13-01T00:00:00Z", "2026-11-29T17:00:00Zjunk", "", None, 5])
def test_what_is_not_a_time_is_none_or_a_value_error_naming_it(text):
    assert times.parse_seconds(text) is None and times.parse_time(text) is None
    if text:
        with pytest.raises(ValueError, match="RFC 3339"):
            times.parse_datetime(text)


def test_what_is_written_reads_back():
    for seconds in (0, 1.25, 1764435600.5):
        assert times.parse_seconds(times.format_micro_time(seconds)) == pytest.approx(seconds)
        assert times.parse_seconds(times.format_time(seconds)) == int(seconds)
