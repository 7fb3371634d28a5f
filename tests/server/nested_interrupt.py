"""A LangGraph application whose subgraph asks a person: the parent's pending task is the
subgraph's. Only LangGraph is imported, so ``langgraph dev`` serves this file as it is (the
side-by-side test copies it into its project)."""

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class Steps(TypedDict, total=False):
    log: list[str]


def ask(state: Steps) -> dict[str, Any]:
    return {"log": [*state.get("log", []), f"ask:{interrupt('go on?')}"]}


inner = StateGraph(Steps).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
parent = (
    StateGraph(Steps)
    .add_node("child", inner.compile())
    .add_edge(START, "child")
    .add_edge("child", END)
    .compile()
)
"""``child`` (a subgraph: ``ask``, an interrupt)."""
