"""The embedded model's chat handler for llama-cpp-python (chat format ``aworld-smollm2``).

It replaces llama-cpp-python's ``chatml-function-calling``, which HTML-escaped every message,
made a text reply impossible once tools were offered and did not apply ``max_tokens`` to
tool arguments. Here:

* the prompt is SmolLM2's ChatML written by :mod:`.template`, nothing escaped;
* with tools offered (``tool_choice`` ``"auto"`` or unset), the model chooses between
  ``Use <tool>:`` and ``Reply:``: each opening is scored by its log-probability after the
  prompt and the best one is taken (sampled in proportion at a temperature above 0). A
  reply is free text after ``Reply:``; a call's arguments are generated under a grammar
  made from the tool's JSON schema;
* ``max_tokens`` caps everything generated, tool arguments included (a call cut short ends
  with ``finish_reason="length"``; without ``max_tokens`` arguments stop at
  :data:`ARGUMENT_TOKENS`);
* generation stops within a token when :data:`CANCEL` (set by the server when the client
  goes away) is set;
* nothing of the prompt machinery reaches a text reply: a label the model echoes at the
  start (``Reply:``, ``The calculator tool returned:``) is dropped, and the reply ends before
  any other (a tools-block line, a call's ``Use <tool>:``), as it would at a stop string
  (:func:`.template.scaffolding`).

One tool call per reply (the 135M model does not write parallel calls usefully).
"""

from __future__ import annotations

import contextvars
import math
import random
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import numpy as np

from .grammar import ArgumentsPlan, arguments_plan
from .template import (
    ANSWER_MARK,
    CHAT_FORMAT,
    IM_END,
    IM_START,
    call_mark,
    render,
    scaffolding,
)

__all__ = ["ARGUMENT_TOKENS", "CANCEL", "CHAT_FORMAT", "SmolChatHandler", "register"]

ARGUMENT_TOKENS = 1024
"""Cap on a tool call's argument tokens when the request sets no ``max_tokens``."""

CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "aworld_graph_generation_cancel", default=None
)
"""Set by the server per request; when the event is set, generation stops."""


def _tool_name(tool: Mapping[str, Any]) -> str:
    fn = tool.get("function", tool)
    return str(fn.get("name", "")) if isinstance(fn, Mapping) else ""


def _parameters(tool: Mapping[str, Any]) -> dict[str, Any]:
    fn = tool.get("function", tool)
    params = fn.get("parameters") if isinstance(fn, Mapping) else None
    return dict(params) if isinstance(params, Mapping) else {"type": "object", "properties": {}}


def _held_back(text: str, stops: list[str]) -> int:
    """How many characters at the end of ``text`` could start a stop string (kept back)."""
    hold = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:n]):
                hold = max(hold, n)
                break
    return hold


def _echo_length(text: str, echoes: Sequence[str]) -> int | None:
    """How many leading characters of ``text`` are an echoed label (0 if none; ``None`` while
    the text could still become one)."""
    body = text.lstrip()
    if not body:
        return None if echoes else 0
    for echo in echoes:
        if body.startswith(echo):
            return len(text) - len(body) + len(echo)
    if any(echo.startswith(body) for echo in echoes):
        return None
    return 0


def _log_softmax(logits: Any) -> Any:
    top = float(np.max(logits))
    return logits - (top + math.log(float(np.sum(np.exp(logits - top)))))


