"""The ``trajectory`` view: one row per transition, readable without this project."""

from __future__ import annotations

import json
import operator
import sqlite3
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, TypedDict

import sqlite_utils
from langgraph.graph import END, START, StateGraph

from aworld_graph.checkpoint import TrajectorySaver


class AgentState(TypedDict):
    """The shape of aworld-graph's SwarmState lists."""

    messages: Annotated[list[dict[str, Any]], operator.add]
    trace: Annotated[list[dict[str, Any]], operator.add]
    rewards: Annotated[list[dict[str, Any]], operator.add]
    answer: str


def agent_graph(checkpointer: Any) -> Any:
    def llm(state: AgentState) -> dict[str, Any]:
        call = {"id": "c1", "name": "search", "arguments": '{"q": "x"}'}
        return {
            "messages": [{"role": "assistant", "content": None, "tool_calls": [call]}],
            "trace": [
                {
                    "node": "llm",
                    "agent": "Searcher",
                    "kind": "llm",
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                    "latency_ms": 12.5,
                    "tool_calls": [call],
                }
            ],
        }

    def tools(state: AgentState) -> dict[str, Any]:
        return {
            "messages": [{"role": "tool", "tool_call_id": "c1", "content": "y" * 50_000}],
            "trace": [
                {
                    "node": "tools",
                    "kind": "tools",
                    "tool_results": [
                        {"name": "search", "server": "web", "is_error": False},
                        {"name": "fetch", "server": "web", "is_error": True},
                    ],
                    "headers": {"Authorization": "Bearer sk-never-store-this-1234567890"},
                }
            ],
        }

    def critic(state: AgentState) -> dict[str, Any]:
        return {
            "answer": "done",
            "trace": [{"node": "critic", "kind": "critic", "usage": {"total_tokens": 5}}],
            "rewards": [
                {"step": 3, "score": 0.25, "status": "retry", "source": "critic", "feedback": ""},
                {"step": 3, "score": 0.75, "status": "pass", "source": "critic", "feedback": "ok"},
            ],
        }

    g = StateGraph(AgentState)
    for name, fn in (("llm", llm), ("tools", tools), ("critic", critic)):
        g.add_node(name, fn)
    g.add_edge(START, "llm")
    g.add_edge("llm", "tools")
    g.add_edge("tools", "critic")
    g.add_edge("critic", END)
    return g.compile(checkpointer=checkpointer)


def _run(db_path: Path) -> None:
    with TrajectorySaver(db_path) as saver:
        agent_graph(saver).invoke(
            {"messages": [{"role": "user", "content": "find x"}], "trace": [], "rewards": []},
            {"configurable": {"thread_id": "run-1"}},
        )


def test_one_row_per_transition_with_usage_tools_and_reward(db_path: Path) -> None:
    _run(db_path)
    with sqlite3.connect(db_path) as conn:
        conn.row_factory = sqlite3.Row
        rows = [
            dict(r)
            for r in conn.execute(
                "SELECT * FROM trajectory WHERE thread_id = 'run-1' ORDER BY checkpoint_id"
            )
        ]
    assert [r["step"] for r in rows] == [-1, 0, 1, 2, 3]
    assert [r["source"] for r in rows] == ["input", "loop", "loop", "loop", "loop"]
    assert [json.loads(r["nodes"]) for r in rows] == [
        [],
        ["__start__"],
        ["llm"],
        ["tools"],
        ["critic"],
    ]
    assert rows[0]["parent_checkpoint_id"] is None
    for prev, row in zip(rows, rows[1:], strict=False):
        assert row["parent_checkpoint_id"] == prev["checkpoint_id"]
        assert row["duration_ms"] >= 0
    llm, tools, critic = rows[2], rows[3], rows[4]
    assert json.loads(llm["llm_usage"]) == {
        "calls": 1,
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
    }
    assert json.loads(llm["tool_names"]) == ["search"]
    assert json.loads(tools["tool_names"]) == ["search", "fetch"]
    assert tools["llm_usage"] is None and tools["reward"] is None
    assert critic["reward"] == 0.75
    assert json.loads(critic["llm_usage"])["total_tokens"] == 5

    llm_changes = json.loads(llm["changes"])
    assert set(llm_changes) == {"messages", "trace"}  # only what changed
    assert len(llm_changes["messages"]) == 1  # only the appended item
    tool_changes = json.loads(tools["changes"])
    assert "Authorization" not in json.dumps(tool_changes)  # secrets stripped
    content = tool_changes["messages"][0]["content"]
    assert len(content) < 3_000 and "more chars" in content  # long values truncated
    assert json.loads(critic["changes"])["answer"] == "done"


