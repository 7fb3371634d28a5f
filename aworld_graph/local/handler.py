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

__all__ = ["ARGUMENT_TOKENS", "CANCEL", "CHAT_FORMAT", "SAMPLED", "SmolChatHandler", "register"]

ARGUMENT_TOKENS = 1024
"""Cap on a tool call's argument tokens when the request sets no ``max_tokens``."""

CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "aworld_graph_generation_cancel", default=None
)
"""Set by the server per request; when the event is set, generation stops."""

SAMPLED: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "aworld_graph_sampled_tokens", default=None
)
"""Set by the server per request: a non-streamed reply's token fields are put there too, as
llama-cpp-python's response model drops fields it does not know from the reply."""


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
        logprobs: bool | None = None,
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
            want_tokens=bool(logprobs),
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
        want_tokens: bool = False,
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
        self.want_tokens = want_tokens
        """The request asked for logprobs: the reply carries its token ids (vLLM's shape)."""
        self.opening: list[int] = []
        """Tokens the handler put after the prompt before generating (``Reply:``, ``Use
        <tool>: {"arg": "``…)."""
        self.opening_logprobs: list[float] = []
        self.opening_chosen = 0
        """How many leading opening tokens the model chose (the scored call or reply mark,
        when there was a choice); the rest were written by the handler."""
        self.produced: list[int] = []
        """The tokens sampled after the opening."""
        self.produced_logprobs: list[float] = []

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

    def _token_logprobs(self, opening: list[int]) -> list[float]:
        """log P of each token of ``opening`` after the prompt and the tokens before it."""
        out: list[float] = []
        if self._prompt_logprobs is None:
            self._prompt_logprobs = self._logits_after(self.prompt_tokens)
        logprobs = self._prompt_logprobs
        for i, token in enumerate(opening):
            if i:
                logprobs = self._logits_after(self.prompt_tokens + opening[:i])
            out.append(float(logprobs[token]))
        return out

    def _score(self, opening: list[int]) -> float:
        """log P(opening | prompt), one token at a time."""
        return sum(self._token_logprobs(opening))

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
                    if self.want_tokens:  # sampled too: ending the turn is the model's choice
                        self.produced.append(int(token))
                        self.produced_logprobs.append(self._sampled_logprob(int(token)))
                    finish = "stop"
                    break
                produced.append(int(token))
                if self.want_tokens:  # the logits it was sampled from are the context's last
                    self.produced.append(int(token))
                    self.produced_logprobs.append(self._sampled_logprob(int(token)))
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

    def _sampled_logprob(self, token: int) -> float:
        """log P(token) under the model (temperature 1, before any sampler or grammar)."""
        n_vocab = self.llama.n_vocab()
        logits = np.ctypeslib.as_array(self.llama._ctx.get_logits_ith(-1), shape=(n_vocab,))
        return float(_log_softmax(np.array(logits, dtype=np.float64))[token])

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
        if self.want_tokens:
            self.opening = opening
            self.opening_logprobs = self._token_logprobs(opening)
            if self.decision:  # the mark was chosen by the model's scores
                mark = ANSWER_MARK if tool is None else call_mark(tool)
                self.opening_chosen = min(len(self._tokens(mark)), len(opening))
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
        reply: dict[str, Any] = {
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
        if self.want_tokens:
            sampled = self._sampled(body, tool)
            reply["prompt_token_ids"] = list(self.prompt_tokens)
            reply["choices"][0].update(sampled)
            if (holder := SAMPLED.get()) is not None:
                holder.update(prompt_token_ids=list(self.prompt_tokens), choice=sampled)
        return reply

    def _sampled(self, body: str, tool: str | None) -> dict[str, Any]:
        """A choice's token fields, in vLLM's shape (``token_ids``, ``logprobs.content``),
        plus ``aworld_tokens``: the tokenizer (the GGUF file), ``mask`` (1 on the tokens the
        model sampled or chose, 0 on those the handler wrote: a tool's fixed argument
        opening) and ``text_span``, the characters of the decoded ids that are the stored
        text (the reply, or the call's arguments), ``None`` if they are not there as is."""
        llama = self.llama
        ids = self.opening + self.produced
        logprobs = self.opening_logprobs + self.produced_logprobs
        mask = [1 if i < self.opening_chosen else 0 for i in range(len(self.opening))]
        mask += [1] * len(self.produced)
        decoded = llama.detokenize(ids).decode("utf-8", errors="replace")
        mark = (call_mark(tool) if tool is not None else ANSWER_MARK) if self.opening else ""
        start = decoded.find(body, len(mark)) if body else len(decoded)
        span = [start, start + len(body)] if start >= 0 else None
        pieces = [
            {
                "token": llama.detokenize([t]).decode("utf-8", errors="replace"),
                "logprob": lp,
                "bytes": list(llama.detokenize([t])),
                "top_logprobs": [],
            }
            for t, lp in zip(ids, logprobs, strict=True)
        ]
        model_path = str(getattr(llama, "model_path", "") or "")
        return {
            "token_ids": ids,
            "logprobs": {"content": pieces, "refusal": None},
            "aworld_tokens": {
                "tokenizer": "gguf:" + model_path.rsplit("/", 1)[-1],
                "mask": mask,
                "text_span": span,
            },
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
        said: list[str] = []
        for tool, piece, finish_piece in self._pieces():
            finish = finish_piece or finish
            said.append(piece)
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
        last = self._chunk({}, finish or "stop")
        if self.want_tokens:  # all of them with the last chunk, after the text is known
            last["prompt_token_ids"] = list(self.prompt_tokens)
            last["choices"][0].update(self._sampled("".join(said), tool))
        yield last


def _opening(tool: str | None) -> str:
    """What the choice scores: the start of a call of ``tool``, or of a text reply."""
    return ANSWER_MARK if tool is None else call_mark(tool)


def register() -> None:
    """Register the handler under :data:`CHAT_FORMAT` (``--chat_format aworld-smollm2``)."""
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    registry: Any = cast(Any, LlamaChatCompletionHandlerRegistry)()  # untyped constructor
    registry.register_chat_completion_handler(CHAT_FORMAT, SmolChatHandler(), overwrite=True)