class SmolChatHandler:
    """A llama-cpp-python chat completion handler (see the module docstring)."""

    def __call__(
        self,
        *,
        llama: Any,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Any = None,
        functions: Sequence[Mapping[str, Any]] | None = None,
        function_call: Any = None,
        temperature: float = 0.2,
        top_p: float = 0.95,
        top_k: int = 40,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        stream: bool = False,
        stop: str | list[str] | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repeat_penalty: float = 1.1,
        model: str | None = None,
        grammar: Any = None,
        response_format: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        if functions and not tools:
            tools = [{"type": "function", "function": dict(f)} for f in functions]
            tool_choice = (
                {"type": "function", "function": {"name": function_call["name"]}}
                if isinstance(function_call, Mapping) and "name" in function_call
                else function_call
            )
        offered = list(tools or [])
        if tool_choice == "none":
            offered = []
        forced: str | None = None
        if isinstance(tool_choice, Mapping):
            forced = str((tool_choice.get("function") or {}).get("name", ""))
            if forced not in [_tool_name(t) for t in offered]:
                raise ValueError(f"tool_choice names {forced!r}, which is not among the tools")
        if grammar is None and response_format is not None:
            grammar = _response_grammar(response_format)
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        run = _Generation(
            llama=llama,
            messages=messages,
            tools=offered,
            forced=forced,
            required=tool_choice == "required",
            sampling={
                "temperature": temperature,
                "top_p": top_p,
                "top_k": top_k,
                "min_p": min_p,
                "typical_p": typical_p,
                "presence_penalty": presence_penalty,
                "frequency_penalty": frequency_penalty,
                "repeat_penalty": repeat_penalty,
                "seed": seed,
            },
            stops=stops,
            max_tokens=max_tokens if max_tokens and max_tokens > 0 else None,
            model=model or "",
            grammar=grammar,
            cancel=CANCEL.get(),
        )
        return run.chunks() if stream else run.completion()


def _response_grammar(response_format: Mapping[str, Any]) -> Any:
    import json

    from llama_cpp import llama_grammar

    kind = response_format.get("type")
    if kind == "json_object":
        schema = response_format.get("schema")
        if isinstance(schema, Mapping):
            return llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        return llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF, verbose=False)
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        if isinstance(schema, Mapping):
            return llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        return llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF, verbose=False)
    return None


