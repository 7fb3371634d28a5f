"""Details the conformance suite does not check: write semantics, metadata, copies, types."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import sqlite3
import threading
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT, RESUME, SCHEDULED

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.errors import ConfigError, DefinitionError

from .conftest import ask, chat_graph


def _root(saver: TrajectorySaver, thread_id: str = "t") -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})


@pytest.mark.parametrize("special", [ERROR, INTERRUPT, RESUME, SCHEDULED])
def test_special_channels_overwrite_regular_ones_do_not(
    saver: TrajectorySaver, special: str
) -> None:
    stored = _root(saver)
    saver.put_writes(stored, [("ch", "first"), (special, "first")], "task-1")
    saver.put_writes(stored, [("ch", "second"), (special, "second")], "task-1")
    tup = saver.get_tuple(stored)
    assert tup is not None
    got = {(task, ch): value for task, ch, value in tup.pending_writes or []}
    assert got == {("task-1", "ch"): "first", ("task-1", special): "second"}


def test_pending_writes_are_ordered_by_task_path_then_task_then_index(
    saver: TrajectorySaver,
) -> None:
    stored = _root(saver)
    saver.put_writes(stored, [("x", 1), ("y", 2)], "task-z", task_path="~__pregel_pull, c")
    saver.put_writes(stored, [("x", 3)], "task-b", task_path="~__pregel_pull, a")
    saver.put_writes(stored, [("x", 4)], "task-a", task_path="~__pregel_pull, b")
    saver.put_writes(stored, [("x", 5)], "task-input")  # no path: sorts first
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert [(t, c, v) for t, c, v in tup.pending_writes or []] == [
        ("task-input", "x", 5),
        ("task-b", "x", 3),
        ("task-a", "x", 4),
        ("task-z", "x", 1),
        ("task-z", "y", 2),
    ]
    listed = next(saver.list({"configurable": {"thread_id": "t"}}))
    assert listed.pending_writes == tup.pending_writes


def test_metadata_is_copied_from_config_like_langgraph(saver: TrajectorySaver) -> None:
    config = {
        "metadata": {"user": "bob", "attempt": 2, "nested": {"ignored": True}},
        "configurable": {
            "thread_id": "t",
            "checkpoint_ns": "",
            "run_name": "nightly\x00",
            "temperature": 0.5,
            "__pregel_secret_internal": "x",
            "callable": print,
        },
    }
    metadata = {"source": "loop", "step": 1, "parents": {}, "writes": {"node": 1}}
    stored = saver.put(config, empty_checkpoint(), metadata, {})  # type: ignore[arg-type]
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.metadata == {
        "source": "loop",
        "step": 1,
        "parents": {},
        "user": "bob",
        "attempt": 2,
        "run_name": "nightly",
        "temperature": 0.5,
    }


@dataclasses.dataclass
class Point:
    x: int
    y: int


@dataclasses.dataclass
class Unlisted:
    value: int


def test_copy_copy_and_with_allowlist_share_the_database(saver: TrajectorySaver) -> None:
    clone = copy.copy(saver)
    stored = _root(clone, "copied")
    assert saver.get_tuple(stored) is not None

    # a module-level dataclass needs no listing; a standard-library class does
    allowing = saver.with_allowlist([HTTPStatus])
    assert allowing is not saver and isinstance(allowing, TrajectorySaver)
    cp = empty_checkpoint()
    cp["channel_values"] = {"p": Point(1, 2), "s": HTTPStatus.OK}
    cp["channel_versions"] = {"p": allowing.get_next_version(None, None)}
    cp["channel_versions"]["s"] = cp["channel_versions"]["p"]
    config = {"configurable": {"thread_id": "points", "checkpoint_ns": ""}}
    stored = allowing.put(config, cp, {"source": "loop", "step": 0}, cp["channel_versions"])
    tup = allowing.get_tuple(stored)
    assert tup is not None and tup.checkpoint["channel_values"] == {"p": Point(1, 2), "s": 200}
    assert tup.checkpoint["channel_values"]["s"] is HTTPStatus.OK
    with pytest.raises(DefinitionError, match="HTTPStatus"):
        saver.put(config, cp, {"source": "loop", "step": 0}, cp["channel_versions"])


def test_unknown_types_fail_loudly_when_written(db_path: Path) -> None:
    class Opaque:
        pass

    @dataclasses.dataclass
    class Local:
        value: int

    saver = TrajectorySaver(db_path)
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for bad, named in ((Opaque(), "Opaque"), ([{"deep": HTTPStatus.OK}], "HTTPStatus")):
        cp = empty_checkpoint()
        cp["channel_values"] = {"v": bad}
        cp["channel_versions"] = {"v": "1"}
        with pytest.raises(DefinitionError, match=named):
            saver.put(config, cp, {"source": "loop", "step": 0}, {"v": "1"})
        with pytest.raises(DefinitionError):
            saver.put_writes(
                {"configurable": {**config["configurable"], "checkpoint_id": "x"}},
                [("v", bad)],
                "task",
            )
    assert saver.get_tuple(config) is None  # nothing half-written
    local = empty_checkpoint()
    local["channel_values"] = {"v": Local(2)}
    with pytest.raises(DefinitionError, match="module level"):
        TrajectorySaver(db_path, allowed_types=[Local]).put(
            config, local, {"source": "loop", "step": 0}, {"v": "1"}
        )
    assert TrajectorySaver(db_path).put(  # a module-level dataclass needs no listing
        config,
        {**empty_checkpoint(), "channel_values": {"v": Unlisted(3)}},
        {"source": "loop", "step": 0},
        {"v": "1"},
    )
    saver.close()


def test_no_pickle_is_ever_used(saver: TrajectorySaver) -> None:
    app = chat_graph(saver)
    ask(app, "t", "hello")
    with sqlite3.connect(saver.path) as conn:
        types = {r[0] for r in conn.execute("SELECT type FROM checkpoint_blobs")}
        types |= {r[0] for r in conn.execute("SELECT type FROM checkpoint_writes")}
    assert "pickle" not in types
    assert saver.serde.pickle_fallback is False  # type: ignore[attr-defined]


def test_next_version_increases_and_differs_across_forks(saver: TrajectorySaver) -> None:
    v1 = saver.get_next_version(None, None)
    v2 = saver.get_next_version(v1, None)
    assert v1 < v2 and int(v2.split(".")[0]) == 2
    assert saver.get_next_version(7, None).startswith("000000000008.")
    forks = {saver.get_next_version(v2, None) for _ in range(50)}
    assert len(forks) == 50 and all(f > v2 for f in forks)


def test_bad_arguments_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="durability"):
        TrajectorySaver(tmp_path / "x.db", durability="fast")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="memory"):
        TrajectorySaver(":memory:")
    with pytest.raises(ConfigError, match="strategy"):
        TrajectorySaver(tmp_path / "x.db").prune(["t"], strategy="oldest")


async def test_async_writes_do_not_block_the_event_loop(db_path: Path) -> None:
    saver = TrajectorySaver(db_path)
    stored = await saver.aput(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
        empty_checkpoint(),
        {"source": "input", "step": -1},
        {},
    )
    # another connection holds the write lock: the saver must wait without blocking the loop
    blocker = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    pending = asyncio.create_task(saver.aput_writes(stored, [("ch", 1)], "task"))
    ticks = 0
    for _ in range(20):
        await asyncio.sleep(0)
        ticks += 1
    assert ticks == 20 and not pending.done()
    threading.Thread(target=lambda: (blocker.execute("COMMIT"), blocker.close())).start()
    await pending
    tup = await saver.aget_tuple(stored)
    assert tup is not None and tup.pending_writes == [("task", "ch", 1)]
    await saver.__aexit__(None, None, None)


@pytest.mark.parametrize(("durability", "synchronous"), [("normal", 1), ("full", 2)])
def test_durability_modes_and_every_write_is_committed_when_it_returns(
    tmp_path: Path, durability: str, synchronous: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``normal``: WAL with ``synchronous=NORMAL``; ``full``: ``synchronous=FULL`` (SQLite
    flushes the log inside each commit). In both, a returned put/put_writes is visible to
    another connection at once: nothing is queued for later."""
    opened: list[sqlite3.Connection] = []  # the connections the saver opens
    real = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(real(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(sqlite3, "connect", connect)
    with TrajectorySaver(tmp_path / "pragmas.db", durability=durability) as probe:  # type: ignore[arg-type]
        probe.threads()
        assert opened
        for conn in opened:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            assert conn.execute("PRAGMA synchronous").fetchone() == (synchronous,)
            assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 10_000
    monkeypatch.undo()
    saver = TrajectorySaver(tmp_path / f"{durability}.db", durability=durability)  # type: ignore[arg-type]
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}

    async def both() -> None:
        nonlocal config
        for i in range(3):
            config = saver.put(config, empty_checkpoint(), {"step": i}, {})
            saver.put_writes(config, [("ch", i)], f"sync-{i}")
            with sqlite3.connect(tmp_path / f"{durability}.db") as other:
                assert other.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 2 * i + 1
                assert (
                    other.execute("SELECT count(*) FROM checkpoint_writes").fetchone()[0]
                    == 2 * i + 1
                )
            config = await saver.aput(config, empty_checkpoint(), {"step": 10 + i}, {})
            await saver.aput_writes(config, [("ch", i)], f"async-{i}")
            with sqlite3.connect(tmp_path / f"{durability}.db") as other:
                assert other.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 2 * i + 2

    asyncio.run(both())
    saver.close()


def test_a_file_with_the_first_blob_key_order_reads_and_writes_the_same(tmp_path: Path) -> None:
    """Files created before ``checkpoint_blobs`` was keyed version-first (schema 1) keep their
    key order (every query names its columns, so either order answers the same)."""
    path = tmp_path / "old.db"
    with TrajectorySaver(path) as saver:
        app = chat_graph(saver)
        ask(app, "t", "one")
    with sqlite3.connect(path) as conn:
        sql = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'checkpoint_blobs'"
        ).fetchone()[0]
        old = sql.replace("version, channel)", "channel, version)")
        assert old != sql  # version-first today
        conn.execute("ALTER TABLE checkpoint_blobs RENAME TO blobs_now")
        conn.execute(old)
        conn.execute("INSERT INTO checkpoint_blobs SELECT * FROM blobs_now")
        conn.execute("DROP TABLE blobs_now")
        conn.execute("UPDATE aworld_meta SET value = '1' WHERE key = 'schema_version'")
    with TrajectorySaver(path) as saver:
        app = chat_graph(saver)
        final = ask(app, "t", "two")
        history = list(saver.list({"configurable": {"thread_id": "t"}}))
        assert [m["content"] for m in final["messages"]][::2] == ["one", "two"]
        assert history[0].checkpoint["channel_values"]["messages"] == final["messages"]
        assert len(history) == 6
    with sqlite3.connect(path) as conn:  # migrated: older versions refuse it clearly
        meta = dict(conn.execute("SELECT key, value FROM aworld_meta").fetchall())
        assert meta["schema_version"] == "4"
