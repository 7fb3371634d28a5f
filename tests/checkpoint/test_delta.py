"""Lists that grow by appending are stored as deltas, and every version reads back whole."""

from __future__ import annotations

import operator
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from aworld_graph.checkpoint import TrajectorySaver

from .conftest import ask, chat_graph


class LcState(TypedDict):
    messages: Annotated[list[Any], add_messages]


def lc_graph(checkpointer: Any) -> Any:
    """add_messages with LangChain messages; every fifth turn edits or drops old ones."""

    def reply(state: LcState) -> dict[str, Any]:
        n = len(state["messages"])
        out: list[Any] = [AIMessage(content=f"answer {n}", id=f"ai-{n}")]
        if n % 5 == 0 and n > 2:  # not an append: rewrite the first message in place
            first = state["messages"][0]
            out.append(HumanMessage(content=f"edited at {n}", id=first.id))
        if n % 7 == 0 and n > 3:  # not an append either: remove one
            out.append(RemoveMessage(id=state["messages"][1].id))
        return {"messages": out}

    g = StateGraph(LcState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=checkpointer)


def _history(saver: Any, thread_id: str) -> list[tuple[Any, ...]]:
    out = []
    for tup in saver.list({"configurable": {"thread_id": thread_id}}):
        out.append(
            (
                tup.metadata.get("step"),
                tup.metadata.get("source"),
                tup.checkpoint["channel_values"],
                [(c, v) for _, c, v in tup.pending_writes or []],
            )
        )
    return out


def _blob_kinds(path: Path) -> dict[str, Any]:
    with sqlite3.connect(path) as conn:
        return {
            "delta": conn.execute(
                "SELECT count(*) FROM checkpoint_blobs WHERE kind = 2"
            ).fetchone()[0],
            "max_depth": conn.execute("SELECT max(depth) FROM checkpoint_blobs").fetchone()[0],
        }


def test_every_version_of_an_appended_dict_list_reads_back(db_path: Path) -> None:
    ours = TrajectorySaver(db_path, snapshot_every=4)
    reference = InMemorySaver()
    for saver in (ours, reference):
        app = chat_graph(saver)
        for turn in range(25):
            ask(app, "chat", f"question {turn}")
    assert _history(ours, "chat") == _history(reference, "chat")
    kinds = _blob_kinds(db_path)
    assert kinds["delta"] > 20 and kinds["max_depth"] == 3
    for tup in ours.list({"configurable": {"thread_id": "chat"}}):  # each alone, too
        alone = ours.get_tuple(tup.config)
        assert alone is not None and alone.checkpoint == tup.checkpoint


def test_langchain_messages_with_edits_and_removals(db_path: Path) -> None:
    ours = TrajectorySaver(db_path, snapshot_every=3)
    reference = InMemorySaver()
    for saver in (ours, reference):
        app = lc_graph(saver)
        for turn in range(20):
            app.invoke(
                {"messages": [HumanMessage(content=f"q{turn}", id=f"h-{turn}")]},
                {"configurable": {"thread_id": "lc"}},
            )
    assert _history(ours, "lc") == _history(reference, "lc")
    assert _blob_kinds(db_path)["delta"] > 10


