"""A LangGraph application that calls tools: a scripted chat model (no network) that streams a
tool call's arguments in chunks, LangGraph's ``ToolNode`` (tool errors become tool messages)
and ``tools_condition``. It imports only LangChain and LangGraph, so ``langgraph dev`` serves
the same file (copied into its project) in the side-by-side tests.

The user says ``"<tool> <a> <b>"`` (``add`` or ``divide``); the model calls that tool with
``{"a": a, "b": b}`` (call id ``call-1``), then answers ``"the tool said: <result>"``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessageChunk,
    BaseMessage,
    ToolMessage,
    message_chunk_to_message,
)
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolCallTransformer, ToolNode, tools_condition

__all__ = ["ScriptedToolModel", "add", "divide", "tooled", "untold"]


@tool
def add(a: int, b: int) -> int:
    """Adds ``a`` and ``b``."""
    return a + b


@tool
def divide(a: int, b: int) -> float:
    """Divides ``a`` by ``b`` (raises when ``b`` is 0)."""
    return a / b


class ScriptedToolModel(BaseChatModel):
    """Calls the tool the last user message names, then answers with the tool's result."""

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-model"

    def _chunks(self, messages: list[BaseMessage]) -> list[AIMessageChunk]:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            words = ["the", " tool", " said: ", str(last.content)]
            return [AIMessageChunk(content=w) for w in words]
        name, a, b = re.split(r"\s+", str(last.content).strip())[:3]
        head = tool_call_chunk(name=name, args='{"a": ' + a + ", ", id="call-1", index=0)
        tail = tool_call_chunk(name=None, args='"b": ' + b + "}", id=None, index=0)
        return [AIMessageChunk(content="", tool_call_chunks=[p]) for p in (head, tail)]

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        # the last chunk is empty, as a provider's often is: it marks the message's end
        for chunk in [*self._chunks(messages), AIMessageChunk(content="", chunk_position="last")]:
            generation = ChatGenerationChunk(message=chunk)
            if run_manager:
                run_manager.on_llm_new_token(str(chunk.content), chunk=generation)
            yield generation

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        whole = AIMessageChunk(content="")
        for chunk in self._chunks(messages):
            whole = whole + chunk
        return ChatResult(generations=[ChatGeneration(message=message_chunk_to_message(whole))])


async def agent(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await ScriptedToolModel().ainvoke(state["messages"])]}


_builder = (
    StateGraph(MessagesState)
    .add_node("agent", agent)
    .add_node("tools", ToolNode([add, divide], handle_tool_errors=True))
    .add_edge(START, "agent")
    .add_conditional_edges("agent", tools_condition)
    .add_edge("tools", "agent")
)
tooled = _builder.compile(transformers=[ToolCallTransformer])
"""``agent`` → ``tools`` → ``agent``: one tool call, then the answer. Compiled with
LangGraph's ``ToolCallTransformer``, so a thread stream sends its tool calls on ``tools``."""
untold = _builder.compile()
"""The same graph without it: LangGraph's server sends no ``tools`` events for its runs."""
