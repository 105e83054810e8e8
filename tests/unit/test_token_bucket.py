"""shepherd_ha/token_bucket.py: a burst at once, then `rate` per second."""
import pytest

from shepherd_ha.token_bucket import TokenBucket

from controller_kit import FakeClock


def test_a_burst_goes_at_once_then_tokens_come_at_the_rate():
    clock = FakeClock()
    bucket = TokenBucket(2.0, 3, clock)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    assert bucket.wait_time() == pytest.approx(0.5)
    clock.now += 0.25
    assert not bucket.take() and bucket.wait_time() == pytest.approx(0.25)
    clock.now += 0.25
    assert bucket.take() and not bucket.take()


def test_an_idle_bucket_fills_up_to_its_burst_only():
    clock = FakeClock()
    bucket = TokenBucket(10.0, 2, clock)
    clock.now += 3600
    assert [bucket.take() for _ in range(3)] == [True, True, False]


@pytest.mark.parametrize("rate, burst", [(0, 1), (-1, 5), (1, 0.5)])
def test_a_bucket_that_never_gives_a_token_is_refused(rate, burst):
    with pytest.raises(ValueError, match="token bucket"):
        TokenBucket(rate, burst)
