"""``list()`` hands out ids at once and decodes each page of tuples on first use."""

from __future__ import annotations

import asyncio
import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import ormsgpack
import pytest
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from aworld_graph.checkpoint import HistoryTuple, TrajectorySaver
from aworld_graph.checkpoint._read import LazyPage
from aworld_graph.errors import RuntimeFailure


class S(TypedDict):
    n: int
    log: list[str]


def _graph(saver: Any, steps: int) -> Any:
    def step(s: S) -> dict[str, Any]:
        return {"n": s["n"] + 1, "log": [*s["log"], f"step {s['n']}"]}

    g = StateGraph(S)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["n"] >= steps else "step")
    return g.compile(checkpointer=saver)


@pytest.fixture
def saver(tmp_path: Path) -> Any:
    with TrajectorySaver(tmp_path / "h.db") as saver:
        cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": 1000}
        _graph(saver, 450).invoke({"n": 0, "log": []}, cfg)
        yield saver


THREAD = {"configurable": {"thread_id": "t"}}


def _count_loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    loads: list[int] = []
    original = LazyPage.load

    def load(self: LazyPage) -> Any:
        loads.append(id(self))
        return original(self)

    monkeypatch.setattr(LazyPage, "load", load)
    return loads


def test_walking_ids_fetches_nothing_and_one_read_fetches_one_page(
    saver: TrajectorySaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = _count_loads(monkeypatch)
    tuples = list(saver.list(THREAD))
    assert len(tuples) == 452
    ids = [t.config["configurable"]["checkpoint_id"] for t in tuples]
    assert ids == sorted(ids, reverse=True)
    parents = [t.parent_config["configurable"]["checkpoint_id"] for t in tuples[:-1]]
    assert parents == ids[1:]
    assert tuples[-1].parent_config is None
    assert loads == []
    assert tuples[300].checkpoint["channel_values"]["n"] == 450 - 300
    assert tuples[301].metadata["step"] == tuples[300].metadata["step"] - 1
    assert len(set(loads)) == 1  # both in the second page, loaded once


def test_listed_tuples_equal_get_tuple_and_are_plain_once_read(saver: TrajectorySaver) -> None:
    listed = list(saver.list(THREAD))
    for t in (listed[0], listed[1], listed[250], listed[-1]):
        assert isinstance(t, HistoryTuple) and isinstance(t, CheckpointTuple)
        direct = saver.get_tuple(t.config)
        assert direct is not None and type(direct) is CheckpointTuple
        assert t.checkpoint == direct.checkpoint
        assert t.metadata == direct.metadata
        assert t.pending_writes == direct.pending_writes
        assert t == direct and direct == t
    latest = listed[0]
    values = latest.checkpoint["channel_values"]
    assert type(values) is dict and values["n"] == 450 and len(values["log"]) == 450
    # C-level serializers read a dict's storage directly: what a field read returns is filled
    assert orjson.loads(orjson.dumps(latest.checkpoint))["channel_values"]["n"] == 450
    packed = ormsgpack.unpackb(ormsgpack.packb(list(saver.list(THREAD))[5].checkpoint))
    assert packed["channel_values"]["n"] == 445
    assert orjson.loads(orjson.dumps(list(saver.list(THREAD))[3].metadata))["step"] == 447
    writes = list(saver.list(THREAD))[2].pending_writes
    assert ormsgpack.unpackb(ormsgpack.packb(writes)) and json.dumps(writes)


def test_positional_access_unpacking_and_tuple_protocols_give_decoded_values(
    saver: TrajectorySaver,
) -> None:
    first = next(iter(saver.list(THREAD)))
    # json iterates the tuple (decoded values); C serializers of tuples refuse it loudly
    assert json.loads(json.dumps(first))[1]["channel_values"]["n"] == 450
    with pytest.raises(TypeError):
        orjson.dumps(tuple.__getitem__(next(iter(saver.list(THREAD))), 1))
    config, checkpoint, metadata, parent, writes = first
    assert type(checkpoint) is dict and checkpoint["id"] == config["configurable"]["checkpoint_id"]
    assert checkpoint["channel_values"]["n"] == 450 and first[1] is checkpoint
    assert json.loads(json.dumps(first[2]))["step"] == 450 and first[-3] is metadata
    assert writes == [] and parent is not None and first[3:] == (parent, writes)
    assert first._asdict()["metadata"] == metadata and metadata in first
    replaced = first._replace(metadata={})
    assert replaced.metadata == {} and replaced.checkpoint["channel_values"]["n"] == 450
    assert copy.deepcopy(first) == first and "not decoded" not in repr(first)
    fresh = list(saver.list(THREAD, limit=2))
    assert "<not decoded yet>" in repr(tuple.__getitem__(fresh[1], 1))
    assert fresh[1] == saver.get_tuple(fresh[1].config) and fresh[0] != fresh[1]
    assert tuple(fresh[0]) + () == tuple(fresh[0]) and fresh[0].count(None) == 0


def test_copying_history_into_other_savers_keeps_every_value(
    saver: TrajectorySaver, tmp_path: Path
) -> None:
    conn = sqlite3.connect(tmp_path / "peer.db", check_same_thread=False)
    targets = [SqliteSaver(conn), InMemorySaver()]
    for target in targets:
        for t in reversed(list(saver.list(THREAD))):
            cfg = {"configurable": {**t.config["configurable"]}}
            if t.parent_config:
                cfg["configurable"]["checkpoint_id"] = t.parent_config["configurable"][
                    "checkpoint_id"
                ]
            else:
                cfg["configurable"].pop("checkpoint_id")
            target.put(cfg, t.checkpoint, t.metadata, t.checkpoint["channel_versions"])
        copied = target.get_tuple(THREAD)
        assert copied is not None
        assert copied.checkpoint["channel_values"]["n"] == 450
        assert len(copied.checkpoint["channel_values"]["log"]) == 450
    conn.close()


def test_a_checkpoint_deleted_after_listing_is_a_clear_error(saver: TrajectorySaver) -> None:
    listed = list(saver.list(THREAD))
    assert listed[0].metadata["step"] == 450  # the first page is loaded
    saver.delete_thread("t")
    assert listed[1].checkpoint["channel_values"]["n"] == 449  # already loaded: still there
    with pytest.raises(RuntimeFailure, match=r"was deleted .* list the thread again"):
        _ = listed[-1].checkpoint
    assert list(saver.list(THREAD)) == []


def test_alist_decodes_in_a_worker_and_matches_list(saver: TrajectorySaver) -> None:
    async def collect() -> list[CheckpointTuple]:
        return [t async for t in saver.alist(THREAD, limit=230)]

    listed = asyncio.run(collect())
    assert len(listed) == 230
    pages = {tuple.__getitem__(t, 1).page for t in listed}
    assert len(pages) == 2 and all(page._tuples is not None for page in pages)
    assert [t.checkpoint for t in listed] == [t.checkpoint for t in saver.list(THREAD, limit=230)]


def test_the_checkpoints_guide_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "checkpoints.md"
    block = guide.read_text().split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(guide), "exec"), {"__name__": "guide_example"})
    assert capsys.readouterr().out.strip() == "3 {'n': 2}"
    assert (tmp_path / "checkpoints" / "docs-example.db").exists()


def test_concurrent_aget_tuple_calls_share_one_lookup_and_match_get_tuple(
    saver: TrajectorySaver,
) -> None:
    """The reader thread answers every lookup queued meanwhile with one query: latest,
    by id, absent threads, and the same key twice (each caller gets its own copy)."""
    listed = list(saver.list(THREAD, limit=5))
    by_id = [t.config for t in listed]
    configs: list[Any] = [THREAD, THREAD, {"configurable": {"thread_id": "absent"}}, *by_id]

    async def ask() -> list[Any]:
        return await asyncio.gather(*(saver.aget_tuple(c) for c in configs))

    answers = asyncio.run(ask())
    assert answers[2] is None
    assert answers[0] is not answers[1] and answers[0] == answers[1]
    answers[0].checkpoint["channel_values"]["n"] = -1
    assert answers[1].checkpoint["channel_values"]["n"] == 450
    for config, answer in zip(configs[3:], answers[3:], strict=True):
        assert answer == saver.get_tuple(config)
    assert answers[1] == saver.get_tuple(THREAD)
    reader = saver._store._reader
    assert reader is not None and reader.is_alive()
    saver.close()
    assert not reader.is_alive()
