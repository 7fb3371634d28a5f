"""The records a run's state holds, typed: chat messages, trace records, rewards.

They are plain JSON on disk and in the state (``dict`` at run time, so any SQLite or
PostgreSQL client, export or trainer reads them as they are); these ``TypedDict`` s say
which keys each may have, for readers and for the type checker. Keys a record may lack are
optional (``total=False``): read them with ``.get``.

* :class:`Message` – one entry of ``state["messages"]``;
* :class:`TraceRecord` – one entry of ``state["trace"]``: what one node execution did;
* :class:`ToolResult` – one tool call's result inside a ``tools`` trace record;
* :class:`Reward` – one entry of ``state["rewards"]``.

An LLM call's ``tokens`` entry may keep its prompt ids by reference (``prompt_prefix``,
``prompt_suffix``: a multi-turn prompt repeats the calls before it);
:func:`expand_prompt_ids` gives every call's whole ``prompt_ids`` back and
:func:`compact_prompt_ids` makes the stored form.
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from collections.abc import Mapping, Sequence
from typing import Any, Required, TypedDict

__all__ = [
    "MIN_SHARED_IDS",
    "Message",
    "Reward",
    "ToolResult",
    "TraceRecord",
    "compact_prompt_ids",
    "expand_prompt_ids",
]


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
    endpoint returned no token ids. Never re-tokenized text. A prompt that starts with at
    least :data:`MIN_SHARED_IDS` ids of the agent's previous call (its prompt, then its
    completion) is stored as ``prompt_prefix`` ``{"length", "digest"}`` and ``prompt_suffix``
    (the ids after it) in place of ``prompt_ids``: :func:`expand_prompt_ids` reads it."""
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


MIN_SHARED_IDS = 32
"""The shortest shared prefix stored as a reference: below it the reference (about 50
bytes) would take more room than the ids (1 to 3 bytes each in msgpack)."""


def _digest(ids: Sequence[int]) -> str:
    """BLAKE2b-64 of ``ids`` as little-endian 64-bit integers, in hex."""
    data = array("q", ids)
    if sys.byteorder == "big":
        data.byteswap()
    return hashlib.blake2b(data.tobytes(), digest_size=8).hexdigest()


def _sampled(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """An ``llm`` record's ``tokens`` when it holds token ids, else ``None``."""
    tokens = record.get("tokens") if record.get("kind") == "llm" else None
    if isinstance(tokens, Mapping) and "completion_ids" in tokens:
        return tokens
    return None


def _whole_prompts(
    trace: Sequence[Mapping[str, Any]], agent: str | None = None
) -> dict[int, list[int]]:
    """Trace index → the whole prompt ids of each ``llm`` record with token ids (of ``agent``
    only, if given). A ``prompt_prefix`` is the first ``length`` ids of the prompt and
    completion of an earlier call of the same agent whose first ``length`` ids have that
    digest, the latest such call first (a sub-run's records keep their order when they move
    into the parent's trace, other records may come between). ``ValueError`` names a record
    whose earlier call is not in ``trace``."""
    whole: dict[int, list[int]] = {}
    earlier: dict[str, list[list[int]]] = {}  # agent → prompt + completion of its calls
    for n, record in enumerate(trace):
        tokens = _sampled(record)
        name = str(record.get("agent", ""))
        if tokens is None or (agent is not None and name != agent):
            continue
        if "prompt_prefix" not in tokens:
            prompt = [int(t) for t in tokens.get("prompt_ids") or []]
        else:
            ref = tokens.get("prompt_prefix") or {}
            length, digest = int(ref.get("length", -1)), str(ref.get("digest", ""))
            start = next(
                (
                    ids[:length]
                    for ids in reversed(earlier.get(name, []))
                    if len(ids) >= length and _digest(ids[:length]) == digest
                ),
                None,
            )
            if start is None:
                raise ValueError(
                    f"trace record {n} (LLM call of agent {name!r}) stores its prompt as the "
                    f"first {length} ids of an earlier call of that agent (digest {digest}), "
                    "and no earlier call in this trace has them; read the run's whole trace"
                )
            prompt = start + [int(t) for t in tokens.get("prompt_suffix") or []]
        whole[n] = prompt
        earlier.setdefault(name, []).append(prompt + [int(t) for t in tokens["completion_ids"]])
    return whole


def compact_prompt_ids(
    tokens: Mapping[str, Any], trace: Sequence[Mapping[str, Any]], agent: str
) -> dict[str, Any]:
    """``tokens`` (a new LLM call's entry, with whole ``prompt_ids``) as it is stored after
    ``trace`` (the run's records so far): when the prompt shares at least
    :data:`MIN_SHARED_IDS` leading ids with the prompt and completion of ``agent``'s latest
    call in ``trace``, those become ``prompt_prefix`` ``{"length", "digest"}`` and the rest
    ``prompt_suffix``; otherwise ``tokens`` as they are."""
    prompt = tokens.get("prompt_ids")
    latest = max(
        (n for n, r in enumerate(trace) if r.get("agent") == agent and _sampled(r)), default=None
    )
    if not isinstance(prompt, list) or latest is None:
        return dict(tokens)
    record = trace[latest]
    previous = _whole_prompts(trace[: latest + 1], agent)[latest] + [
        int(t) for t in record["tokens"]["completion_ids"]
    ]
    shared = 0
    for a, b in zip(previous, prompt, strict=False):
        if a != b:
            break
        shared += 1
    if shared < MIN_SHARED_IDS:
        return dict(tokens)
    rest = {k: v for k, v in tokens.items() if k != "prompt_ids"}
    prefix = {"length": shared, "digest": _digest(prompt[:shared])}
    return {"prompt_prefix": prefix, "prompt_suffix": prompt[shared:], **rest}


def expand_prompt_ids(trace: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``trace`` with each ``llm`` record's ``tokens`` holding its whole ``prompt_ids``
    (records stored with ``prompt_prefix`` are copied; the others are returned as they
    are). ``ValueError`` names a record whose earlier call is not in ``trace``."""
    whole = _whole_prompts(trace)
    out: list[Mapping[str, Any]] = []
    for n, record in enumerate(trace):
        tokens = record.get("tokens")
        if n in whole and isinstance(tokens, Mapping) and "prompt_prefix" in tokens:
            kept = {k: v for k, v in tokens.items() if k not in ("prompt_prefix", "prompt_suffix")}
            record = {**record, "tokens": {"prompt_ids": whole[n], **kept}}
        out.append(record)
    return out
