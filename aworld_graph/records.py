"""The records a run's state holds, typed: chat messages, trace records, rewards.

They are plain JSON on disk and in the state (``dict`` at run time, so any SQLite or
PostgreSQL client, export or trainer reads them as they are); these ``TypedDict`` s say
which keys each may have, for readers and for the type checker. Keys a record may lack are
optional (``total=False``): read them with ``.get``.

* :class:`Message` – one entry of ``state["messages"]``;
* :class:`TraceRecord` – one entry of ``state["trace"]``: what one node execution did;
* :class:`ToolResult` – one tool call's result inside a ``tools`` trace record;
* :class:`Reward` – one entry of ``state["rewards"]``.
"""

from __future__ import annotations

from typing import Any, Required, TypedDict

__all__ = ["Message", "Reward", "ToolResult", "TraceRecord"]


class Message(TypedDict, total=False):
    """A chat message in the OpenAI format, plus bookkeeping keys starting with ``_`` that
    never reach a model (:func:`public` copies drop them)."""

    role: Required[str]
    """``system`` | ``user`` | ``assistant`` | ``tool``."""
    content: Any
    """The text (``None`` for an assistant message that only calls tools; a list of parts
    where a user gave one)."""
    tool_calls: list[dict[str, Any]]
    """An assistant's calls: ``{"id", "type": "function", "function": {"name", "arguments"}}``."""
    tool_call_id: str | None
    """A tool message: the call it answers."""
    name: str
    """The author's name, where the OpenAI format has one."""
    _agent: str
    """The agent (or human node) that wrote it, or whose private turn it opens."""
    _turn: str | None
    """The agent turn it belongs to (``<agent>#<n>``)."""
    _error: bool
    """A tool message whose call failed (the repeat guard never reuses it)."""


class ToolResult(TypedDict, total=False):
    """What one tool call of a ``tools`` record did."""

    tool_call_id: str | None
    name: str
    """The tool called."""
    arguments: str
    """Its arguments as the model wrote them (a JSON text)."""
    server: str | None
    """The MCP server that ran it; ``None`` for a local or graph-handled tool."""
    content: str
    """What the model was shown (truncated for it)."""
    result: Any
    """The whole result."""
    is_error: bool
    duration_ms: float
    repeated: bool
    """The repeat guard answered with an earlier identical call's result."""
    handoff: str | None
    """A handoff: the agent control passed to (only the first handoff of a step counts)."""
    delegate: str
    """A delegation: the team member that ran it."""
    thread_id: str | None
    """A delegation: the member's sub-run thread."""
    sub_trace: list[TraceRecord]
    """A delegation: the member's trace (moved into the run's trace, not kept here)."""


class TraceRecord(TypedDict, total=False):
    """What one node execution did. ``kind`` says which keys it has: ``llm`` (a model call),
    ``tools`` (the calls it asked for), ``limit`` (a step limit stopped the agent),
    ``critic``, ``human``, ``node`` (a function node) or ``swarm`` (a nested swarm); records
    of a delegated or nested sub-run carry its ``thread_id`` and ``parent_node``."""

    kind: str
    node: str
    """The graph node that ran."""
    agent: str
    """The agent (or node) it belongs to."""
    step: int
    """The LangGraph superstep it ran in."""
    at: float
    """When it was made (seconds since the epoch)."""
    turn: str | None
    """``llm``/``tools``: the agent turn (``<agent>#<n>``)."""
    model: str | None
    usage: dict[str, int] | None
    """Token usage: ``prompt_tokens``, ``completion_tokens``, ``total_tokens``."""
    latency_ms: float
    finish_reason: str | None
    content: Any
    """The reply's text (``llm``), the verdict (``critic``), the input (``human``), the
    update (``node``) or the answer (``swarm``)."""
    tool_calls: list[dict[str, Any]]
    """The calls the reply asked for: ``{"id", "name", "arguments"}``."""
    n_messages: int
    """``llm``: how many messages the state held when the call was made (with a private
    turn's opening message)."""
    prompt_turn: str | None
    """``llm`` of a private turn: the turn whose messages alone the model saw."""
    system_prompt: str
    tools: list[dict[str, Any]]
    """``llm``: the tools offered (OpenAI ``tools`` format)."""
    raw: Any
    """``llm``: the provider's reply as it came."""
    unavailable_servers: dict[str, str]
    """``llm``: MCP servers left out, and why (once per run, at the agent's first call)."""
    retried: list[str]
    """``llm`` (and an LLM judge's ``critic``): what went wrong with each attempt of the model
    call that was retried before the reply (an HTML page from a proxy, a truncated body, an
    HTTP 5xx…), oldest first; absent when the first attempt answered."""
    tokens: dict[str, Any]
    """``llm`` of an agent with ``AgentConfig(record_tokens=True)``: what the model sampled,
    ``{"prompt_ids", "completion_ids", "logprobs", "tokenizer"}`` (the embedded model adds
    ``mask``: 1 on the tokens the model sampled or chose, and ``text_span``: where the stored
    text lies in the decoded completion ids), or ``{"available": False, "reason"}`` when the
    endpoint returned no token ids. Never re-tokenized text."""
    tool_results: list[ToolResult]
    """``tools``: one per call, in the calls' order."""
    error: str | None
    """``limit``: why the agent stopped."""
    score: float
    """``critic``: its score."""
    feedback: str
    status: str
    """``critic``: ``pass`` | ``retry`` | ``max_rounds``."""
    judged: str
    """``critic``: the node it judged."""
    round: int
    sub_thread: str | None
    """``swarm``: the nested swarm's thread."""
    success: bool | None
    """``swarm``: whether the nested run succeeded."""
    thread_id: str
    """A sub-run's record: the sub-run's thread."""
    parent_node: str
    """A sub-run's record: the node of this run that started the sub-run."""


class Reward(TypedDict, total=False):
    """A reward attached to a step: a critic's verdict, :meth:`Runners.reward`'s score, or
    the episode reward of a reward function (``level="episode"``)."""

    step: int | None
    """The superstep it rewards."""
    score: float
    status: str | None
    source: str
    """Who gave it: a critic's name, ``user`` or ``reward_fn``."""
    feedback: str | None
    judged: str | None
    """A critic's: the node it judged."""
    round: int
    """A critic's: how many times it has judged that node."""
    node: str | None
    """The node the reward was written as (the run's last)."""
    level: str
    """``episode`` for a whole run's reward."""
    reward_fn: str
    """An episode reward: the function's name."""
    ground_truth: Any
    """An episode reward: what the answer was compared with."""
