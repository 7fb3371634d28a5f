"""Chat samples: what one agent saw and said, rebuilt from a run's messages and trace.

An agent *turn* is the run of LLM calls an agent makes under one turn id (``_turn`` on its
messages, ``turn`` on its ``llm`` trace records). Its sample is the prompt of the turn's last
call – the agent's system prompt (from the trace record), then the conversation it saw –
followed by that call's reply. Earlier replies of the same turn are in the prompt already,
so the sample holds every assistant message of the turn; assistant messages of other agents
or earlier turns are context (``own=False``).

The *episode* sample of a run is the turn that gave the final answer: for a single agent
or a handoff swarm that is the whole conversation as the answering agent saw it; for a
workflow it is the last agent's turn, whose input carries the earlier steps' outputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from ..checkpoint import strip_secrets
from ..records import Message, TraceRecord
from .runs import Run

__all__ = ["ChatSample", "chat_samples", "start_prompt"]

_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


@dataclass(kw_only=True)
class ChatSample:
    """One training conversation in OpenAI message format."""

    messages: list[dict[str, Any]]
    """System prompt first, then the conversation; ends with an assistant message."""
    own: list[bool]
    """Per message: an assistant message of this sample's agent turn (the ones to learn)."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    """The tools offered to the agent (OpenAI ``tools`` format)."""
    agent: str = ""
    """The agent whose turn this is."""
    turn: str = ""
    """The turn id (``<agent>#<n>``)."""
    run: Run | None = None
    """The run it came from."""

    def split(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``(prompt, completion)``: the completion starts at the turn's first own reply."""
        cut = self.own.index(True) if True in self.own else len(self.messages)
        return self.messages[:cut], self.messages[cut:]


def _arguments(args: Any) -> str:
    """Arguments as a JSON string with secret-named keys removed (``strip_secrets`` on the
    decoded object: a JSON string is opaque to it)."""
    if isinstance(args, str):
        try:
            decoded = json.loads(args) if args.strip() else {}
        except ValueError:
            return args
    else:
        decoded = args or {}
    return json.dumps(strip_secrets(decoded), ensure_ascii=False)


def _calls(calls: Any) -> list[dict[str, Any]]:
    out = []
    for c in calls or []:
        fn = c.get("function") or {"name": c.get("name"), "arguments": c.get("arguments")}
        out.append(
            {
                "id": str(c.get("id")),
                "type": "function",
                "function": {
                    "name": str(fn.get("name")),
                    "arguments": _arguments(fn.get("arguments")),
                },
            }
        )
    return out


def public(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message with only the OpenAI keys (no ``_agent``/``_turn``/``_error``)."""
    out = {k: message[k] for k in _KEYS if k in message and message[k] is not None}
    if message.get("role") == "assistant":
        out.setdefault("content", None)
        if message.get("tool_calls"):
            out["tool_calls"] = _calls(message["tool_calls"])
        else:
            out.pop("tool_calls", None)
    elif "content" in out and not isinstance(out["content"], (str, list)):
        out["content"] = json.dumps(out["content"], ensure_ascii=False, default=str)
    out.setdefault("content", "" if message.get("role") != "assistant" else None)
    return out


def _consistent(schema: Any) -> Any:
    """``schema`` with each ``required`` list cut to the ``properties`` still there."""
    if isinstance(schema, list):
        return [_consistent(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _consistent(v) for k, v in schema.items()}
    if isinstance(out.get("properties"), dict) and isinstance(out.get("required"), list):
        out["required"] = [name for name in out["required"] if name in out["properties"]]
    return out


def public_tool(spec: dict[str, Any]) -> dict[str, Any]:
    """A tool spec as exports show it: secret-named properties (``api_key``…) left out of
    its schema – and so of ``required`` – as they are left out of the calls' arguments."""
    public: dict[str, Any] = _consistent(strip_secrets(spec))  # a dict stays a dict
    return public


def _specs(records: list[TraceRecord]) -> dict[str, dict[str, Any]]:
    by_name: dict[str, dict[str, Any]] = {}
    for record in records:
        for spec in record.get("tools") or []:
            by_name[str((spec.get("function") or {}).get("name"))] = public_tool(spec)
    return by_name


def _tools(
    records: list[TraceRecord], messages: list[dict[str, Any]], known: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The tools offered in the turn, plus those other agents called in its context (so
    every call in the sample names a described tool)."""
    tools = _specs(records)
    for message in messages:
        for call in message.get("tool_calls") or []:
            name = call["function"]["name"]
            if name not in tools and name in known:
                tools[name] = known[name]
    return list(tools.values())


def _answers(reply: Message, rest: list[Message]) -> list[Message]:
    """The tool messages in ``rest`` that answer ``reply``'s calls, when all of them are
    there: a sample ends on an assistant message or on a complete tool exchange (a turn
    that ends by handing off ends with the handoff's result)."""
    ids = [str(c.get("id")) for c in reply.get("tool_calls") or []]
    found = {
        str(m.get("tool_call_id")): m
        for m in rest
        if m.get("role") == "tool" and str(m.get("tool_call_id")) in ids
    }
    return [found[i] for i in ids] if ids and len(found) == len(ids) else []


def _turn_sample(
    run: Run,
    agent: str,
    turn: str,
    records: list[TraceRecord],
    known: dict[str, dict[str, Any]],
) -> ChatSample | None:
    messages = cast(list[Message], run.messages)  # the state's messages, as they are
    last = records[-1]

    def mine(m: Message) -> bool:
        return m.get("_agent") == agent and m.get("_turn") == turn

    if last.get("prompt_turn"):  # a private turn: the turn's own messages are the whole view
        view = [m for m in messages if m.get("_turn") == turn]
        ends = [i for i, m in enumerate(view) if m.get("role") == "assistant"]
        if not ends:
            return None
        view = view[: ends[-1] + 1] + _answers(view[ends[-1]], view[ends[-1] + 1 :])
    else:
        n = int(last.get("n_messages", 0))
        at = next(
            (
                i
                for i in range(n, len(messages))
                if messages[i].get("role") == "assistant" and mine(messages[i])
            ),
            None,
        )
        if at is None:
            return None
        reply = messages[at]
        view = [*messages[:n], reply, *_answers(reply, messages[at + 1 :])]
    own = [m.get("role") == "assistant" and mine(m) for m in view]
    out = [public(m) for m in view]
    system = last.get("system_prompt")
    if system is not None:
        out.insert(0, {"role": "system", "content": str(system)})
        own.insert(0, False)
    tools = _tools(records, out, known)
    return ChatSample(messages=out, own=own, tools=tools, agent=agent, turn=turn, run=run)


def chat_samples(run: Run, *, per: str = "episode", agent: str | None = None) -> list[ChatSample]:
    """The run's chat samples: its episode sample, or one per agent turn (``per="turn"``).

    ``agent`` keeps only that agent's turns.
    """
    if per not in ("episode", "turn"):
        raise ValueError(f"per={per!r}: use 'episode' or 'turn'")
    turns: dict[tuple[str, str], list[TraceRecord]] = {}
    answered: tuple[str, str] | None = None
    latest: tuple[str, str] | None = None
    for record in cast(list[TraceRecord], run.trace):  # the state's trace, as it is
        if record.get("kind") != "llm" or not record.get("turn"):
            continue
        latest = (str(record.get("agent")), str(record["turn"]))
        turns.setdefault(latest, []).append(record)
        if not record.get("tool_calls"):
            answered = latest
    if per == "episode":
        final = answered or latest
        keys = [final] if final is not None else []
    else:
        keys = list(turns)
    known = _specs([r for records in turns.values() for r in records])
    samples = []
    for key in keys:
        if agent is not None and key[0] != agent:
            continue
        sample = _turn_sample(run, key[0], key[1], turns[key], known)
        if sample is not None:
            samples.append(sample)
    return samples


def start_prompt(run: Run) -> list[dict[str, Any]] | None:
    """What the run's first agent turn started from (system prompt + task), or ``None``."""
    samples = chat_samples(run, per="turn")
    return samples[0].split()[0] if samples else None
