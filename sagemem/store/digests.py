"""sha256 hex digests for the prompt hook, without loading OpenSSL.

`hashlib` loads OpenSSL's bindings (`_hashlib`) on import: about 2.4 ms, paid on every
prompt, though the hook only hashes short texts (a query, a snippet, a key) and, now and
then, a changed file. CPython's own sha256 module gives the same digests and imports in a
tenth of that time; it hashes about five times slower, which does not show at these sizes.
Bulk hashing elsewhere (snapshots, checkups) keeps `hashlib`. A build without the module
(it can be left out) falls back to `hashlib`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # as in store/records.py, without its `collections`: the relay's path

if TYPE_CHECKING:  # the same callable, as far as types go
    from hashlib import sha256 as _sha256
else:
    try:
        from _sha2 import sha256 as _sha256  # Python 3.12 and later
    except ImportError:
        try:
            from _sha256 import sha256 as _sha256  # Python 3.10 and 3.11
        except ImportError:
            from hashlib import sha256 as _sha256


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data`, in hex: the same value `hashlib.sha256(data).hexdigest()` gives."""
    return _sha256(data).hexdigest()
