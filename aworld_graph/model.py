"""Chat models: one interface for every node, one real implementation on ``openai``.

:class:`OpenAIModel` talks to any OpenAI-compatible endpoint (OpenAI, vLLM, a llama.cpp
server) through ``openai.AsyncOpenAI``; the client's own retry loop handles 429, 5xx and
timeouts with exponential backoff. A 200 whose body is not a chat completion (an HTML page
from a proxy, truncated JSON) is retried the same way, then raised as :class:`ModelError`
naming the endpoint. A reply longer than ``max_output_chars`` is refused with a
:class:`ModelError` (a runaway generation would otherwise be stored in every checkpoint
after it). Each call is captured as a :class:`ModelResponse` with the tool calls, usage,
latency, the raw response and what went wrong with the attempts that were retried (the
unusable bodies, and the HTTP error statuses the client retried), which the LLM call's trace
record keeps.

The fakes :class:`~aworld_graph.testing.FunctionModel` and
:class:`~aworld_graph.testing.ScriptedModel` implement the same :class:`ChatModel` protocol.
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit

import httpx
import openai

from .errors import ModelError, UnexpectedModelCall
from .secrets import register_secret, scrub_text

__all__ = [
    "ChatModel",
    "ModelProfile",
    "ModelResponse",
    "OpenAIModel",
    "ToolCall",
    "Usage",
    "recording_tokens",
    "sampling_temperature",
    "sampling_temperature_now",
]

TokenCallback = Callable[[str], None]

MAX_OUTPUT_CHARS = 1_000_000
"""Default cap on one reply's text plus tool-call arguments (characters)."""
RETRY_BASE_S = 0.5
"""First backoff before retrying an unusable 200 reply; doubles per retry (as ``openai``)."""

_SAMPLING_TEMPERATURE: ContextVar[float | None] = ContextVar(
    "aworld_graph_sampling_temperature", default=None
)
_RECORD_TOKENS: ContextVar[bool] = ContextVar("aworld_graph_record_tokens", default=False)
_RETRIED: ContextVar[list[str] | None] = ContextVar("aworld_graph_retried", default=None)
"""The notes of the model call in progress: what went wrong with each attempt so far."""


@contextmanager
def sampling_temperature(value: float | None) -> Iterator[None]:
    """Within this block (and the tasks started in it), every OpenAI-compatible model call,
    the embedded model's included, samples at ``value`` instead of its configured
    temperature. ``None`` changes nothing. Used by :func:`aworld_graph.rollout.rollout`."""
    token = _SAMPLING_TEMPERATURE.set(value)
    try:
        yield
    finally:
        _SAMPLING_TEMPERATURE.reset(token)


@contextmanager
def recording_tokens(on: bool = True) -> Iterator[None]:
    """Within this block, OpenAI-compatible model calls ask for the sampled token ids and
    their logprobs (``logprobs=true``, and vLLM's ``return_token_ids`` except at
    api.openai.com, which refuses unknown fields) and return them in
    :attr:`ModelResponse.tokens`. Set by an agent whose ``AgentConfig.record_tokens`` is on.

    vLLM reads ``return_token_ids``; llama.cpp's server and vLLM before it had the field
    ignore it (they answer without ids). An endpoint that refuses unknown fields (HTTP 400
    or 422: OpenAI, Gemini's and Mistral's APIs) gets the request again without it; when that
    succeeds the tokens record says the field was refused, and the model object sends it no
    more."""
    token = _RECORD_TOKENS.set(on)
    try:
        yield
    finally:
        _RECORD_TOKENS.reset(token)


def sampling_temperature_now() -> float | None:
    """The temperature a :func:`sampling_temperature` block in force sets (``None``: none)."""
    return _SAMPLING_TEMPERATURE.get()


@dataclass(kw_only=True, frozen=True)
class ToolCall:
    """A tool call the model asked for. ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(kw_only=True)
class Usage:
    """Token counts of one call (zeros when the endpoint does not report them)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(kw_only=True)
