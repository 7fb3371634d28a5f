"""The run options of tests/server/test_run_options.py whose meaning the two servers share,
side by side with LangGraph's own server (``langgraph dev``) on the LangGraph project of
:mod:`tests.server.langgraph_dev`, with the real client: ``durability`` and
``checkpoint_during`` (which of a LangGraph application's steps are saved),
``langsmith_tracing`` without LangSmith (the run goes as without it), and
``runs.list(select=…)``."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from tests.server.test_vs_langgraph_dev import Side, both, said, status_of, user

pytestmark = pytest.mark.slow

OPTIONS: list[dict[str, Any]] = [
    {},
    {"durability": "sync"},
    {"durability": "async"},
    {"durability": "exit"},
    {"checkpoint_during": False},
    {"checkpoint_during": True},
    {"langsmith_tracing": {"project_name": "mine"}},
]


async def _saved(client: Any) -> list[Any]:
    """Per option of :data:`OPTIONS`, the checkpoints a run of ``chat`` on a new thread saved
    (step, source, what was said) and its answer."""
    out = []
    for options in OPTIONS:
        tid = (await client.threads.create())["thread_id"]
        with warnings.catch_warnings():  # the SDK warns that checkpoint_during is deprecated
            warnings.simplefilter("ignore", DeprecationWarning)
            values = await client.runs.wait(tid, "chat", input=user("hi"), **options)
        history = await client.threads.get_history(tid, limit=50)
        steps = [
            (h["metadata"]["step"], h["metadata"]["source"], said(h["values"])) for h in history
        ]
        out.append({"options": options, "steps": steps, "answer": said(values)})
    return out


async def test_durability_saves_the_same_steps(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _saved)
    by_option = {str(o["options"]): len(o["steps"]) for o in peer}
    assert by_option[str({"durability": "exit"})] < by_option[str({})]  # the options were read
    assert ours == peer


async def _selected(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "chat", input=user("hi"))
    return {
        "picked": await client.runs.list(tid, select=["run_id", "status", "thread_id"]),
        "unknown": await status_of(client.runs.list(tid, select=["run_id", "values"])),
    }


async def test_runs_list_select(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _selected)
    assert peer["unknown"] == 422
    assert peer["picked"] == [{"run_id": "<id0>", "status": "success", "thread_id": "<id1>"}]
    assert ours == peer
