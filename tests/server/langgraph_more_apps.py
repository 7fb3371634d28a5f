"""More LangGraph applications, written as a LangGraph user writes them (no aworld-graph import),
served in-process by the tests and, copied into a project, by ``langgraph dev`` side by side:
a graph to steer with ``Command(update=..., goto=...)``, a graph with a subgraph, and graph
factories of each kind LangGraph's server takes (async, a context manager, given the run's
config and/or a ``ServerRuntime``)."""

from __future__ import annotations

import operator
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from langgraph_sdk.runtime import ServerRuntime
from typing_extensions import TypedDict


class Steps(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    note: str


def _step(name: str) -> Any:
    def node(state: Steps) -> dict[str, Any]:
        return {"log": [name]}

    node.__name__ = name
    return node


def ask(state: Steps) -> dict[str, Any]:
    """Asks a person (``interrupt``); their answer goes into the log."""
    return {"log": [f"ask:{interrupt('go on?')}"]}


def side(state: Steps) -> dict[str, Any]:
    """Reached only by ``goto`` (or a ``Send``, whose input is its state)."""
    return {"log": [f"side:{state.get('note', '')}"]}


steps = (
    StateGraph(Steps)
    .add_node("a", _step("a"))
    .add_node("ask", ask)
    .add_node("b", _step("b"))
    .add_node("side", side)
    .add_edge(START, "a")
    .add_edge("a", "ask")
    .add_edge("ask", "b")
    .add_edge("b", END)
    .add_edge("side", END)
    .compile()
)
"""``a`` → ``ask`` (an interrupt) → ``b``; ``side`` only when a command goes there."""


_inner = (
    StateGraph(Steps)
    .add_node("one", _step("one"))
    .add_node("two", _step("two"))
    .add_edge(START, "one")
    .add_edge("one", "two")
    .compile()
)

parent = (
    StateGraph(Steps)
    .add_node("first", _step("first"))
    .add_node("child", _inner)
    .add_edge(START, "first")
    .add_edge("first", "child")
    .add_edge("child", END)
    .compile()
)
"""``first`` → ``child`` (a subgraph: ``one`` → ``two``)."""


def _greeter(greeting: str, said: str = "") -> StateGraph[Steps]:
    def greet(state: Steps) -> dict[str, Any]:
        return {"log": [f"{greeting}{said}"]}

    return StateGraph(Steps).add_node("greet", greet).add_edge(START, "greet")


def _greeting(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("greeting") or "hello")


async def make_async(config: RunnableConfig) -> Any:
    """An ``async`` factory of the run's config."""
    return _greeter(_greeting(config)).compile()


OPEN: dict[str, int] = {"managed": 0}
"""How many graphs of :func:`make_managed` are open now (in-process runs only)."""


@asynccontextmanager
async def make_managed(config: RunnableConfig, runtime: ServerRuntime) -> AsyncIterator[Any]:
    """A factory that is an async context manager, given the config and a ``ServerRuntime``:
    its graph is open for the whole run (``OPEN``), and says why it was made."""
    OPEN["managed"] += 1
    try:
        made_for = f" ({runtime.access_context}, store {runtime.store is not None})"
        graph = _greeter(_greeting(config), made_for)
        yield graph.add_node("check", _is_open).add_edge("greet", "check").compile()
    finally:
        OPEN["managed"] -= 1


def _is_open(state: Steps) -> dict[str, Any]:
    return {"log": [f"open while running: {OPEN['managed'] > 0}"]}


def make_for_runtime(runtime: ServerRuntime) -> Any:
    """A plain factory of a ``ServerRuntime`` only."""
    return _greeter("runtime", f" {runtime.access_context}")


@contextmanager
def make_in_context() -> Iterator[Any]:
    """A factory that is a plain context manager, of nothing."""
    yield _greeter("from a context manager").compile()
