"""The AES-GCM cipher that replaces PySyncObj's Fernet on Raft connections."""
import pytest
from cryptography.fernet import Fernet

from shepherd_ha.store.raft_cipher import InvalidToken, RaftCipher


SALT = "00112233445566778899aabbccddeeff"


@pytest.fixture(scope="module")
def pair():
    return RaftCipher("s3cret", SALT), RaftCipher("s3cret", SALT)


def test_round_trip_between_two_processes_sharing_a_password(pair):
    sender, receiver = pair
    token = sender.encrypt_at_time(b"append_entries" * 100, 1234)
    assert receiver.extract_timestamp(token) == 1234
    assert receiver.decrypt(token) == b"append_entries" * 100
    assert b"append_entries" not in token


def test_nonces_never_repeat(pair):
    sender, _ = pair
    nonces = {sender.encrypt_at_time(b"x", 1)[9:21] for _ in range(10000)}
    assert len(nonces) == 10000


def test_tampered_header_or_body_is_refused(pair):
    sender, receiver = pair
    token = bytearray(sender.encrypt_at_time(b"vote for me", 50))
    for index in (2, 12, len(token) - 1):      # the timestamp, the nonce, the tag
        bad = bytearray(token)
        bad[index] ^= 1
        with pytest.raises(InvalidToken):
            receiver.decrypt(bytes(bad))


def test_other_password_and_fernet_tokens_are_refused(pair):
    sender, _ = pair
    with pytest.raises(InvalidToken, match="another Raft password"):
        RaftCipher("other", SALT).decrypt(sender.encrypt_at_time(b"hello", 1))
    fernet_token = Fernet(Fernet.generate_key()).encrypt_at_time(b"hello", 1)
    with pytest.raises(InvalidToken, match="version"):
        pair[1].extract_timestamp(fernet_token)
    with pytest.raises(InvalidToken, match="too short"):
        pair[1].decrypt(b"\x01abc")


def test_the_same_password_in_another_cluster_is_another_key(pair):
    sender, _ = pair
    with pytest.raises(InvalidToken):
        RaftCipher("s3cret", "ff" * 16).decrypt(sender.encrypt_at_time(b"hello", 1))


@pytest.mark.parametrize("salt", [None, "", "abcd", "zz" * 16])
def test_a_missing_short_or_non_hex_salt_is_refused(salt):
    from shepherd_ha.options import ConfigError
    with pytest.raises(ConfigError, match="--raft-salt"):
        RaftCipher("s3cret", salt)


def test_a_rotation_accepts_the_other_password_but_sends_with_its_own():
    old, new = RaftCipher("old-secret", SALT), RaftCipher("new-secret", SALT)
    accepting = RaftCipher("old-secret", SALT, also_accepted=["new-secret"])
    assert accepting.decrypt(new.encrypt_at_time(b"from a rotated peer", 1)) == b"from a rotated peer"
    assert accepting.decrypt(old.encrypt_at_time(b"from an old peer", 1)) == b"from an old peer"
    assert old.decrypt(accepting.encrypt_at_time(b"sent with its own", 1)) == b"sent with its own"
    with pytest.raises(InvalidToken):
        new.decrypt(accepting.encrypt_at_time(b"never with the accepted one", 1))
