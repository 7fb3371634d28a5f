"""What a run reports while it goes: typed events, each a ``TypedDict`` tagged by ``"event"``.

Events are plain dicts, so they travel as they are: ``Runners.streaming_run`` yields them, the
server sends them as LangGraph ``custom`` stream parts, and ``json.dumps`` writes them. Their
types let a reader narrow on the tag (``if event["event"] == "token": event["text"]``).

* :data:`AgentEvent` – what the agent runtime writes from inside a node (its LLM call's start
  and end, a streamed token, a tool call's start and end, a handoff, its answer, an MCP
  server it goes on without);
* :data:`RunEvent` – those, and each node's start and end, as :meth:`GraphRun.drive
  <aworld_graph.run.GraphRun.drive>` hands them to its sink;
* :data:`StepEvent` – with ``states=True`` the sink also gets what each superstep wrote
  (:class:`Update`) and each saved checkpoint (:class:`State`);
* :class:`CriticScore` – the server's ``custom`` event for a critic's verdict, read from an
  :class:`Update`;
* :data:`AppEvent` – what a LangGraph application (:class:`~aworld_graph.run.LangGraphApp`)
  streams besides its updates and checkpoints: its chat models' messages (:class:`Message`)
  and what its nodes write to the stream (:class:`Custom`), as LangGraph gives them.

This module imports nothing of the house, so the nodes that write events can name their
types without importing the run loop. (:class:`~aworld_graph.run.Done`, which carries a
``TaskResponse``, lives with :class:`~aworld_graph.run.GraphRun`.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeAlias, TypedDict

from langgraph.types import CheckpointPayload

__all__ = [
    "AgentEvent",
    "Answer",
    "AppEvent",
    "CriticScore",
    "Custom",
    "EventSink",
    "Handoff",
    "LlmCall",
    "LlmStart",
    "Message",
    "NodeEnd",
    "NodeStart",
    "RunEvent",
    "ServerUnavailable",
    "State",
    "Step",
    "StepEvent",
    "Token",
    "ToolCall",
    "ToolStart",
    "Update",
]


class NodeStart(TypedDict):
    """A node of the graph starts (a tool call's inner task is not a node)."""

    event: Literal["node_start"]
    node: str
    """The node's name."""


class NodeEnd(TypedDict):
    """A node ended, with its error when it failed."""

    event: Literal["node_end"]
    node: str
    """The node's name."""
    error: str | None
    """What it raised, or ``None``."""


class Token(TypedDict):
    """A piece of a model reply as it streams (with ``TaskConfig(stream=True)``)."""

    event: Literal["token"]
    agent: str
    """The agent whose model call it is."""
    text: str
    """The new text."""


class LlmStart(TypedDict):
    """An agent's model call starts."""

    event: Literal["llm_start"]
    agent: str
    """The agent that makes it."""
    prompt: list[dict[str, Any]]
    """The messages the model is sent (its system prompt first), as OpenAI's chat API takes
    them."""


class LlmCall(TypedDict):
    """A model call ended."""

    event: Literal["llm_call"]
    agent: str
    """The agent that made it."""
    content: str
    """The reply's text."""
    tool_calls: list[dict[str, Any]]
    """The tool calls it asked for: ``{"id", "name", "arguments"}`` each."""
    usage: dict[str, int]
    """Its token counts."""
    latency_ms: float
    """How long the call took."""


class ToolStart(TypedDict):
    """A tool call starts (a call whose saved result a resumed run reuses does not start
    again: only its :class:`ToolCall` is told)."""

    event: Literal["tool_start"]
    agent: str
    """The agent that called it."""
    tool: str
    """The tool's name as the model called it."""
    tool_call_id: str
    """The id the model gave the call."""
    arguments: str
    """The arguments, as the model wrote them (JSON text)."""


class ToolCall(TypedDict):
    """A tool call ended."""

    event: Literal["tool_call"]
    agent: str
    """The agent that called it."""
    tool: str
    """The tool's name as the model called it."""
    tool_call_id: str
    """The id the model gave the call (its tool message answers that id)."""
    server: str | None
    """The MCP server it ran on, or ``None`` for a local tool."""
    arguments: str
    """The arguments, as the model wrote them (JSON text)."""
    content: str
    """The result the model reads."""
    is_error: bool
    """Whether the call failed (the model reads why)."""
    duration_ms: float
    """How long it took."""


# "from" is a keyword, so this one is declared in the functional form
Handoff = TypedDict("Handoff", {"event": Literal["handoff"], "from": str, "to": str})
"""An agent handed control to another (``from``, ``to``: agent names)."""


class Answer(TypedDict):
    """An agent answered (its reply has no tool call)."""

    event: Literal["answer"]
    agent: str
    """The agent."""
    content: str
    """The answer."""


class ServerUnavailable(TypedDict):
    """An agent goes on without an MCP server that could not be started or reached."""

    event: Literal["server_unavailable"]
    agent: str
    """The agent whose tools the server was to give."""
    server: str
    """The server's name in the agent's ``mcpServers`` config."""
    error: str
    """Why it is unavailable."""


class CriticScore(TypedDict):
    """A critic's verdict (the server's ``custom`` event, made from the critic's update)."""

    event: Literal["critic_score"]
    critic: str
    """The critic node."""
    judged: str | None
    """The node whose output it judged."""
    score: float | None
    """The score in [0, 1]."""
    status: str | None
    """``pass`` or ``retry`` (or how the critic ended)."""
    feedback: str | None
    """What the critic said."""
    round: int | None
    """Which round of the critic loop."""


class Update(TypedDict):
    """What the nodes of a superstep wrote: node name → its state update."""

    event: Literal["update"]
    updates: dict[str, Any]
    """The updates by node (what LangGraph's ``updates`` stream mode gives)."""


class State(TypedDict):
    """A checkpoint was saved (LangGraph's ``checkpoints`` stream mode)."""

    event: Literal["state"]
    checkpoint: CheckpointPayload[dict[str, Any]]
    """Its ``values``, ``next``, ``config``, ``metadata``, ``parent_config`` and ``tasks``."""


class Step(TypedDict):
    """A part of one of LangGraph's own stream modes that a run was asked to pass on as it
    is (``tasks``: each task's start and result; ``debug``: checkpoints and tasks with their
    step and time; ``events``: LangChain's ``astream_events`` v2 events, a workflow's agents'
    model calls and tool calls as chat model and tool events)."""

    event: Literal["step"]
    mode: Literal["tasks", "debug", "events"]
    data: Any
    """The part, as LangGraph's ``astream`` gives it in that mode."""


class Message(TypedDict):
    """A LangGraph application's message, as its ``messages`` stream mode gives it: a chunk of
    a chat model's reply as it streams, or a whole message a node returned."""

    event: Literal["message"]
    message: Any
    """The LangChain message (an ``AIMessageChunk`` while a model streams)."""
    metadata: dict[str, Any]
    """Where it comes from (``langgraph_node``, ``langgraph_step``, the model's tags…)."""


class Custom(TypedDict):
    """What a LangGraph application's node wrote to the stream (``get_stream_writer()``), as
    it is."""

    event: Literal["custom"]
    data: Any
    """The value written."""


AgentEvent: TypeAlias = (
    Token | LlmStart | LlmCall | ToolStart | ToolCall | Handoff | Answer | ServerUnavailable
)
"""What the agent runtime writes from inside a node."""

AppEvent: TypeAlias = Message | Custom
"""What a LangGraph application's run streams besides its updates and checkpoints."""

RunEvent: TypeAlias = NodeStart | NodeEnd | AgentEvent | AppEvent
"""What a run's sink receives."""

StepEvent: TypeAlias = Update | State | Step
"""What a sink also receives with ``states=True`` (a :class:`Step` for each stream mode the
run was asked to pass on)."""

EventSink: TypeAlias = Callable[[RunEvent | StepEvent], None]
"""Where :meth:`GraphRun.drive <aworld_graph.run.GraphRun.drive>` sends a run's events."""
