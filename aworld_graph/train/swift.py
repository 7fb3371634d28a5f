"""ms-swift: a ``MultiTurnScheduler`` that runs the workflow for each GRPO rollout request.

ms-swift's GRPO trainer builds ``multi_turns[args.multi_turn_scheduler](infer_engine=...,
max_turns=...)`` and awaits ``run(infer_request, request_config)`` per request.
:class:`AWorldScheduler` (put in ``multi_turns`` as ``aworld`` when this module is imported
with ms-swift installed, e.g. from an ``--external_plugins`` file) runs the configured agent on
the request's last user message with :class:`SwiftEngineModel` as its model: each LLM call
goes to the scheduler's ``infer_engine.infer_async`` (asking for logprobs), and the call's
``tokens`` are the engine's ``prompt_token_ids``, the choice's ``token_ids`` and their
logprobs, never re-tokenized text. The run is flattened (:mod:`.sequences`, ``per="turn"``)
and the answering call's sequence is the ``RolloutOutput``: ``response_token_ids``,
``response_loss_mask`` (so ms-swift skips re-tokenizing), ``rollout_logprobs`` (those of the
mask-1 tokens, as ms-swift pairs them) and ``messages`` ending with the answer.

A failed run (a bad request, a raising reward function, a run that did not finish, a call
without ids) is never training data: its loss mask is all 0 (over the last call's sampled
ids, or no ids when no call was made) and ``rollout_infos["aworld_error"]`` says why. Every
output names its episode's thread in ``rollout_infos["aworld_thread"]`` (when the run started).

Each episode is a new checkpoint thread (``swift-0-<uuid>``), so ms-swift restarted on a
step samples every episode again: ``run`` gets the request, whose ``uuid`` is the
``request_id`` ms-swift draws anew (``chatcmpl-<uuid4>``) for every rollout, and its
``messages`` and ``data_dict`` (the same for the ``num_generations`` rollouts of a prompt); the
step stays in the trainer. Nothing of that names one episode across a restart, and a thread
named from it would give one episode another's finished run.

ms-swift pins ``transformers<5.20`` and ``trl<1``, below this project's ``train`` extra:
install it in an environment of its own (``pip install 'aworld-graph[train-swift]'``). This
module imports without it; using it without ms-swift raises :class:`TrainerNotInstalled`.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
from collections.abc import Callable, Sequence
from typing import Any

from ..agent import Agent
from ..config import AgentConfig
from ..model import ModelProfile, ModelResponse, ToolCall, Usage
from .episodes import ANSWER_FIELDS, run_episode
from .extras import TRAINERS, AgentConfigured, TrainerNotInstalled
from .sequences import flatten

__all__ = ["AWorldScheduler", "SwiftEngineModel"]

SCHEDULER_NAME = "aworld"
"""The name :class:`AWorldScheduler` has in ms-swift's ``multi_turns``
(``--multi_turn_scheduler aworld``)."""


def _swift(module: str) -> Any:
    try:
        return importlib.import_module(f"swift.{module}")
    except ImportError as exc:
        raise TrainerNotInstalled(
            f"trainer 'swift' is not installed: {TRAINERS['swift'][1]}"
        ) from exc


class SwiftEngineModel:
    """A chat model whose calls go to ms-swift's inference engine (see the module
    docstring); :attr:`last_response` is the engine's last ``ChatCompletionResponse``."""

    profile = ModelProfile(tools_once=True)

    def __init__(self, *, infer_engine: Any, request_config: Any, name: str = "swift") -> None:
        self.infer_engine = infer_engine
        self.request_config = copy.copy(request_config)
        self.request_config.logprobs = True
        self.name = name
        self.last_response: Any = None

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        tool_choice: str | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> ModelResponse:
        protocol = _swift("infer_engine.protocol")
        clean = [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]
        request = protocol.RolloutInferRequest(messages=clean, tools=list(tools) if tools else None)
        response = await self.infer_engine.infer_async(request, self.request_config)
        self.last_response = response
        choice = response.choices[0]
        content = (choice.logprobs or {}).get("content") or []
        logprobs = [float(c["logprob"]) for c in content]
        ids, prompt = choice.token_ids, response.prompt_token_ids
        tokens: dict[str, Any]
        if ids is None or prompt is None or len(logprobs) != len(ids):
            tokens = {
                "available": False,
                "reason": f"ms-swift's engine {type(self.infer_engine).__name__} returned no "
                "prompt and completion token ids with one logprob each",
            }
        else:
            tokens = {
                "prompt_ids": [int(t) for t in prompt],
                "completion_ids": [int(t) for t in ids],
                "logprobs": logprobs,
                "tokenizer": self.name,
            }
        message = choice.message
        text = message.content if isinstance(message.content, str) else ""
        calls = [
            ToolCall(id=c.id, name=c.function.name, arguments=str(c.function.arguments))
            for c in message.tool_calls or []
        ]
        if on_token is not None and text:
            on_token(text)
        usage = response.usage
        return ModelResponse(
            content=text,
            tool_calls=calls,
            usage=Usage(
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                total_tokens=usage.total_tokens,
            ),
            model=response.model or self.name,
            finish_reason=choice.finish_reason,
            tokens=tokens,
        )


