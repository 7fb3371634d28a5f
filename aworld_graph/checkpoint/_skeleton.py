"""Checkpoint skeletons (a checkpoint without its id and values), whole or as parent deltas.

A skeleton holds every channel's version and, per node, the versions it has seen. On a
wide graph (a 100-node chain: ~100 branch channels) that is kilobytes per checkpoint while a
step changes a handful of entries, and writing it whole cost ~40 µs per step in the graph
(measured side by side). So a big skeleton whose parent this process has just written is
stored as the entries that changed: the ``checkpoint`` column then holds ``0xC1`` (a byte
msgpack never uses) followed by the msgpack of

``{"rest": {...}, "cv": {...}, "cv-": [...], "vs": {...}, "vs-": [...]}``

— the top-level fields other than the two maps, channel versions set and removed, and
per-node seen versions set and removed — applied on top of the parent's skeleton
(``parent_checkpoint_id``). Every :data:`SNAPSHOT_EVERY` checkpoints, and whenever the parent
is not at hand, the skeleton is stored whole, so reading one follows a bounded chain. Small
skeletons (a few channels: the usual agent graph) are always stored whole.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from ..errors import RuntimeFailure

__all__ = [
    "MARK",
    "MIN_ENTRIES",
    "SNAPSHOT_EVERY",
    "encode",
    "own",
    "is_delta",
    "resolve",
]

MARK = b"\xc1"
"""First byte of a delta (``0xC1`` is never used by msgpack, so no whole skeleton has it)."""
MIN_ENTRIES = 32
"""Channel versions plus nodes below which a skeleton is always stored whole."""
SNAPSHOT_EVERY = 16
"""A whole skeleton at least every this many checkpoints along a chain."""

Skeleton = dict[str, Any]
Row = tuple[str | None, bytes]
"""``(parent_checkpoint_id, stored skeleton)``."""
_MAPS = ("channel_versions", "versions_seen")


def is_delta(blob: bytes) -> bool:
    """Whether a stored skeleton is a delta of its parent's."""
    return blob[:1] == MARK


_MISSING = object()


def encode(
    serde: SerializerProtocol, skeleton: Skeleton, parent: Skeleton | None, depth: int
) -> tuple[bytes, int, Skeleton | None]:
    """The bytes to store for ``skeleton``, their delta depth (0: whole), and the skeleton as
    this process keeps it for the next delta (``None`` when it is too small for deltas).

    ``parent`` is the parent's kept skeleton when this process has it at hand, ``depth`` the
    parent's delta depth. The kept skeleton owns its maps (a caller may change its checkpoint
    after ``put``); a node's seen versions that did not change are the parent's own copy."""
    cv = skeleton.get("channel_versions")
    vs = skeleton.get("versions_seen")
    if not isinstance(cv, dict) or not isinstance(vs, dict) or len(cv) + len(vs) < MIN_ENTRIES:
        return serde.dumps_typed(skeleton)[1], 0, None
    old_vs: dict[str, Any] = (parent.get("versions_seen") or {}) if parent is not None else {}
    own_vs: dict[str, Any] = {}
    vs_set: dict[str, Any] = {}
    for key, seen in vs.items():
        old = old_vs.get(key, _MISSING)
        if old is not _MISSING and old == seen:
            own_vs[key] = old
        else:
            own_vs[key] = vs_set[key] = dict(seen) if isinstance(seen, dict) else seen
    own = {**skeleton, "channel_versions": dict(cv), "versions_seen": own_vs}
    if parent is None or depth + 1 >= SNAPSHOT_EVERY:
        return serde.dumps_typed(own)[1], 0, own
    old_cv: dict[str, Any] = parent.get("channel_versions") or {}
    delta = {
        "rest": {k: v for k, v in skeleton.items() if k not in _MAPS},
        "cv": {k: v for k, v in cv.items() if old_cv.get(k, _MISSING) != v},
        "cv-": [k for k in old_cv if k not in cv],
        "vs": vs_set,
        "vs-": [k for k in old_vs if k not in vs],
    }
    return MARK + serde.dumps_typed(delta)[1], depth + 1, own