class ModelResponse:
    """One model reply, as captured for the trajectory."""

    content: str = ""
    """The text of the reply (``""`` when the model only called tools)."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Tool calls, in the order the model wrote them."""
    usage: Usage = field(default_factory=Usage)
    """Token counts."""
    model: str = ""
    """Model name the endpoint reported."""
    latency_ms: float = 0.0
    """Wall time of the call, retries included."""
    finish_reason: str | None = None
    """Why generation stopped (``stop``, ``tool_calls``, ``length``…)."""
    raw: dict[str, Any] = field(default_factory=dict)
    """The endpoint's response as JSON (for streams: the assembled reply)."""
    retried: list[str] = field(default_factory=list)
    """What went wrong with each attempt that was retried before this reply, oldest first
    (``HTTP 502 Bad Gateway``, ``an HTML page: '<html>…'``…); empty when the first answered."""
    tokens: dict[str, Any] | None = None
    """Only when tokens were asked for (:func:`recording_tokens`): what the endpoint sampled,
    ``{"prompt_ids", "completion_ids", "logprobs", "tokenizer"}`` (plus ``mask`` and
    ``text_span`` from the embedded model), or ``{"available": False, "reason"}`` when it
    returned no token ids (with its ``logprobs`` where it gave those). Never re-tokenized."""


@dataclass(kw_only=True, frozen=True)
class ModelProfile:
    """How to talk to a particular model. Small local models need help with tools."""

    tool_results: Literal["native", "text"] = "native"
    """``native``: tool results are ``role=tool`` messages. ``text``: the conversation is
    rewritten so tool calls and results read as plain text, and tools are offered again only
    when the model has not used one yet (for endpoints with weak tool-calling)."""
    tools_once: bool = False
    """Offer tools only until one has answered in this turn, so the next call replies (implied
    by ``tool_results="text"``; the embedded model, whose chat handler renders native tool
    messages in its own format, sets it alone)."""
    repeat_guard: bool = True
    """Answer a repeated identical tool call from the earlier result, with a nudge to answer."""
    tool_choice: str | None = None
    """``tool_choice`` sent whenever tools are offered (llama.cpp needs ``"auto"`` to call any)."""


@runtime_checkable
class ChatModel(Protocol):
    """What every node needs of a model."""

    name: str
    profile: ModelProfile

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        tool_choice: str | None = None,
        on_token: TokenCallback | None = None,
    ) -> ModelResponse:
        """Send the conversation (OpenAI message format), return the reply."""
        ...


async def _close_at_shutdown(client: openai.AsyncOpenAI) -> AsyncIterator[None]:
    """Suspended until its loop shuts down its async generators; then closes ``client``."""
    try:
        yield
    finally:
        await client.close()


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process: building one loads the system's certificates, too dear
    to repeat for every client."""
    return ssl.create_default_context()


_LOOPBACK = ("127.", "localhost", "[::1]", "::1")


def remote_calls_blocked() -> bool:
    """True when ``AWORLD_GRAPH_BLOCK_REMOTE`` is set (the test suite sets it)."""
    return os.environ.get("AWORLD_GRAPH_BLOCK_REMOTE", "") not in ("", "0", "false")


def _check_endpoint(base_url: str | None) -> None:
    if not remote_calls_blocked():
        return
    host = urlsplit(base_url or "https://api.openai.com/v1").hostname or ""
    if not host.startswith(_LOOPBACK):
        raise UnexpectedModelCall(
            f"a model call to {base_url or 'api.openai.com'} was blocked: "
            "AWORLD_GRAPH_BLOCK_REMOTE is set, so only 127.0.0.1 endpoints, FunctionModel and "
            "ScriptedModel may be used"
        )


def _clean_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Endpoint-safe copies: ``content`` never null (llama.cpp rejects it), no private keys."""
    out = []
    for message in messages:
        m = {k: v for k, v in message.items() if not k.startswith("_")}
        if m.get("content") is None:
            m["content"] = ""
        out.append(m)
    return out


