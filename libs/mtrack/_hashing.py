"""The one hash of a mutation id that summaries use, split into the values they need.

Each id is hashed once: keyed BLAKE2b of its 24 packed bytes, 24 bytes out. Bytes 0-7 are the
64-bit digest element (``LogDigests`` sums it mod 2^64), bytes 8-19 three 32-bit positions (one
per IBLT sub-table, reduced modulo the sub-table size), bytes 20-23 the 32-bit check that tells a
pure IBLT cell. Both sides of a comparison must agree on all of this, so the key and the layout
are part of the wire format: changing either is a protocol change.
"""

from __future__ import annotations

import struct
from hashlib import blake2b

HASH_KEY = b"epochal.mtrack"
_LAYOUT = struct.Struct(">QIIII")
_KEYED = blake2b(digest_size=_LAYOUT.size, key=HASH_KEY)  # only ever copied, never updated


def id_hash(packed_id: bytes) -> tuple[int, int, int, int, int]:
    """``(element, position_0, position_1, position_2, check)`` of one packed id."""
    hasher = _KEYED.copy()  # a third faster than keying a new hasher for each id
    hasher.update(packed_id)
    return _LAYOUT.unpack(hasher.digest())


def digest_element(packed_id: bytes) -> int:
    """The 64-bit value ``LogDigests`` sums for one packed id."""
    return id_hash(packed_id)[0]
