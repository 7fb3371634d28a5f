"""``SwarmState``: the one graph state every node reads and writes.

All values are plain JSON-compatible data (dicts, lists, strings, numbers), so a checkpoint
never needs pickle and any SQLite client can read it; the keys of its messages, trace records
and rewards are typed in :mod:`aworld_graph.records`. Append-only channels (``messages``,
``trace``, ``rewards``) use an append reducer; the project's ``TrajectorySaver`` stores each
version of such a list as a delta against the previous one, so a long conversation costs O(n)
storage. (LangGraph's own ``DeltaChannel`` is not used: it turns message dicts into LangChain
message objects, and the state is meant to stay plain OpenAI-format data.)

Single-value channels take the last write, so parallel branches of a workflow may write them
in the same superstep; ``steps`` adds increments.
"""

from __future__ import annotations

from typing import (
    Annotated,
    Any,
    NotRequired,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from .records import Message, Reward, TraceRecord

__all__ = ["SwarmState", "Message", "TraceRecord", "Reward", "STATE_KEYS", "update_problems"]


def extend(current: list[Any] | None, update: Any) -> list[Any]:
    """Reducer for append-only channels: a write is one item or a list of items."""
    out = list(current) if current else []
    if isinstance(update, list):
        out.extend(update)
    elif update is not None:
        out.append(update)
    return out


def last(current: Any, update: Any) -> Any:
    """Reducer for single values: the last write wins (parallel branches may both write)."""
    return update


def add(current: int | None, update: int | None) -> int:
    """Reducer for counters: writes are increments."""
    return (current or 0) + (update or 0)


def merge(current: dict[str, Any] | None, update: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for dicts: shallow merge, later writes win."""
    return {**(current or {}), **(update or {})}


class SwarmState(TypedDict):
    """The state that flows through every node of a swarm graph."""

    messages: Annotated[list[Message], extend]
    """The conversation, OpenAI message format; nodes append."""
    trace: Annotated[list[TraceRecord], extend]
    """One record per node execution (LLM call, tool execution, critic verdict…)."""
    rewards: Annotated[list[Reward], extend]
    """Rewards and scores attached to steps (critics, ``Runners.reward``, reward functions)."""
    active_agent: NotRequired[Annotated[str, last]]
    """Name of the agent that holds control (handoff swarms)."""
    answer: NotRequired[Annotated[str | None, last]]
    """The latest final answer given by any agent."""
    outputs: NotRequired[Annotated[dict[str, Any], merge]]
    """Each node's latest output by node name (parallel branches merge here)."""
    input: NotRequired[Annotated[str, last]]
    """The task's input text."""
    steps: NotRequired[Annotated[int, add]]
    """Number of node executions so far (nodes write increments; bounds ``max_steps``)."""
    status: NotRequired[Annotated[str, last]]
    """``running`` | ``finished`` | ``max_steps`` | ``error``."""
    error: NotRequired[Annotated[str | None, last]]
    """Why the run stopped early, if it did."""
    context: NotRequired[Annotated[dict[str, Any], merge]]
    """User fields: anything a workflow wants to carry between nodes."""


STATE_KEYS = tuple(SwarmState.__annotations__)
_HINTS = get_type_hints(SwarmState, include_extras=True)


_KINDS: dict[type, str] = {
    str: "a text",
    int: "an integer",
    list: "a list",
    dict: "a mapping",
}


def field_type(key: str) -> tuple[type, bool] | None:
    """The plain type of state field ``key`` and whether it may be ``None``; ``None`` for a
    name that is not a field."""
    if key not in STATE_KEYS:
        return None
    hint = _HINTS[key]
    while get_origin(hint) in (NotRequired, Annotated):
        hint = get_args(hint)[0]
    nullable = False
    if get_origin(hint) is Union or type(hint).__name__ == "UnionType":
        args = [a for a in get_args(hint) if a is not type(None)]
        nullable, hint = True, args[0]
    base = get_origin(hint) or hint
    return base, nullable


def update_problems(update: dict[str, Any]) -> list[str]:
    """Everything wrong with a state update (unknown fields, values of the wrong type), each
    naming the field and the fix; empty when it can be applied."""
    problems = []
    for key, value in update.items():
        found = field_type(key)
        if found is None:
            import difflib

            close = difflib.get_close_matches(key, STATE_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(
                f"{key!r} is not a state field{hint}; fields: {', '.join(STATE_KEYS)}; put "
                f"your own values under context (context.{key}=...)"
            )
            continue
        base, nullable = found
        if value is None and nullable:
            continue
        ok = isinstance(value, base) and not (base is int and isinstance(value, bool))
        if ok and base is list and key in ("messages", "trace", "rewards"):
            ok = all(isinstance(item, dict) for item in value)
        if not ok:
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            want = _KINDS.get(base, base.__name__)
            if base is list:
                want += " of mappings" if key in ("messages", "trace", "rewards") else ""
            problems.append(f"{key}: {shown} is not {want}" + (" or null" if nullable else ""))
    return problems
