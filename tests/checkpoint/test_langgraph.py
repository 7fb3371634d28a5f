"""Drop-in for real LangGraph apps: interrupts, subgraphs, durability modes, Send fan-out."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

from aworld_graph.checkpoint import TrajectorySaver


class State(TypedDict):
    items: Annotated[list[str], operator.add]
    approved: bool


def review_graph(checkpointer: Any) -> Any:
    def draft(state: State) -> dict[str, Any]:
        return {"items": ["draft"]}

    def review(state: State) -> dict[str, Any]:
        answer = interrupt({"question": "approve?", "items": state["items"]})
        return {"approved": answer == "yes", "items": [f"reviewed:{answer}"]}

    def fan_out(state: State) -> list[Send]:
        return [Send("work", {"items": [f"job{i}"], "approved": True}) for i in range(3)]

    def work(state: State) -> dict[str, Any]:
        return {"items": [state["items"][0] + ":done"]}

    inner = StateGraph(State)
    inner.add_node("polish", lambda s: {"items": ["polished"]})
    inner.add_edge(START, "polish")
    inner.add_edge("polish", END)

    g = StateGraph(State)
    g.add_node("draft", draft)
    g.add_node("review", review)
    g.add_node("work", work)
    g.add_node("sub", inner.compile())
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")
    g.add_conditional_edges("review", fan_out, ["work"])
    g.add_edge("work", "sub")
    g.add_edge("sub", END)
    return g.compile(checkpointer=checkpointer)


def _run(app: Any, durability: str) -> tuple[Any, Any]:
    config = {"configurable": {"thread_id": "review"}}
    first = app.invoke({"items": [], "approved": False}, config, durability=durability)
    asked = [i.value for i in first.pop("__interrupt__")]
    state = app.get_state(config)
    final = app.invoke(Command(resume="yes"), config, durability=durability)
    return (first, asked), (state.next, state.tasks[0].interrupts[0].value, final)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_interrupt_resume_send_and_subgraph_match_in_memory(db_path: Path, durability: str) -> None:
    ours = _run(review_graph(TrajectorySaver(db_path)), durability)
    reference = _run(review_graph(InMemorySaver()), durability)
    assert ours == reference
    items = ours[1][2]["items"]
    assert items[:5] == ["draft", "reviewed:yes", "job0:done", "job1:done", "job2:done"]
    assert items[-1] == "polished"


async def test_async_app_with_subgraph_namespaces(db_path: Path) -> None:
    async with TrajectorySaver(db_path) as saver:
        app = review_graph(saver)
        config = {"configurable": {"thread_id": "a"}}
        await app.ainvoke({"items": [], "approved": False}, config)
        await app.ainvoke(Command(resume="no"), config)
        state = await app.aget_state(config, subgraphs=True)
        assert state.values["items"][-1] == "polished" and not state.values["approved"]
        history = [s async for s in app.aget_state_history(config)]
        assert len(history) >= 6
        assert {t.thread_id for t in saver.threads()} == {"a"}
        nodes = [n for row in saver.transitions("a") for n in row.nodes]
        assert {"draft", "review", "sub"} <= set(nodes)


class MapState(TypedDict):
    items: list[int]
    out: Annotated[list[int], operator.add]


def test_send_tasks_name_their_nodes_in_the_trajectory(db_path: Path) -> None:
    """A map step of ``Send`` tasks names its node like any other step (the task path of a
    Send task holds only its index into the checkpoint's ``__pregel_tasks``)."""
    g = StateGraph(MapState)
    g.add_node("plan", lambda s: {})
    g.add_node("work", lambda s: {"out": [s["items"][0] * 2]})
    g.add_edge(START, "plan")
    g.add_conditional_edges(
        "plan", lambda s: [Send("work", {"items": [i], "out": []}) for i in s["items"]], ["work"]
    )
    g.add_edge("work", END)
    for durability in ("sync", "async"):
        with TrajectorySaver(db_path) as saver:
            app = g.compile(checkpointer=saver)
            thread = f"map-{durability}"
            config = {"configurable": {"thread_id": thread}}
            assert app.invoke({"items": [1, 2, 3], "out": []}, config, durability=durability)[
                "out"
            ] == [2, 4, 6]
            assert [r.nodes for r in saver.transitions(thread)] == [
                [],
                ["__start__"],
                ["plan"],
                ["work"],
            ]
