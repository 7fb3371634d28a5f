"""``aworld-graph threads | history | prune | vacuum`` on a real database file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from langgraph.graph import END, START, StateGraph

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.cli import main

from .conftest import ChatState, ask, chat_graph


@pytest.fixture
def filled(db_path: Path) -> Path:
    with TrajectorySaver(db_path) as saver:
        app = chat_graph(saver)
        for turn in range(3):
            ask(app, "chat", f"q{turn}")
        ask(app, "other", "hello")
        config = {"configurable": {"thread_id": "chat"}}
        history = list(app.get_state_history(config))
        forked = app.update_state(
            history[4].config, {"messages": [{"role": "user", "content": "!"}]}
        )
        app.invoke(None, forked)
    return db_path


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_threads(filled: Path) -> None:
    code, out = _cli("threads", "--db", str(filled))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["THREAD", "CHECKPOINTS", "STEP", "STATUS", "LAST", "ACTIVITY"]
    assert lines[1].split()[:3] == ["chat", "11", "5"] and lines[2].split()[:2] == ["other", "3"]


def test_history_shows_the_fork_as_a_branch(filled: Path) -> None:
    code, out = _cli("history", "chat", "--db", str(filled))
    assert code == 0, out
    lines = out.splitlines()
    assert len([line for line in lines if "●" in line]) == 11
    fork = lines.index("├─╮ fork")
    assert lines[fork - 1].startswith("● ") and "step   3" in lines[fork - 1]
    assert lines[fork + 1].startswith("│ ● ") and "update" in lines[fork + 1]
    assert "[reply]" in out and "[__start__]" in out


def test_history_draws_a_failed_step_retried_from_its_parent_as_the_main_line(
    db_path: Path,
) -> None:
    """A step that fails leaves a row with no checkpoint (its error, on the checkpoint it
    started from); run again from there, its retry is the main line, not a fork, and the
    line goes on to the retry's checkpoint."""
    failures = ["once"]

    def reply(state: ChatState) -> dict[str, Any]:
        if failures:
            raise ValueError(f"fails {failures.pop()}")
        return {"messages": [{"role": "assistant", "content": "done"}], "turn": 1}

    graph = StateGraph(ChatState)
    graph.add_node("reply", reply)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    config: Any = {"configurable": {"thread_id": "retried"}}
    with TrajectorySaver(db_path) as saver:
        app = graph.compile(checkpointer=saver)
        with pytest.raises(ValueError, match="fails once"):
            app.invoke({"messages": [{"role": "user", "content": "q"}], "turn": 0}, config)
        app.invoke(None, config)  # the retry, from the checkpoint the failed step started at
        rows = saver.transitions("retried")
        checkpoints = len(list(saver.list(config)))
    assert [r.source for r in rows if r.checkpoint_id is None] == ["error"]
    code, out = _cli("history", "retried", "--db", str(db_path))
    assert code == 0, out
    lines = out.splitlines()
    assert "fork" not in out and "" not in lines
    assert len(lines) == checkpoints and all(line.startswith("● ") for line in lines)
    assert "[reply]" in lines[-1]


def test_prune_and_vacuum(filled: Path) -> None:
    code, out = _cli("prune", "chat", "--keep", "2", "--db", str(filled))
    assert (code, out.strip()) == (0, "deleted 9 checkpoints (thread chat)")
    code, out = _cli("prune", "--older-than", "30", "--db", str(filled))
    assert (code, out.strip()) == (0, "deleted 0 checkpoints (all threads)")
    code, out = _cli("prune", "--older-than", "0", "--include-latest", "--db", str(filled))
    assert (code, out.strip()) == (0, "deleted 5 checkpoints (all threads)")
    code, out = _cli("vacuum", "--db", str(filled))
    assert code == 0 and "MB ->" in out
    code, out = _cli("threads", "--db", str(filled))
    assert (code, out.strip()) == (0, "no threads")


def test_errors_are_one_line(tmp_path: Path, filled: Path) -> None:
    code, out = _cli("threads", "--db", str(tmp_path / "missing.db"))
    assert code == 1 and out.startswith("Error: no checkpoint database at")
    code, out = _cli("history", "nope", "--db", str(filled))
    assert code == 1 and "no checkpoints for thread 'nope'" in out
    code, out = _cli("prune", "--db", str(filled))
    assert code == 2 and "exactly one of --keep N or --older-than DAYS" in out
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not sqlite" * 500)
    code, out = _cli("threads", "--db", str(garbage))
    assert code == 1 and "Traceback" not in out and str(garbage) in out


def test_default_database_and_help(filled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWORLD_GRAPH_DB", str(filled))
    code, out = _cli("threads")
    assert code == 0 and "chat" in out
    for command in ("threads", "history", "prune", "vacuum"):
        code, out = _cli(command, "--help")
        assert code == 0 and "--db" in out