def _scheduler_base() -> type:
    try:
        return _swift("rollout.multi_turn").MultiTurnScheduler  # type: ignore[no-any-return]
    except TrainerNotInstalled:
        return object


class AWorldScheduler(AgentConfigured, _scheduler_base()):  # type: ignore[misc]
    """ms-swift's multi-turn scheduler for an aworld-graph agent (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        base = _swift("rollout.multi_turn").MultiTurnScheduler
        base.__init__(self, *args, **kwargs)
        if not isinstance(type(self).configured_agent, Agent):
            raise ValueError(
                "AWorldScheduler has no agent: call AWorldScheduler.configure(agent=...) in the "
                "--external_plugins file before training"
            )

    async def run(self, infer_request: Any, request_config: Any, **kwargs: Any) -> Any:
        protocol = _swift("infer_engine.protocol")
        agent = type(self).configured_agent
        assert agent is not None
        model = SwiftEngineModel(infer_engine=self.infer_engine, request_config=request_config)
        conf = dataclasses.replace(agent.conf or AgentConfig(), record_tokens=True)
        messages = list(infer_request.messages)
        row: dict[str, Any] = {"prompt": messages}
        data = getattr(infer_request, "data_dict", None) or {}
        row.update({k: data[k] for k in ANSWER_FIELDS if k in data})
        episode = await run_episode(
            row,
            0,
            agent=dataclasses.replace(agent, model=model, conf=conf),
            reward_func=type(self).configured_reward,
            thread_prefix="swift",
        )
        response = model.last_response
        if not episode.ok:
            ids: list[int] = list(response.choices[0].token_ids or []) if response else []
            if response is None:
                response = protocol.ChatCompletionResponse(
                    model=model.name,
                    choices=[
                        protocol.ChatCompletionResponseChoice(
                            index=0,
                            message=protocol.ChatMessage(role="assistant", content=""),
                            finish_reason="stop",
                        )
                    ],
                    usage=protocol.UsageInfo(0, 0, 0),
                )
            return protocol.RolloutOutput(
                response=response,
                response_token_ids=[ids],
                response_loss_mask=[[0] * len(ids)],
                rollout_infos={
                    "num_turns": 0,
                    "aworld_error": episode.error or "no sequence",
                    "aworld_thread": episode.thread_id,
                },
            )
        assert episode.response is not None
        seq = flatten(episode.response, per="turn", reward=episode.reward)[-1]
        calls = sum(1 for r in episode.response.state.get("trace") or [] if r.get("kind") == "llm")
        answer = episode.response.answer or ""
        return protocol.RolloutOutput(
            response=response,
            messages=messages + [{"role": "assistant", "content": answer}],
            response_token_ids=[seq.completion_ids],
            response_loss_mask=[seq.mask],
            rollout_logprobs=[[lp for lp, m in zip(seq.logprobs, seq.mask, strict=True) if m]],
            rollout_infos={
                "num_turns": calls,
                "aworld_thread": episode.response.thread_id,
                "aworld_reward": episode.reward,
            },
        )


if _scheduler_base() is not object:
    _swift("rollout.multi_turn").multi_turns[SCHEDULER_NAME] = AWorldScheduler
