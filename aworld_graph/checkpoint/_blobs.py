"""Channel values as blob rows: full values, and append-only lists as deltas.

A msgpack list is an array header and then its items' encodings, each independent of the
others. When a new version of a list channel starts with the previous version's items
(messages, a trace, rewards), the row keeps only the appended items (itself a msgpack array)
and points at the version it extends; every ``snapshot_every`` versions a full value is
stored again, so rebuilding any version reads a bounded chain. The prefix is compared on the
serialized bytes (a BLAKE2b digest), so a list edited in place is never taken for an append.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["EMPTY", "DELTA", "BaseInfo", "encode_channel", "split_array", "array_header"]

EMPTY, FULL, DELTA = 0, 1, 2
"""Row kinds: the channel has no value at this version / a whole value / appended items."""


@dataclass(frozen=True, slots=True)
class BaseInfo:
    """A stored list version a later one may extend: its version string, item count, the
    length and BLAKE2b-128 digest of its serialized items (the array body, without its
    header), and its depth: the delta rows back to the nearest full value (0 for one)."""

    version: str
    items: int
    nbytes: int
    digest: bytes
    depth: int


Row = tuple[int, str | None, bytes | None, str | None, int | None, int | None, bytes | None, int]
"""A ``checkpoint_blobs`` row's ``(kind, type, value, base_version)``, then :class:`BaseInfo`'s
``items, nbytes, digest, depth`` (the first three ``None`` but for a list)."""


def split_array(data: bytes) -> tuple[int, int] | None:
    """``(item count, header length)`` when ``data`` is a msgpack array, else ``None``."""
    if not data:
        return None
    first = data[0]
    if 0x90 <= first <= 0x9F:
        return first & 0x0F, 1
    if first == 0xDC and len(data) >= 3:
        return struct.unpack_from(">H", data, 1)[0], 3
    if first == 0xDD and len(data) >= 5:
        return struct.unpack_from(">I", data, 1)[0], 5
    return None


def array_header(count: int) -> bytes:
    """The msgpack header of an array of ``count`` items."""
    if count < 16:
        return bytes((0x90 | count,))
    if count < 0x10000:
        return b"\xdc" + struct.pack(">H", count)
    return b"\xdd" + struct.pack(">I", count)


def encode_channel(
    value: Any, typed: tuple[str, bytes], base: BaseInfo | None, snapshot_every: int
) -> tuple[Row, list[Any] | None]:
    """The row to store for ``value`` (already serialized as ``typed``), and when ``value``
    is a list that extends ``base``, the appended items (``None`` when it is not an append)."""
    type_, data = typed
    header = split_array(data) if type_ == "msgpack" and isinstance(value, list) else None
    if header is None:
        return (FULL, type_, data, None, None, None, None, 0), None
    count, hlen = header
    body = memoryview(data)[hlen:]
    if base is not None and base.items <= count and base.nbytes <= len(body):
        prefix = hashlib.blake2b(body[: base.nbytes], digest_size=16)
        if prefix.digest() == base.digest:
            prefix.update(body[base.nbytes :])
            digest, appended = prefix.digest(), value[base.items :]
            if base.depth + 1 < snapshot_every:
                delta = array_header(count - base.items) + bytes(body[base.nbytes :])
                row = (DELTA, type_, delta, base.version, count, len(body), digest, base.depth + 1)
                return row, appended
            return (FULL, type_, data, None, count, len(body), digest, 0), appended
    digest = hashlib.blake2b(body, digest_size=16).digest()
    return (FULL, type_, data, None, count, len(body), digest, 0), None
