"""A LangGraph app whose state is a pydantic model holding an Enum and a dataclass.

Used by ``test_serde.py``: the test process runs it with a checkpointer, then a fresh
process imports this module (as an application would) and prints what it reads back.
"""

from __future__ import annotations

import enum
import json
import sqlite3
import sys
from dataclasses import dataclass
from typing import Any

from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

from aworld_graph.checkpoint import TrajectorySaver

__all__ = ["Mood", "Point", "State", "build", "checkpointer", "read"]


class Mood(enum.Enum):
    """An Enum field of the state."""

    CALM = "calm"
    EXCITED = "excited"


@dataclass
class Point:
    """A dataclass field of the state."""

    x: int
    y: int


class State(BaseModel):
    """The graph state."""

    mood: Mood = Mood.CALM
    point: Point = Point(0, 0)
    steps: int = 0


def _move(state: State) -> dict[str, Any]:
    return {"point": Point(state.point.x + 1, state.point.y + 2), "steps": state.steps + 1}


def _cheer(state: State) -> dict[str, Any]:
    return {"mood": Mood.EXCITED, "steps": state.steps + 1}


def build(checkpointer: Any) -> Any:
    """START → move → cheer → END."""
    g = StateGraph(State)
    g.add_node("move", _move)
    g.add_node("cheer", _cheer)
    g.add_edge(START, "move")
    g.add_edge("move", "cheer")
    g.add_edge("cheer", END)
    return g.compile(checkpointer=checkpointer)


def checkpointer(kind: str, path: str) -> Any:
    """A ``TrajectorySaver`` with no configuration, or LangGraph's ``SqliteSaver``."""
    if kind == "trajectory":
        return TrajectorySaver(path)
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


def _typed(value: Any) -> Any:
    """``value`` as JSON-able ``[repr, module.qualname]`` pairs, recursing into containers."""
    if isinstance(value, dict):
        return {str(k): _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    kind = type(value)
    return [repr(value), f"{kind.__module__}.{kind.__qualname__}"]


def read(kind: str, path: str, thread_id: str) -> None:
    """Print (as JSON) the latest state and every listed checkpoint's values, with types."""
    saver = checkpointer(kind, path)
    app = build(saver)
    config = {"configurable": {"thread_id": thread_id}}
    out = {
        "state": _typed(app.get_state(config).values),
        "history": [_typed(t.checkpoint["channel_values"]) for t in saver.list(config)],
    }
    json.dump(out, sys.stdout, sort_keys=True)