class OpenAIModel:
    """A chat model behind any OpenAI-compatible endpoint."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
        max_retries: int = 3,
        timeout: float = 120.0,
        params: dict[str, Any] | None = None,
        profile: ModelProfile | None = None,
        client: openai.AsyncOpenAI | None = None,
        max_output_chars: int = MAX_OUTPUT_CHARS,
    ) -> None:
        self.name = model
        self.max_output_chars = max_output_chars
        """Longest reply (text plus tool-call arguments) accepted; longer is a ModelError."""
        self.max_retries = max_retries
        self.base_url = base_url
        self.temperature = temperature
        self.params = dict(params or {})
        self.profile = profile or ModelProfile()
        self._own_client = client is None
        self._client = client
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._keeper: AsyncIterator[None] | None = None
        self._token_ids_refused: str | None = None
        """What the endpoint answered to ``return_token_ids`` (HTTP 400/422) when a request
        without it then succeeded; later calls leave the field out."""
        register_secret(api_key)  # an endpoint may echo it into an error message
        self._client_args: dict[str, Any] = {
            "api_key": api_key or "not-needed",
            "base_url": base_url,
            "max_retries": max_retries,
            "timeout": timeout,
        }

    async def _current_client(self) -> openai.AsyncOpenAI:
        """The client for the running event loop (``sync_run`` starts a new loop each time).

        The client lives as long as its loop: an async generator registered with the loop closes
        it when the loop shuts down (``asyncio.run`` and pytest-asyncio call
        ``loop.shutdown_asyncgens()``), so runs reuse one connection pool.
        """
        if not self._own_client:
            assert self._client is not None
            return self._client
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            http = openai.DefaultAsyncHttpxClient(
                verify=_ssl_context(), event_hooks={"response": [_note_error_status]}
            )
            self._client = openai.AsyncOpenAI(http_client=http, **self._client_args)
            self._client_loop = loop
            self._keeper = _close_at_shutdown(self._client)
            await self._keeper.__anext__()
        return self._client

    async def aclose(self) -> None:
        """Close the connection pool this model opened in the running loop."""
        if self._own_client and self._client is not None:
            if self._client_loop is asyncio.get_running_loop():
                await self._client.close()
            self._client = None
            self._client_loop = None

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        tool_choice: str | None = None,
        on_token: TokenCallback | None = None,
    ) -> ModelResponse:
        _check_endpoint(self.base_url)
        kwargs: dict[str, Any] = {"model": self.name, "messages": _clean_messages(messages)}
        if tools:
            kwargs["tools"] = list(tools)
            if tool_choice:
                kwargs["tool_choice"] = tool_choice
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        kwargs.update(self.params)
        if (override := _SAMPLING_TEMPERATURE.get()) is not None:
            kwargs["temperature"] = override
        want_tokens = _RECORD_TOKENS.get()
        if want_tokens:
            kwargs["logprobs"] = True
            if "api.openai.com" not in self._where() and self._token_ids_refused is None:
                kwargs["extra_body"] = {**kwargs.get("extra_body", {}), "return_token_ids": True}
        started = time.perf_counter()
        attempt = 0
        retried: list[str] = []
        refused: str | None = None
        notes = _RETRIED.set(retried)
        try:
            while True:
                try:
                    response = await self._call(kwargs, on_token)
                    break
                except _TokenIdsRefused as answer:
                    refused = str(answer)
                    extra = {
                        k: v for k, v in kwargs["extra_body"].items() if k != "return_token_ids"
                    }
                    kwargs = {**kwargs, "extra_body": extra}
                except _Unusable as bad:
                    if attempt >= self.max_retries:
                        raise ModelError(
                            f"model endpoint {self._where()} answered model {self.name!r} with "
                            f"a body that is not a chat completion ({bad}; {attempt + 1} "
                            "attempt(s)); check LLM_BASE_URL (it must be the OpenAI-compatible "
                            "/v1 URL, not a web page or proxy) or the server's log"
                        ) from None
                    retried.append(str(bad))
                    await asyncio.sleep(RETRY_BASE_S * 2**attempt)
                    attempt += 1
        finally:
            _RETRIED.reset(notes)
        if refused is not None:  # the same request without the field was answered
            self._token_ids_refused = refused
        response.latency_ms = (time.perf_counter() - started) * 1000
        response.retried = retried
        if want_tokens:
            response.tokens = take_tokens(
                response.raw, response.model or self.name, self._where(), self._token_ids_refused
            )
        return response

    def _where(self) -> str:
        return self.base_url or "api.openai.com"

    async def _call(self, kwargs: dict[str, Any], on_token: TokenCallback | None) -> ModelResponse:
        """One request (with the client's own retries); an unusable body raises _Unusable."""
        try:
            if on_token is not None:
                response = await self._stream(kwargs, on_token)
            else:
                completion = await (await self._current_client()).chat.completions.create(**kwargs)
                if isinstance(completion, str):  # openai hands back a non-JSON body as is
                    raise _Unusable(f"{_content_kind(completion)}: {_short(completion, 120)!r}")
                if not isinstance(getattr(completion, "choices", None), list):
                    shown = _short(str(completion.model_dump(mode="json")), 120)
                    raise _Unusable(f"JSON without choices: {shown!r}")
                self._check_size(
                    sum(
                        len(c.message.content or "")
                        + sum(len(t.function.arguments or "") for t in c.message.tool_calls or [])
                        for c in completion.choices
                        if c.message is not None
                    )
                )
                response = _from_completion(completion)
        except (ValueError, openai.APIResponseValidationError) as exc:  # JSONDecodeError included
            doc = getattr(exc, "doc", None)
            shown = f": {_short(doc, 120)!r}" if isinstance(doc, str) else ""
            raise _Unusable(f"{type(exc).__name__}: {_short(str(exc), 120)}{shown}") from None
        except openai.APIStatusError as exc:
            if exc.status_code in (400, 422) and (kwargs.get("extra_body") or {}).get(
                "return_token_ids"
            ):
                raise _TokenIdsRefused(f"HTTP {exc.status_code}: {_short(exc.message)}") from exc
            raise ModelError(
                f"model endpoint {self._where()} answered HTTP "
                f"{exc.status_code} for model {self.name!r}: {_short(exc.message)}; "
                "check LLM_BASE_URL / LLM_MODEL_NAME / the key, or the server's log"
            ) from exc
        except openai.APITimeoutError as exc:
            raise ModelError(
                f"model endpoint {self._where()} timed out after retries; "
                "raise AgentConfig.timeout or check the server"
            ) from exc
        except openai.APIConnectionError as exc:
            raise ModelError(
                f"cannot reach model endpoint {self._where()}: "
                f"{_short(str(exc.__cause__ or exc))}; is the server running?"
            ) from exc
        return response

    def _check_size(self, chars: int) -> None:
        if chars > self.max_output_chars:
            raise ModelError(
                f"model {self.name!r} at {self._where()} answered with more than "
                f"{self.max_output_chars:,} characters ({chars:,}); the reply was refused, not "
                "stored. Limit the reply (max_tokens in AgentConfig.params) or raise "
                "OpenAIModel(max_output_chars=...)"
            )

    async def _stream(self, kwargs: dict[str, Any], on_token: TokenCallback) -> ModelResponse:
        kwargs = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}
        stream = await (await self._current_client()).chat.completions.create(**kwargs)
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage = Usage()
        model = self.name
        finish: str | None = None
        size = 0
        chunks = 0
        sampled: dict[str, Any] = {}  # token ids and logprobs, as the chunks bring them
        async for chunk in stream:
            chunks += 1
            model = chunk.model or model
            if chunk.usage is not None:
                usage = _usage(chunk.usage)
            if (chunk.model_extra or {}).get("prompt_token_ids") is not None:
                sampled["prompt_token_ids"] = (chunk.model_extra or {})["prompt_token_ids"]
            for choice in chunk.choices:
                delta = choice.delta
                finish = choice.finish_reason or finish
                _gather_sampled(sampled, choice)
                if delta.content:
                    text.append(delta.content)
                    size += len(delta.content)
                    on_token(delta.content)
                for tc in delta.tool_calls or []:
                    slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = tc.id or slot["id"]
                    if tc.function is not None:
                        slot["name"] += tc.function.name or ""
                        slot["arguments"] += tc.function.arguments or ""
                        size += len(tc.function.arguments or "")
                if size > self.max_output_chars:
                    await stream.close()
                    self._check_size(size)
        if not chunks:
            raise _Unusable("a stream without a single completion chunk (not server-sent events)")
        tool_calls = [
            ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
            for i, c in sorted(calls.items())
        ]
        content = "".join(text)
        raw = {
            "model": model,
            "choices": [
                {
                    "finish_reason": finish,
                    "message": {
                        "role": "assistant",
                        "content": content,
                        "tool_calls": [_openai_call(c) for c in tool_calls] or None,
                    },
                }
            ],
            "usage": usage.as_dict(),
            "stream": True,
        }
        if "prompt_token_ids" in sampled:
            raw["prompt_token_ids"] = sampled.pop("prompt_token_ids")
        first: dict[str, Any] = raw["choices"][0]  # type: ignore[index]
        first.update(sampled)
        return ModelResponse(
            content=content,
            tool_calls=tool_calls,
            usage=usage,
            model=model,
            finish_reason=finish,
            raw=raw,
        )