class _Generation:
    """One chat completion: the choice between a call and a reply, then the generation."""

    def __init__(
        self,
        *,
        llama: Any,
        messages: Sequence[Mapping[str, Any]],
        tools: list[Mapping[str, Any]],
        forced: str | None,
        required: bool,
        sampling: dict[str, Any],
        stops: list[str],
        max_tokens: int | None,
        model: str,
        grammar: Any,
        cancel: threading.Event | None,
    ) -> None:
        self.llama = llama
        self.tools = tools
        self.forced = forced
        self.required = required
        self.sampling = sampling
        self.stops = stops
        self.max_tokens = max_tokens
        self.model = model
        self.grammar = grammar
        self.cancel = cancel
        self.id = "chatcmpl-" + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        prompt = render(messages, tools or None)
        self.prompt_tokens: list[int] = list(llama.tokenize(prompt.encode("utf-8"), special=True))
        self.scaffolding = scaffolding(messages, tools or None)
        """Phrases of the prompt machinery a text reply must not carry."""
        self.completion_tokens = 0
        self.decision: dict[str, float] = {}
        """log P(opening) of each option the choice compared (for tests and the log)."""
        self._prompt_logprobs: Any = None

    # the choice ---------------------------------------------------------------------------

    def _tokens(self, text: str) -> list[int]:
        return list(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _logits_after(self, tokens: list[int]) -> Any:
        """Make the context hold exactly ``tokens`` (reusing the cached prefix) and return the
        log-probabilities of the next token."""
        llama = self.llama
        cached = list(llama.input_ids[: llama.n_tokens])
        common = 0
        for a, b in zip(cached, tokens, strict=False):
            if a != b:
                break
            common += 1
        common = min(common, len(tokens) - 1)  # evaluate at least one token: fresh logits
        llama.n_tokens = common
        llama.eval(tokens[common:])
        n_vocab = llama.n_vocab()
        logits = np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(n_vocab,))
        return _log_softmax(np.array(logits, dtype=np.float64))

    def _score(self, opening: list[int]) -> float:
        """log P(opening | prompt), one token at a time."""
        total = 0.0
        if self._prompt_logprobs is None:
            self._prompt_logprobs = self._logits_after(self.prompt_tokens)
        logprobs = self._prompt_logprobs
        for i, token in enumerate(opening):
            if i:
                logprobs = self._logits_after(self.prompt_tokens + opening[:i])
            total += float(logprobs[token])
        return total

    def _choose(self) -> str | None:
        """The tool to call, or ``None`` for a text reply."""
        if not self.tools:
            return None
        if self.forced:
            return self.forced
        options: list[str | None] = [_tool_name(t) for t in self.tools]
        if not self.required:
            options.append(None)
        if len(options) == 1:
            return options[0]
        scores = []
        for option in options:
            if self._cancelled():
                return None
            scores.append(self._score(self._tokens(_opening(option))))
        self.decision = {_opening(o): round(s, 3) for o, s in zip(options, scores, strict=True)}
        temperature = float(self.sampling.get("temperature") or 0.0)
        if temperature <= 0:
            return options[int(np.argmax(scores))]
        top = max(scores)
        weights = [math.exp((s - top) / temperature) for s in scores]
        seed = self.sampling.get("seed")
        rng = random.Random(seed) if seed is not None else random.Random()
        return rng.choices(options, weights=weights)[0]

    def _cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    # generation ---------------------------------------------------------------------------

    def _special_ends(self) -> set[int]:
        """Tokens that end a reply: end of generation and the ChatML turn markers."""
        llama = self.llama
        ends = {int(llama.token_eos())}
        for text in (IM_END, IM_START, "<|endoftext|>"):
            ids = llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
            if len(ids) == 1:
                ends.add(int(ids[0]))
        return ends

    def _generate(
        self,
        prefix: list[int],
        *,
        budget: int | None,
        grammar: Any,
        stops: list[str],
        echoes: Sequence[str] = (),
    ) -> Iterator[tuple[str, str | None]]:
        """(text piece, finish reason or None) pairs of one completion after ``prefix``.

        At most ``budget`` tokens (the context's end otherwise); one of ``echoes`` opening the
        text is dropped; a ``stops`` string ends the text before it; the request's cancel event
        is looked at after every token."""
        llama = self.llama
        tokens = self.prompt_tokens + prefix
        room = int(llama.n_ctx()) - len(tokens)
        if room <= 0:
            raise ValueError(
                f"Requested tokens ({len(tokens)}) exceed context window of {llama.n_ctx()}"
            )
        budget = room if budget is None else min(budget, room)
        if self._cancelled():
            yield "", "stop"
            return
        s = self.sampling
        llama.set_seed(s["seed"] if s["seed"] is not None else random.getrandbits(32))
        ends = self._special_ends()
        produced: list[int] = []
        sent = 0
        finish: str | None = None
        steps = llama.generate(
            tokens,
            top_k=s["top_k"],
            top_p=s["top_p"],
            min_p=s["min_p"],
            typical_p=s["typical_p"],
            temp=s["temperature"],
            repeat_penalty=s["repeat_penalty"],
            frequency_penalty=s["frequency_penalty"],
            presence_penalty=s["presence_penalty"],
            grammar=grammar,
        )
        base = self.completion_tokens
        lead: int | None = None  # characters of an echoed label at the start, once known
        try:
            for token in steps:
                if int(token) in ends:
                    finish = "stop"
                    break
                produced.append(int(token))
                self.completion_tokens = base + len(produced)
                raw = llama.detokenize(produced, prev_tokens=tokens)
                text = raw.decode("utf-8", errors="ignore")
                if lead is None:
                    lead = _echo_length(text, echoes)
                    sent = max(sent, lead or 0)
                found = [(i, x) for x in stops if x and (i := text.find(x, sent)) >= 0]
                if found:
                    cut, stop = min(found)
                    piece = text[sent:cut]
                    yield piece.rstrip() if stop in self.scaffolding else piece, "stop"
                    return
                if len(produced) >= budget:
                    finish = "length"
                    break
                if self._cancelled():
                    finish = "stop"
                    break
                hold = _held_back(text, stops)
                if lead is not None and len(text) - hold > sent:
                    yield text[sent : len(text) - hold], None
                    sent = len(text) - hold
        finally:
            steps.close()
        if finish is None:  # the generator ended by itself: the context is full
            finish = "length"
        text = llama.detokenize(produced, prev_tokens=tokens).decode("utf-8", errors="replace")
        yield text[sent:], finish

    def _pieces(self) -> Iterator[tuple[str | None, str, str | None]]:
        """(tool name or None, piece, finish reason) for the whole reply."""
        from llama_cpp.llama_grammar import LlamaGrammar

        tool = self._choose()
        plan: ArgumentsPlan | None = None
        if tool is not None:
            plan = arguments_plan(next(_parameters(t) for t in self.tools if _tool_name(t) == tool))
            opening_text = call_mark(tool) + (" " + plan.prefix if plan.prefix else "")
        else:
            opening_text = ANSWER_MARK if self.tools else ""
        opening = self._tokens(opening_text) if opening_text else []
        self.completion_tokens = len(opening)
        budget = self.max_tokens
        if budget is not None:
            budget = max(1, budget - len(opening))
        if plan is not None:
            grammar = LlamaGrammar.from_string(plan.grammar, verbose=False)
            pieces = self._generate(
                opening, budget=budget or ARGUMENT_TOKENS, grammar=grammar, stops=[]
            )
            yield tool, plan.prefix, None
        else:
            pieces = self._generate(
                opening,
                budget=budget,
                grammar=self.grammar,
                stops=self.stops + self.scaffolding,
                echoes=self.scaffolding,
            )
        strip = plan is None or plan.lstrip
        for piece, finish in pieces:
            if strip:
                piece = piece.lstrip()
                strip = not piece
            yield tool, piece, finish
            if finish is not None:
                return

    def _usage(self) -> dict[str, int]:
        prompt = len(self.prompt_tokens)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": self.completion_tokens,
            "total_tokens": prompt + self.completion_tokens,
        }

    def _call_id(self) -> str:
        return f"call_{uuid.uuid4().hex[:16]}"

    def completion(self) -> dict[str, Any]:
        text: list[str] = []
        tool: str | None = None
        finish: str | None = None
        for called, piece, finish_piece in self._pieces():
            tool = called
            text.append(piece)
            finish = finish_piece or finish
        body = "".join(text)
        message: dict[str, Any] = {"role": "assistant", "content": body}
        if tool is not None:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": self._call_id(),
                        "type": "function",
                        "function": {"name": tool, "arguments": body},
                    }
                ],
            }
            finish = "tool_calls" if finish != "length" else "length"
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish or "stop",
                }
            ],
            "usage": self._usage(),
        }

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if finish is not None:
            chunk["usage"] = self._usage()
        return chunk

    def chunks(self) -> Iterator[dict[str, Any]]:
        first = True
        finish: str | None = None
        tool: str | None = None
        for tool, piece, finish_piece in self._pieces():
            finish = finish_piece or finish
            if first:
                first = False
                if tool is None:
                    yield self._chunk({"role": "assistant", "content": piece})
                else:
                    call = {
                        "index": 0,
                        "id": self._call_id(),
                        "type": "function",
                        "function": {"name": tool, "arguments": piece},
                    }
                    yield self._chunk({"role": "assistant", "content": None, "tool_calls": [call]})
                continue
            if piece:
                if tool is None:
                    yield self._chunk({"content": piece})
                else:
                    yield self._chunk(
                        {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
                    )
        if tool is not None:
            finish = "tool_calls" if finish != "length" else "length"
        yield self._chunk({}, finish or "stop")


def _opening(tool: str | None) -> str:
    """What the choice scores: the start of a call of ``tool``, or of a text reply."""
    return ANSWER_MARK if tool is None else call_mark(tool)


def register() -> None:
    """Register the handler under :data:`CHAT_FORMAT` (``--chat_format aworld-smollm2``)."""
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    registry: Any = cast(Any, LlamaChatCompletionHandlerRegistry)()  # untyped constructor
    registry.register_chat_completion_handler(CHAT_FORMAT, SmolChatHandler(), overwrite=True)