def _apply(base: Skeleton, delta: dict[str, Any]) -> Skeleton:
    """``base`` with ``delta`` applied (``base`` is left as it was; inner maps are shared)."""
    cv = dict(base.get("channel_versions") or {})
    for key in delta.get("cv-", ()):
        cv.pop(key, None)
    cv.update(delta.get("cv") or {})
    vs = dict(base.get("versions_seen") or {})
    for key in delta.get("vs-", ()):
        vs.pop(key, None)
    vs.update(delta.get("vs") or {})
    out = dict(delta.get("rest") or {})
    out["channel_versions"] = cv
    out["versions_seen"] = vs
    return out


def own(skeleton: Skeleton) -> Skeleton:
    """A copy sharing no map with other skeletons or the caller's checkpoint (a reader, or
    a caller after ``put``, may change what it holds)."""
    out = dict(skeleton)
    out["channel_versions"] = dict(skeleton.get("channel_versions") or {})
    out["versions_seen"] = {
        k: dict(v) if isinstance(v, dict) else v
        for k, v in (skeleton.get("versions_seen") or {}).items()
    }
    return out


_ANCESTORS = (
    "WITH RECURSIVE up(id, parent, blob) AS ("
    "SELECT checkpoint_id, parent_checkpoint_id, checkpoint FROM checkpoints "
    "WHERE thread_id = :t AND checkpoint_ns = :ns AND checkpoint_id = :id "
    "UNION SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint FROM up "
    "JOIN checkpoints AS c ON c.thread_id = :t AND c.checkpoint_ns = :ns "
    "AND c.checkpoint_id = up.parent WHERE substr(up.blob, 1, 1) = x'c1') "
    "SELECT id, parent, blob FROM up"
)


def resolve(
    conn: sqlite3.Connection | None,
    thread_id: str,
    ns: str,
    rows: dict[str, Row],
    unpack: Callable[[bytes], Any],
    want: Iterable[str],
) -> dict[str, Skeleton]:
    """The skeletons of ``want`` (ids in ``rows``), each its own copy.

    Deltas are applied on their parents, taken from ``rows`` or, when a chain leaves them,
    read with ``conn`` (one recursive query per missing chain)."""
    wanted = list(want)
    if not any(rows[cid][1][:1] == MARK for cid in wanted):  # all whole (small graphs)
        return {cid: unpack(rows[cid][1]) for cid in wanted}
    done: dict[str, Skeleton] = {}
    shared: set[str] = set()
    """Decoded skeletons whose maps another one shares (copied before they are handed out)."""

    def load(checkpoint_id: str) -> None:
        chain: list[str] = []
        current: str | None = checkpoint_id
        while current not in done:
            row = rows.get(current) if current is not None else None
            if row is None and current is not None and conn is not None:
                for cid, parent, blob in conn.execute(
                    _ANCESTORS, {"t": thread_id, "ns": ns, "id": current}
                ):
                    rows.setdefault(cid, (parent, blob))
                row = rows.get(current)
            if current is None or row is None or current in chain:
                raise RuntimeFailure(
                    f"checkpoint {checkpoint_id} of thread {thread_id!r} is stored as a delta "
                    f"of checkpoint {current}, which is missing (or loops back): the file was "
                    "changed outside aworld-graph. Earlier checkpoints of the thread may still "
                    "read; TrajectorySaver.delete_thread removes it"
                )
            parent, blob = row
            if not is_delta(blob):
                done[current] = unpack(blob)
                break
            chain.append(current)
            current = parent
        base_id = current
        for cid in reversed(chain):
            done[cid] = _apply(done[base_id], unpack(rows[cid][1][1:]))  # type: ignore[index]
            shared.update((base_id, cid))  # type: ignore[arg-type]
            base_id = cid

    for checkpoint_id in wanted:
        if checkpoint_id not in done:
            load(checkpoint_id)
    return {cid: own(done[cid]) if cid in shared else done[cid] for cid in wanted}