def _gather_sampled(into: dict[str, Any], choice: Any) -> None:
    """Add a stream chunk's token ids, logprobs and the embedded model's token notes."""
    extra = choice.model_extra or {}
    if isinstance(extra.get("token_ids"), list):
        into.setdefault("token_ids", []).extend(extra["token_ids"])
    if isinstance(extra.get("aworld_tokens"), dict):
        into["aworld_tokens"] = extra["aworld_tokens"]
    content = getattr(choice.logprobs, "content", None) if choice.logprobs else None
    if content:
        logprobs = into.setdefault("logprobs", {"content": []})
        logprobs["content"].extend(c.model_dump(mode="json") for c in content)


def take_tokens(
    raw: dict[str, Any], model: str, where: str, refused: str | None = None
) -> dict[str, Any]:
    """The sampled tokens of a reply, taken out of ``raw`` (which keeps the rest): vLLM's
    ``prompt_token_ids`` and the choice's ``token_ids``, the logprob of each sampled token
    (OpenAI's ``logprobs.content``) and the embedded model's ``aworld_tokens`` notes (its
    tokenizer, which tokens it sampled, where the stored text lies in the decoded ids).

    Without token ids the result says so (``available: False`` and why: ``refused`` is what
    the endpoint answered to ``return_token_ids``, if it refused the field), keeping the
    logprobs an endpoint gave: nothing is re-tokenized and presented as sampled."""
    choices = raw.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    prompt_ids = raw.pop("prompt_token_ids", None)
    ids = choice.pop("token_ids", None)
    notes = choice.pop("aworld_tokens", None) or {}
    content = (choice.pop("logprobs", None) or {}).get("content") or []
    logprobs = [float(c.get("logprob", 0.0)) for c in content if isinstance(c, dict)]
    if not isinstance(prompt_ids, list) or not isinstance(ids, list):
        told = "logprobs but no token ids" if logprobs else "no token ids"
        if refused is not None:
            told += f" (it refused the request field return_token_ids: {refused})"
        out: dict[str, Any] = {
            "available": False,
            "reason": f"the endpoint {where} (model {model!r}) returned {told}; serve the model "
            "with vLLM (which returns them for return_token_ids) or the embedded model",
        }
        if logprobs:
            out["logprobs"] = logprobs
        return out
    if len(logprobs) != len(ids):
        return {
            "available": False,
            "reason": f"the endpoint {where} (model {model!r}) returned {len(ids)} token ids "
            f"but {len(logprobs)} logprobs; they cannot be paired",
        }
    out = {
        "prompt_ids": [int(t) for t in prompt_ids],
        "completion_ids": [int(t) for t in ids],
        "logprobs": [round(x, 6) for x in logprobs],
        "tokenizer": str(notes.get("tokenizer") or model),
    }
    for key in ("mask", "text_span"):
        if key in notes:
            out[key] = notes[key]
    return out


