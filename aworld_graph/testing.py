"""Model fakes for tests – public API, like pydantic-ai's ``FunctionModel``/``TestModel``.

* :class:`FunctionModel` – a function decides each reply from the messages and tools.
* :class:`ScriptedModel` – replies from a list, in order; raises on an unexpected extra call
  and reports unconsumed steps.
* :func:`block_remote_models` – makes any call to a non-loopback model endpoint fail.

Replies may be given as a string (text), :func:`tool_call` / a list of them (tool calls), a
:class:`~aworld_graph.model.ModelResponse`, or an exception instance to raise.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .errors import UnexpectedModelCall
from .model import ModelProfile, ModelResponse, TokenCallback, ToolCall, Usage

__all__ = [
    "FunctionModel",
    "ModelCall",
    "Reply",
    "ScriptedModel",
    "block_remote_models",
    "text",
    "tool_call",
]

Reply = str | ToolCall | list[ToolCall] | ModelResponse | BaseException
ReplyFn = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Reply | Awaitable[Reply]]

_ids = iter(range(1, 1 << 62))


def tool_call(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
) -> ToolCall:
    """A tool call reply; ``arguments`` as a dict (encoded to JSON) or raw text (kept as is)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id=id or f"call_{next(_ids)}", name=name, arguments=raw)


def text(content: str) -> ModelResponse:
    """A plain text reply."""
    return ModelResponse(content=content, finish_reason="stop")


def _as_response(reply: Reply, name: str) -> ModelResponse:
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, ModelResponse):
        response = reply
    elif isinstance(reply, str):
        response = text(reply)
    elif isinstance(reply, ToolCall):
        response = ModelResponse(tool_calls=[reply], finish_reason="tool_calls")
    elif isinstance(reply, list) and all(isinstance(c, ToolCall) for c in reply):
        response = ModelResponse(tool_calls=list(reply), finish_reason="tool_calls")
    else:
        raise TypeError(f"{name}: cannot turn {reply!r} into a model reply")
    if not response.model:
        response.model = name
    if response.usage.total_tokens == 0:
        prompt = 10
        completion = max(1, len(response.content) // 4) + 5 * len(response.tool_calls)
        response.usage = Usage(
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
        )
    if not response.raw:
        response.raw = {"model": response.model, "fake": True}
    return response


@dataclass(kw_only=True)
class ModelCall:
    """What a fake model was asked: the messages and tool schemas of one call."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    tool_choice: str | None = None
    """The ``tool_choice`` sent with the call (``None``: the endpoint's default)."""

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]


@dataclass
class FunctionModel:
    """A model whose replies come from ``fn(messages, tools)`` (sync or async)."""

    fn: ReplyFn
    name: str = "function-model"
    profile: ModelProfile = field(default_factory=ModelProfile)
    calls: list[ModelCall] = field(default_factory=list)
    """Every call received, in order."""

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        tool_choice: str | None = None,
        on_token: TokenCallback | None = None,
    ) -> ModelResponse:
        msgs, specs = [dict(m) for m in messages], list(tools or [])
        self.calls.append(ModelCall(messages=msgs, tools=specs, tool_choice=tool_choice))
        reply = self.fn(msgs, specs)
        if inspect.isawaitable(reply):
            reply = await reply
        response = _as_response(reply, self.name)
        if on_token is not None and response.content:
            on_token(response.content)
        return response


class ScriptedModel(FunctionModel):
    """A model that gives scripted replies in order (a reply may also be a ``fn(messages, tools)``).

    An extra call raises :class:`~aworld_graph.errors.UnexpectedModelCall`;
    :meth:`assert_consumed` fails if scripted replies were never asked for.
    """

    def __init__(
        self,
        replies: Sequence[Reply | ReplyFn],
        *,
        name: str = "scripted-model",
        profile: ModelProfile | None = None,
    ) -> None:
        super().__init__(fn=self._scripted, name=name, profile=profile or ModelProfile())
        self._replies = list(replies)
        self._next = 0

    @property
    def remaining(self) -> int:
        """Scripted replies not yet used."""
        return len(self._replies) - self._next

    def assert_consumed(self) -> None:
        """Raise if some scripted replies were never used."""
        if self.remaining:
            left = self._replies[self._next :]
            raise AssertionError(f"{self.name}: {self.remaining} scripted replies unused: {left!r}")

    def _scripted(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if self._next >= len(self._replies):
            last = messages[-1] if messages else {}
            raise UnexpectedModelCall(
                f"{self.name}: call {len(self.calls)} was not scripted (only "
                f"{len(self._replies)} replies); last message: {str(last)[:200]}"
            )
        reply = self._replies[self._next]
        self._next += 1
        if callable(reply) and not isinstance(reply, BaseException):
            return reply(messages, tools)
        return reply


@contextmanager
def block_remote_models() -> Iterator[None]:
    """Within the block (and in child processes), only loopback model endpoints may be called."""
    old = os.environ.get("AWORLD_GRAPH_BLOCK_REMOTE")
    os.environ["AWORLD_GRAPH_BLOCK_REMOTE"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("AWORLD_GRAPH_BLOCK_REMOTE", None)
        else:
            os.environ["AWORLD_GRAPH_BLOCK_REMOTE"] = old