def test_readable_with_sqlite_utils_and_a_bare_interpreter(db_path: Path) -> None:
    _run(db_path)
    db = sqlite_utils.Database(db_path)
    assert "trajectory" in db.view_names()
    rows = list(db.query("SELECT step, reward FROM trajectory ORDER BY checkpoint_id"))
    assert rows[-1] == {"step": 3, "reward": 0.75}
    script = (
        "import sqlite3, json, sys\n"
        "c = sqlite3.connect(sys.argv[1])\n"
        "rows = c.execute('SELECT nodes, tool_names FROM trajectory ORDER BY checkpoint_id')"
        ".fetchall()\n"
        "print(json.dumps([json.loads(n) for n, _ in rows]))\n"
        "print('aworld_graph' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", script, str(db_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert json.loads(out[0])[2] == ["llm"] and out[1] == "False"


def _checkpoint(n: int) -> Any:
    """A checkpoint whose channel ``n`` holds ``n`` (a new id, after every one made before)."""
    from langgraph.checkpoint.base import empty_checkpoint

    c = empty_checkpoint()
    c["channel_values"] = {"n": n}
    c["channel_versions"] = {"n": f"{n:012d}.00000000"}
    return c


def test_nodes_come_from_writes_saved_before_or_after_the_next_checkpoint(target: str) -> None:
    """LangGraph may save a step's writes after the checkpoint that follows them (both from
    background threads): the transition still names every node that ran, once each."""
    checkpoint = _checkpoint
    saver = TrajectorySaver(target)
    root: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    first = saver.put(root, checkpoint(1), {"step": 0}, {"n": f"{1:012d}.00000000"})
    saver.put_writes(first, [("n", 2)], "task-a", "~__pregel_pull, before")
    second = saver.put(first, checkpoint(2), {"step": 1}, {"n": f"{2:012d}.00000000"})
    saver.put_writes(first, [("n", 2)], "task-b", "~__pregel_pull, after")
    saver.put_writes(first, [("n", 2)], "task-c", "~__pregel_pull, after")
    saver.put_writes(second, [("n", 3)], "task-d", "~__pregel_pull, later")
    rows = {r.checkpoint_id: r for r in saver.transitions("t")}
    assert rows[second["configurable"]["checkpoint_id"]].nodes == ["before", "after"]
    saver.close()
    fresh = TrajectorySaver(target)  # a process that did not write them reads the same
    assert fresh.transitions("t")[-1].nodes == ["before", "after"]
    fresh.close()


def test_a_step_keeps_its_node_when_its_writes_and_checkpoint_commit_at_once(
    postgres_server: Any,
) -> None:
    """On PostgreSQL a step's writes and the checkpoint that ends the step are separate
    transactions that may run at once (LangGraph saves both from background threads). Here
    both are held at their first insert (a test connection holds the tables' SHARE lock)
    until both have been sent: the step's row still names its node."""
    import psycopg

    url = postgres_server.create_database(f"racing_{uuid.uuid4().hex[:8]}")
    with TrajectorySaver(url) as saver:
        root: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        first = saver.put(root, _checkpoint(1), {"source": "input", "step": -1}, {})
        child = _checkpoint(2)
        with psycopg.connect(url) as blocker, ThreadPoolExecutor(2) as pool:
            blocker.execute("LOCK TABLE checkpoints, checkpoint_writes IN SHARE MODE")
            put = pool.submit(
                saver.put, first, child, {"source": "loop", "step": 0}, child["channel_versions"]
            )
            writes = pool.submit(saver.put_writes, first, [("n", 2)], "task", "~__pregel_pull, inc")
            waiting = _wait_for_lock_waiters(url, 2)
            blocker.rollback()
            put.result(timeout=60)
            writes.result(timeout=60)
        assert waiting == 2
        rows = {r.checkpoint_id: r for r in saver.transitions("t")}
        assert rows[child["id"]].nodes == ["inc"]


def _wait_for_lock_waiters(url: str, count: int) -> int:
    """Wait (up to a minute) until ``count`` sessions of ``url``'s database wait for a lock;
    the number waiting at the end."""
    import psycopg

    sql = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock'"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(6000):
            row = conn.execute(sql).fetchone()
            if row is not None and row[0] >= count:
                return int(row[0])
            time.sleep(0.01)
        row = conn.execute(sql).fetchone()
    return 0 if row is None else int(row[0])


def test_every_run_of_the_docs_example_names_its_node(target: str) -> None:
    """The docs' first example, run 15 times (each run a thread of its own) with LangGraph
    saving in the background and at each step: every step that ran names ``inc``."""
    builder = StateGraph(IncState)
    builder.add_node("inc", lambda s: {"n": s["n"] + 1})
    builder.add_edge(START, "inc")
    builder.add_edge("inc", END)
    with TrajectorySaver(target) as saver:
        graph = builder.compile(checkpointer=saver)
        for i in range(15):
            durability = "sync" if i % 2 else "async"
            graph.invoke({"n": 1}, {"configurable": {"thread_id": f"t{i}"}}, durability=durability)
        steps = [[r.nodes for r in saver.transitions(f"t{i}") if r.step == 1] for i in range(15)]
    assert steps == [[["inc"]]] * 15


class IncState(TypedDict):
    n: int