async def _note_error_status(response: httpx.Response) -> None:
    """An httpx response hook: an attempt answered with an error status, which the client
    retries (429, 5xx) or the call raises; kept in the notes of the call in progress."""
    notes = _RETRIED.get()
    if notes is not None and response.status_code >= 400:
        notes.append(f"HTTP {response.status_code} {response.reason_phrase}".strip())


class _Unusable(Exception):
    """A 200 reply whose body is not a chat completion; retried, then a ModelError."""


class _TokenIdsRefused(Exception):
    """HTTP 400/422 to a request with ``return_token_ids``; sent again without the field."""


def _content_kind(body: object) -> str:
    text = str(body).lstrip()[:200].lower()
    return "an HTML page" if text.startswith(("<!doctype", "<html", "<")) else "not JSON"


def _short(text: str, limit: int = 300) -> str:
    """One line of at most ``limit`` characters, secrets replaced (an endpoint may echo a key)."""
    text = scrub_text(" ".join(text[: limit * 4].split()))
    return text if len(text) <= limit else text[:limit] + "…"


def _usage(u: Any) -> Usage:
    return Usage(
        prompt_tokens=getattr(u, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(u, "completion_tokens", 0) or 0,
        total_tokens=getattr(u, "total_tokens", 0) or 0,
    )


def _openai_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _from_completion(completion: Any) -> ModelResponse:
    if not completion.choices:
        raise ModelError(
            f"model {completion.model!r} returned no choices; the endpoint may not support "
            "chat completions for this model"
        )
    choice = completion.choices[0]
    message = choice.message
    calls = [
        ToolCall(
            id=tc.id or f"call_{i}",
            name=tc.function.name if tc.function else "",
            arguments=(tc.function.arguments or "") if tc.function else "",
        )
        for i, tc in enumerate(message.tool_calls or [])
    ]
    return ModelResponse(
        content=message.content or "",
        tool_calls=calls,
        usage=_usage(completion.usage) if completion.usage else Usage(),
        model=completion.model or "",
        finish_reason=choice.finish_reason,
        raw=completion.model_dump(mode="json", exclude_none=True),
    )
