"""An agent's LLM node: one model call, from the prompt to the state update.

The prompt is the agent's system prompt, its demos (turns of their own) and the conversation
it sees: the whole shared one, or – for a private turn of a workflow agent – only that turn's
messages, which start from the task input and the outputs of earlier nodes. The update
appends the assistant message and one ``llm`` trace record (with ``retried``: what went
wrong with the attempts the model retried, when it did); a reply without tool calls is
the agent's answer. A step limit reached instead stops the run with a ``limit`` record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig

from .. import tracing
from ..model import ChatModel, ModelResponse, recording_tokens
from ..records import Message, TraceRecord, compact_prompt_ids
from ..state import SwarmState
from ._messages import (
    answer_stopped_calls,
    assistant_message,
    demo_messages,
    public_messages,
    render_as_text,
    tool_used_this_turn,
    turn_input,
)
from ._tools import AgentTools
from ._turns import current_turn, emit, limit_reached, step_of

__all__ = ["llm_step"]


async def llm_step(
    tools: AgentTools,
    model: ChatModel,
    state: SwarmState,
    config: RunnableConfig,
    *,
    private: bool,
) -> dict[str, Any]:
    """The state update of one model call of ``tools.agent`` (see the module docstring)."""
    name, step = tools.name, step_of(config)
    limit = limit_reached(tools.agent, state, config)
    if limit is not None:
        stopped: TraceRecord = {
            "kind": "limit",
            "at": time.time(),
            "node": name,
            "agent": name,
            "step": step,
            "error": limit,
        }
        return {
            "status": "max_steps",
            "error": limit
            + "; raise max_steps (Agent.max_steps or TaskConfig.max_steps) and run again",
            "trace": stopped,
        }
    history = state.get("messages", [])
    turn, new_turn = current_turn(name, history)
    added: list[Message] = []
    if private:
        if new_turn:
            added.append(
                {"role": "user", "content": turn_input(name, state), "_agent": name, "_turn": turn}
            )
        conversation = [m for m in history if m.get("_turn") == turn] + added
    else:
        conversation = history
    conversation = answer_stopped_calls(public_messages(conversation))
    text_mode = model.profile.tool_results == "text"
    prompt: list[Message] = [{"role": "system", "content": tools.agent.system_prompt}]
    # examples are turns of their own; their tool calls stay tool-call messages, which the
    # model's chat template shows as it shows a call (text mode rewrites the conversation only:
    # a call rewritten as assistant text would teach a text reply)
    prompt += demo_messages(tools.agent.demos)
    prompt += render_as_text(conversation) if text_mode else conversation
    specs = await tools.specs()
    answered = tool_used_this_turn(conversation)
    choice = "auto" if answered else tools.agent.tool_choice
    once = text_mode or model.profile.tools_once
    offer = bool(specs) and choice != "none" and not (once and answered)
    on_token: Callable[[str], None] | None = None
    if (config.get("configurable") or {}).get("stream_tokens"):

        def on_token(text: str) -> None:
            emit({"event": "token", "agent": name, "text": text})

    record_tokens = tools.agent.conf is not None and tools.agent.conf.record_tokens
    emit({"event": "llm_start", "agent": name, "prompt": [dict(m) for m in prompt]})
    with recording_tokens(record_tokens):
        response: ModelResponse = await tracing.model_call(
            model,
            prompt,
            [s.openai() for s in specs] if offer else None,
            tool_choice=(choice if choice == "required" else model.profile.tool_choice)
            if offer
            else None,
            on_token=on_token,
        )
    message: Message = {**assistant_message(response), "_agent": name, "_turn": turn}
    record: TraceRecord = {
        "kind": "llm",
        "at": time.time(),
        "node": name,
        "agent": name,
        "step": step,
        "turn": turn,
        "model": response.model or model.name,
        "usage": response.usage.as_dict(),
        "latency_ms": round(response.latency_ms, 3),
        "finish_reason": response.finish_reason,
        "content": response.content,
        "tool_calls": [c.as_dict() for c in response.tool_calls],
        "n_messages": len(history) + len(added),
        "prompt_turn": turn if private else None,
        "system_prompt": tools.agent.system_prompt,
        "tools": [s.openai() for s in specs] if offer else [],
        "raw": response.raw,
    }
    if response.retried:
        record["retried"] = list(response.retried)
    if record_tokens and response.tokens:
        # a multi-turn prompt repeats the agent's previous call: stored by reference to it
        record["tokens"] = compact_prompt_ids(response.tokens, state.get("trace") or [], name)
    elif record_tokens:
        record["tokens"] = {
            "available": False,
            "reason": f"model {model.name!r} ({type(model).__name__}) returns no token ids",
        }
    _note_unavailable(tools, state, record)
    emit(
        {
            "event": "llm_call",
            "agent": name,
            "content": response.content,
            "tool_calls": record["tool_calls"],
            "usage": response.usage.as_dict(),
            "latency_ms": record["latency_ms"],
        }
    )
    update: dict[str, Any] = {
        "messages": added + [message],
        "trace": record,
        "steps": 1,
        "active_agent": name,
    }
    if not response.tool_calls:
        update["answer"] = response.content
        update["outputs"] = {name: response.content}
        update["status"] = "finished"
        emit({"event": "answer", "agent": name, "content": response.content})
    return update


def _note_unavailable(tools: AgentTools, state: SwarmState, record: TraceRecord) -> None:
    """Name the agent's left-out MCP servers in ``record``, once per run, and stream them."""
    down = tools.newly_unavailable(state.get("trace", []))
    if down:
        record["unavailable_servers"] = down
        for server, reason in down.items():
            emit(
                {
                    "event": "server_unavailable",
                    "agent": tools.name,
                    "server": server,
                    "error": reason,
                }
            )