def test_forks_read_back_on_both_branches(db_path: Path) -> None:
    ours = TrajectorySaver(db_path, snapshot_every=4)
    reference = InMemorySaver()
    branches: dict[str, list[list[str]]] = {}
    for name, saver in (("ours", ours), ("ref", reference)):
        app = chat_graph(saver)
        config = {"configurable": {"thread_id": "fork"}}
        for turn in range(6):
            ask(app, "fork", f"q{turn}")
        history = list(app.get_state_history(config))
        middle = history[len(history) // 2].config
        forked = app.update_state(middle, {"messages": [{"role": "user", "content": "fork!"}]})
        app.invoke(None, forked)
        ask(app, "fork", "after fork")
        branches[name] = [
            [m["content"] for m in s.values.get("messages", [])]
            for s in app.get_state_history(config)
        ]
        assert "fork!" in branches[name][0] and "q5" not in branches[name][0]
        old_branch = app.get_state(history[0].config).values["messages"]
        assert old_branch[-2]["content"] == "q5"
    assert branches["ours"] == branches["ref"]


def test_copies_and_pruning_keep_chains_readable(db_path: Path) -> None:
    saver = TrajectorySaver(db_path, snapshot_every=5)
    app = chat_graph(saver)
    for turn in range(12):
        ask(app, "a", f"q{turn}")
    latest = saver.get_tuple({"configurable": {"thread_id": "a"}})
    assert latest is not None
    saver.copy_thread("a", "b")
    assert _history(saver, "b") == _history(saver, "a")

    saver.prune(["a"], strategy="keep_latest")
    kept = saver.get_tuple({"configurable": {"thread_id": "a"}})
    assert kept is not None and kept.checkpoint == latest.checkpoint
    assert len(list(saver.list({"configurable": {"thread_id": "a"}}))) == 1
    with sqlite3.connect(db_path) as conn:
        rows = dict(
            conn.execute("SELECT thread_id, count(*) FROM checkpoint_blobs GROUP BY thread_id")
        )
    assert rows["a"] < rows["b"]  # blobs no checkpoint needs are gone

    assert saver.prune_keep_last(4, ["b"]) == 36 - 4
    remaining = list(saver.list({"configurable": {"thread_id": "b"}}))
    assert len(remaining) == 4
    assert remaining[0].checkpoint == latest.checkpoint
    ask(app, "a", "after prune")  # the pruned thread goes on
    again = saver.get_tuple({"configurable": {"thread_id": "a"}})
    assert again is not None and len(again.checkpoint["channel_values"]["messages"]) == 26


def test_delete_for_runs_keeps_later_runs_readable(db_path: Path) -> None:
    saver = TrajectorySaver(db_path, snapshot_every=3)
    app = chat_graph(saver)
    for run in range(4):
        app.invoke(
            {"messages": [{"role": "user", "content": f"q{run}"}], "turn": 0},
            {"configurable": {"thread_id": "r"}, "metadata": {"run_id": f"run-{run}"}},
        )
    before = _history(saver, "r")
    saver.delete_for_runs(["run-1", "run-2"])
    after = _history(saver, "r")
    assert len(after) == len(before) - 6
    assert after[0] == before[0] and after[-3:] == before[-3:]


@pytest.mark.parametrize("every", [1, 2, 64])
def test_snapshot_frequency_bounds_the_chain(db_path: Path, every: int) -> None:
    saver = TrajectorySaver(db_path, snapshot_every=every)
    app = chat_graph(saver)
    for turn in range(10):
        ask(app, "s", f"q{turn}")
    assert _blob_kinds(db_path)["max_depth"] == min(every - 1, 19)
    last = saver.get_tuple({"configurable": {"thread_id": "s"}})
    assert last is not None and len(last.checkpoint["channel_values"]["messages"]) == 20


def test_storage_grows_linearly(tmp_path: Path) -> None:
    sizes = []
    for turns in (40, 80):
        path = tmp_path / f"{turns}.db"
        saver = TrajectorySaver(path)
        app = chat_graph(saver)
        for turn in range(turns):
            ask(app, "long", "a fairly long question " * 20 + str(turn))
        with sqlite3.connect(path) as conn:
            sizes.append(
                conn.execute("SELECT sum(length(value)) FROM checkpoint_blobs").fetchone()[0]
            )
    assert sizes[1] < 2.6 * sizes[0]  # whole copies per step would make it ~4x


class Items(TypedDict):
    items: Annotated[list[str], operator.add]


def test_a_list_whose_stored_base_was_deleted_mid_run_is_stored_whole(tmp_path: Path) -> None:
    """Another saver deletes the thread while a run appends to a list: this saver's cached
    base version is gone, so the next value is stored whole, not as a delta of it."""
    path = tmp_path / "items.db"
    saver = TrajectorySaver(path)

    def node(i: int) -> Any:
        def run(s: Items) -> dict[str, list[str]]:
            if i == 5:
                with TrajectorySaver(path) as admin:
                    admin.delete_thread("t")
            return {"items": [f"item {i}"]}

        return run

    g = StateGraph(Items)
    for i in range(10):
        g.add_node(f"n{i}", node(i))
        g.add_edge(START if i == 0 else f"n{i - 1}", f"n{i}")
    g.add_edge("n9", END)
    cfg: Any = {"configurable": {"thread_id": "t"}}
    g.compile(checkpointer=saver).invoke({"items": []}, cfg, durability="sync")
    with TrajectorySaver(path) as fresh:
        history = [h.checkpoint["channel_values"]["items"] for h in fresh.list(cfg)]
    assert history[0] == [f"item {i}" for i in range(10)]
    assert 0 < len(history) < 12  # what was stored after the deletion, all readable
    saver.close()
