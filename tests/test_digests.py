"""The hook's sha256 gives the values `hashlib` gives: versions, keys and names built from it
stay what they were."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from sagemem.store.digests import sha256_hex


@given(st.binary(max_size=5000))
def test_the_digest_is_hashlibs(data: bytes) -> None:
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_a_known_digest() -> None:
    assert sha256_hex(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
