"""ms-swift: a ``MultiTurnScheduler`` that runs the workflow for each GRPO rollout request.

ms-swift's rollout server for GRPO (``swift rollout --multi_turn_scheduler aworld``) builds
``multi_turns[args.multi_turn_scheduler](infer_engine=..., max_turns=...)`` and awaits
``run(infer_request, request_config)`` per request of the trainer's batch.
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

Where it runs: ms-swift 4.6 calls a scheduler's ``run`` only under ``swift rollout`` (server
mode, ``vllm_use_async_engine``: ``MultiTurnScheduler.async_infer`` awaits ``run`` per
request). In colocate mode the trainer drives the turns itself (its engine samples each turn
and only the scheduler's ``on_trajectory_start``, ``on_turn_end``, ``check_finished`` and
``step`` hooks are called; ``swift/rlhf_trainers/rollout_mixin.py``,
``_infer_single_or_multi_turn``), so the agent would never run: :class:`AWorldScheduler`
refuses it at ``on_trajectory_start`` with a message naming server mode.

Each episode's checkpoint thread is ``swift-<uuid>``, the request's ``uuid``: the
``request_id`` ms-swift's trainer gives each rollout sample and sends to ``swift rollout``
with the request. ms-swift draws it anew for every rollout (``chatcmpl-<uuid4>``), so by
default each episode is a new thread and a restarted step samples every episode again. The
step, the trainer's process and its mode never reach ``swift rollout`` (another process, often
another machine) otherwise. :func:`grpo_trainer` makes the request ids stable: ms-swift's
``GRPOTrainer`` subclass :class:`AWorldGRPOTrainer`, put in ms-swift's ``TrainerFactory``
for ``swift rlhf --rlhf_type grpo``, names each request
``<run_id>-p<process>-<train|eval>-s<global_step>-g<k>-<i>`` (as
:func:`aworld_graph.train.trl.rollout_func` names TRL's threads), so the thread is
``swift-<run_id>-p0-train-s3-g0-5``. A trainer resumed from its checkpoint replays the step
with the same prompts in the same places (the seeded ``RepeatSampler`` and the
``Trainer``'s skip of the batches already trained on), and ``swift rollout`` reads that
step's finished episodes back from the store (the model is not called for them) and resumes
the unfinished ones from their last checkpoint, whose finished tool calls are not run again
(:func:`~aworld_graph.train.episodes.run_episode`; a thread holding another task fails the
row). Both processes load the same ``--external_plugins`` file, which calls
``AgentTrainer(agent, trainer="swift", ..., config={"run_id": "exp1"}).adapter()``; ``swift
rollout`` must use the store the restarted one reads (``AWORLD_GRAPH_DB``).

ms-swift pins ``transformers<5.20`` and ``trl<1``, below this project's ``train`` extra:
install it in an environment of its own (``pip install 'aworld-graph[train-swift]'``). This
module imports without it; using it without ms-swift raises :class:`TrainerNotInstalled`.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ..agent import Agent
from ..config import AgentConfig
from ..errors import ConfigError
from ..model import ModelProfile, ModelResponse, ToolCall, Usage
from .episodes import ANSWER_FIELDS, run_episode
from .extras import TRAINERS, AgentConfigured, TrainerNotInstalled
from .sequences import TrainingSequence, flatten

__all__ = ["AWorldGRPOTrainer", "AWorldScheduler", "SwiftEngineModel", "grpo_trainer"]

SCHEDULER_NAME = "aworld"
"""The name :class:`AWorldScheduler` has in ms-swift's ``multi_turns``
(``--multi_turn_scheduler aworld``)."""


def _swift(module: str) -> Any:
    try:
        return importlib.import_module(f"swift.{module}")
    except ImportError as exc:
        name = exc.name or "swift"
        missing = "" if name.split(".")[0] == "swift" else f" (swift.{module} needs {name!r})"
        raise TrainerNotInstalled(
            f"trainer 'swift' is not installed: {TRAINERS['swift'][1]}{missing}"
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
    """ms-swift's multi-turn scheduler for an aworld-graph agent, run by ``swift rollout`` (see
    the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        base = _swift("rollout.multi_turn").MultiTurnScheduler
        base.__init__(self, *args, **kwargs)
        if not isinstance(type(self).configured_agent, Agent):
            raise ValueError(
                "AWorldScheduler has no agent: call AWorldScheduler.configure(agent=...) in the "
                "--external_plugins file before training"
            )

    async def on_trajectory_start(self, requests: list[Any]) -> None:
        """ms-swift calls this hook only in colocate mode (``run`` is overridden here), where
        its trainer samples the turns itself and would never run the agent: refused."""
        raise ConfigError(
            "AWorldScheduler runs the agent in ms-swift's server mode only: in colocate mode "
            "ms-swift samples each turn itself and never calls the scheduler's run(); train "
            "with `swift rlhf --use_vllm true --vllm_mode server ...` and start `swift rollout "
            "--multi_turn_scheduler aworld --external_plugins <your plugin file>`"
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
        request_id = getattr(infer_request, "uuid", None)
        episode = await run_episode(
            row,
            0,
            agent=dataclasses.replace(agent, model=model, conf=conf),
            reward_func=type(self).configured_reward,
            thread_prefix="swift",
            thread_id=f"swift-{request_id}" if request_id else None,
        )
        response = model.last_response
        if not episode.ok:
            ids: list[int] = list(response.choices[0].token_ids or []) if response else []
            return protocol.RolloutOutput(
                response=response or _response(protocol, "", model.name),
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
            # an episode read back from the store made no call here: its answering call's
            # response is rebuilt from the stored ids
            response=response or _response(protocol, answer, seq.tokenizer, seq),
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


def _response(protocol: Any, text: str, model: str, seq: TrainingSequence | None = None) -> Any:
    """An engine response for an episode that made no call in this process: a failed one
    (empty), or one read back from the store (its answering call's stored ids)."""
    ids = seq.completion_ids if seq is not None else []
    prompt = seq.prompt_ids if seq is not None else []
    logprobs = {"content": [{"logprob": lp} for lp in seq.logprobs]} if seq is not None else None
    choice = protocol.ChatCompletionResponseChoice(
        index=0,
        message=protocol.ChatMessage(role="assistant", content=text),
        finish_reason="stop",
        logprobs=logprobs,
        token_ids=ids or None,
    )
    return protocol.ChatCompletionResponse(
        model=model,
        choices=[choice],
        usage=protocol.UsageInfo(len(prompt), len(ids), len(prompt) + len(ids)),
        prompt_token_ids=prompt or None,
    )


def _trainer_base() -> type:
    try:
        return _swift("rlhf_trainers.grpo_trainer").GRPOTrainer  # type: ignore[no-any-return]
    except TrainerNotInstalled:
        return object


class AWorldGRPOTrainer(_trainer_base()):  # type: ignore[misc]
    """ms-swift's ``GRPOTrainer`` naming each rollout request from the run and the trainer's
    state, so ``swift rollout`` resumes a restarted step's episodes (see the module docstring
    and :func:`grpo_trainer`)."""

    run_id: ClassVar[str | None] = None
    """Names the training run (:func:`grpo_trainer` sets it); ``None``: ms-swift's own ids."""

    def _add_prompt_id_to_inputs(self, samples: list[Any]) -> list[Any]:
        # ms-swift 4.6 gives each sample its request_id here (rollout_mixin.py); the request
        # sent to `swift rollout` carries it as its uuid
        samples = super()._add_prompt_id_to_inputs(samples)
        run_id = type(self).run_id
        if run_id is None:
            return samples
        step = int(self.state.global_step)
        process = int(self.accelerator.process_index)
        mode = "train" if self.model.training else "eval"
        # ms-swift may generate more than once at a step and mode (dynamic sampling); a
        # restarted trainer counts again from 0
        made: Counter[tuple[int, str]] = self.__dict__.setdefault("aworld_generations", Counter())
        name = f"{run_id}-p{process}-{mode}-s{step}-g{made[(step, mode)]}"
        made[(step, mode)] += 1
        for i, sample in enumerate(samples):
            sample.request_id = f"{name}-{i}"
        return samples


def grpo_trainer(run_id: str) -> type[AWorldGRPOTrainer]:
    """:class:`AWorldGRPOTrainer` naming this training run ``run_id`` (give each run its own;
    the same one when it is resumed), put in ms-swift's ``TrainerFactory`` as the ``grpo``
    trainer, so ``swift rlhf --rlhf_type grpo --external_plugins <file>`` trains with it when
    ``<file>`` calls this (``AgentTrainer(trainer="swift", config={"run_id": ...}).adapter()``
    does). Returns the class."""
    if not isinstance(run_id, str) or not run_id.strip():
        raise ConfigError(f"grpo_trainer(run_id={run_id!r}): give the training run a name")
    _swift("rlhf_trainers.grpo_trainer")  # says what is missing when it cannot be imported
    AWorldGRPOTrainer.run_id = run_id
    factory = _swift("trainers").TrainerFactory
    factory.TRAINER_MAPPING["grpo"] = f"{__name__}.{AWorldGRPOTrainer.__name__}"
    return AWorldGRPOTrainer


if _scheduler_base() is not object:
    _swift("rollout.multi_turn").multi_turns[SCHEDULER_NAME] = AWorldScheduler
