"""verl: an agent loop that runs the workflow for each prompt, token in, token out.

verl's ``AgentLoopWorker`` instantiates a registered ``AgentLoopBase`` subclass per sample
(with its ``server_manager``, ``tokenizer``…) and awaits ``run(sampling_params, **row)``.
:class:`AWorldAgentLoop` (registered as ``aworld_agent``) runs the configured agent on the
row's ``raw_prompt``, with :class:`VerlServerModel` as its model: each LLM call renders the
conversation with verl's tokenizer (its chat template, tools included), sends the ids to
``server_manager.generate(request_id, prompt_ids=..., sampling_params=...)`` and decodes the
ids it samples; the call's ``tokens`` are those ids and logprobs, never re-tokenized text.
The run is scored by ``reward_func(answer, ground_truth)`` (the row's
``reward_model.ground_truth``) and flattened (:mod:`.sequences`, ``per="turn"``): the
answering call's sequence becomes the ``AgentLoopOutput`` (``prompt_ids``, ``response_ids``,
``response_mask``, ``response_logprobs``, ``reward_score``, ``num_turns``).

A run that fails (a bad row, a raising reward function, a run that did not finish, a call
without ids) is never training data: its output has the prompt, no response tokens (so
nothing of it is in the loss) and ``extra_fields["aworld_error"]`` saying why. Every output
names its episode's thread in ``extra_fields["aworld_thread"]`` (when the run started).

Each episode is a new checkpoint thread (``verl-<index>-<uuid>``), so verl restarted on a
step samples every episode again: ``run`` gets the row's columns, where ``index`` is the
dataset row's (the same for the ``rollout.n`` samples of a prompt and at every epoch) and
``uid`` a new uuid per prompt at every step; the step (``meta_info["global_steps"]``) and the
sample's number within its group stay in verl's worker. Nothing of that names one episode
across a restart, and a thread named from it would give one episode another's finished run.

Configure it in the process that runs it (``AWorldAgentLoop.configure(agent=...,
reward_func=...)``) or, for verl's Ray workers, in the agent loop config file::

    - name: aworld_agent
      _target_: aworld_graph.train.verl.AWorldAgentLoop
      agent: my_project.agents:solver          # module:attribute
      reward_func: aworld_graph.rewards:numeric

verl pins ``transformers<5.11``, below this project's ``train`` extra: install it in an
environment of its own (``pip install 'aworld-graph[train-verl]'``; docs/training.md). This
module imports without verl; using it without verl raises :class:`TrainerNotInstalled`.
"""

from __future__ import annotations

import dataclasses
import importlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..agent import Agent
from ..config import AgentConfig
from ..errors import ModelError
from ..model import ModelProfile, ModelResponse, ToolCall, Usage
from .episodes import run_episode
from .extras import TRAINERS, AgentConfigured, TrainerNotInstalled
from .sequences import flatten

__all__ = ["AWorldAgentLoop", "VerlServerModel", "register_agent_loop"]

AGENT_LOOP_NAME = "aworld_agent"
"""The name :class:`AWorldAgentLoop` is registered under (``agent_name`` in verl's data)."""


def _verl() -> Any:
    """verl's agent loop module, or the one-line error naming the extra."""
    try:
        return importlib.import_module("verl.experimental.agent_loop.agent_loop")
    except ImportError as exc:
        raise TrainerNotInstalled(
            f"trainer 'verl' is not installed: {TRAINERS['verl'][1]}"
        ) from exc


def _ref(value: Any, what: str) -> Any:
    """``module:attribute`` imported; anything else as given."""
    if not isinstance(value, str):
        return value
    module, _, name = value.partition(":")
    if not name:
        raise ValueError(f"AWorldAgentLoop {what}={value!r}: give 'module:attribute'")
    return getattr(importlib.import_module(module), name)


class VerlServerModel:
    """A chat model whose calls go through verl's server manager, token in, token out (see
    the module docstring). Tool calls are read from the sampled ids by verl's tool parser
    (``hermes`` by default: ``<tool_call>{json}</tool_call>``)."""

    profile = ModelProfile(tools_once=True)

    def __init__(
        self,
        *,
        server_manager: Any,
        tokenizer: Any,
        sampling_params: Mapping[str, Any] | None = None,
        tool_parser: str | None = "hermes",
        chat_template_kwargs: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.sampling_params = dict(sampling_params or {})
        self.tool_parser = tool_parser
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.name = name or str(getattr(tokenizer, "name_or_path", "") or "verl")
        self.request_id = uuid.uuid4().hex
        """One id per episode: verl keeps an episode's calls on one server (sticky session)."""

    def prompt_ids(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> list[int]:
        """The conversation rendered by the tokenizer's chat template, as ids."""
        clean = [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]
        ids = self.tokenizer.apply_chat_template(
            clean,
            tools=list(tools) if tools else None,
            add_generation_prompt=True,
            tokenize=True,
            **self.chat_template_kwargs,
        )
        if isinstance(ids, Mapping):  # transformers 5 may return a BatchEncoding
            ids = ids["input_ids"]
        return [int(t) for t in ids]

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        tool_choice: str | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> ModelResponse:
        prompt = self.prompt_ids(messages, tools)
        out = await self.server_manager.generate(
            self.request_id, prompt_ids=prompt, sampling_params=dict(self.sampling_params)
        )
        ids = [int(t) for t in out.token_ids]
        if getattr(out, "stop_reason", None) == "aborted":
            raise ModelError(f"verl's server aborted the request {self.request_id}")
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        calls: list[ToolCall] = []
        if tools and self.tool_parser:
            tool_parser = importlib.import_module("verl.experimental.agent_loop.tool_parser")
            parser = tool_parser.ToolParser.get_tool_parser(self.tool_parser, self.tokenizer)
            _, found = await parser.extract_tool_calls(ids)
            calls = [
                ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=c.name, arguments=c.arguments)
                for c in found
            ]
            pattern = getattr(parser, "tool_call_regex", None)
            if calls and pattern is not None:
                text = pattern.sub("", text).strip()
        logprobs = [float(x) for x in (out.log_probs or [])]
        tokens: dict[str, Any] = {
            "prompt_ids": prompt,
            "completion_ids": ids,
            "logprobs": logprobs if len(logprobs) == len(ids) else [],
            "tokenizer": self.name,
        }
        if not calls:
            start = self.tokenizer.decode(ids).find(text) if text else 0
            tokens["text_span"] = [start, start + len(text)] if start >= 0 else None
        if on_token is not None and text:
            on_token(text)
        return ModelResponse(
            content=text,
            tool_calls=calls,
            usage=Usage(
                prompt_tokens=len(prompt),
                completion_tokens=len(ids),
                total_tokens=len(prompt) + len(ids),
            ),
            model=self.name,
            finish_reason="tool_calls" if calls else "stop",
            tokens=tokens,
        )


def _loop_base() -> type:
    try:
        return _verl().AgentLoopBase  # type: ignore[no-any-return]
    except TrainerNotInstalled:
        return object


class AWorldAgentLoop(AgentConfigured, _loop_base()):  # type: ignore[misc]
    """verl's agent loop for an aworld-graph agent (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        verl = _verl()
        agent = kwargs.pop("agent", None)
        reward = kwargs.pop("reward_func", None)
        kwargs.pop("tools", None)  # verl's own tool list: the agent brings its tools
        verl.AgentLoopBase.__init__(self, *args, **kwargs)
        self.agent: Agent | None = (
            _ref(agent, "agent") if agent is not None else type(self).configured_agent
        )
        self.reward_func: Callable[..., Any] | None = (
            _ref(reward, "reward_func") if reward is not None else type(self).configured_reward
        )
        if not isinstance(self.agent, Agent):
            raise ValueError(
                "AWorldAgentLoop has no agent: call AWorldAgentLoop.configure(agent=...) or set "
                "agent: 'module:attribute' in verl's agent loop config"
            )

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        verl = _verl()
        messages = list(kwargs.get("raw_prompt") or [])
        ground_truth = (kwargs.get("reward_model") or {}).get("ground_truth")
        multi_turn = getattr(self.rollout_config, "multi_turn", None)
        model = VerlServerModel(
            server_manager=self.server_manager,
            tokenizer=self.tokenizer,
            sampling_params=sampling_params,
            tool_parser=getattr(multi_turn, "format", None) or "hermes",
            chat_template_kwargs=self.apply_chat_template_kwargs,
        )
        assert self.agent is not None
        conf = dataclasses.replace(self.agent.conf or AgentConfig(), record_tokens=True)
        agent = dataclasses.replace(self.agent, model=model, conf=conf)
        row: dict[str, Any] = {"prompt": messages}
        if ground_truth is not None:
            row["expected"] = ground_truth
        episode = await run_episode(
            row,
            int(kwargs.get("index", 0) or 0),
            agent=agent,
            reward_func=self.reward_func,
            thread_prefix="verl",
        )
        response_length = int(self.rollout_config.response_length)
        if not episode.ok:
            return verl.AgentLoopOutput(
                prompt_ids=self._cap_text_prompt_length(model.prompt_ids(messages, None)),
                response_ids=[],
                response_mask=[],
                num_turns=0,
                metrics=verl.AgentLoopMetrics(),
                extra_fields={
                    "aworld_error": episode.error or "the run gave no sequence",
                    "aworld_thread": episode.thread_id,
                },
            )
        assert episode.response is not None
        seq = flatten(episode.response, per="turn", reward=episode.reward)[-1]
        trace = episode.response.state.get("trace") or []
        calls = sum(1 for r in trace if r.get("kind") == "llm")
        results = sum(len(r.get("tool_results") or []) for r in trace if r.get("kind") == "tools")
        return verl.AgentLoopOutput(
            prompt_ids=self._cap_text_prompt_length(seq.prompt_ids),
            response_ids=seq.completion_ids[:response_length],
            response_mask=seq.mask[:response_length],
            response_logprobs=(
                seq.logprobs[:response_length]
                if len(seq.logprobs) == len(seq.completion_ids)
                else None
            ),
            reward_score=episode.reward if self.reward_func is not None else None,
            num_turns=1 + calls + results,
            metrics=verl.AgentLoopMetrics(),
            extra_fields={
                "aworld_thread": episode.response.thread_id,
                "aworld_answer": episode.response.answer,
            },
        )


def register_agent_loop(name: str = AGENT_LOOP_NAME) -> type[AWorldAgentLoop]:
    """Register :class:`AWorldAgentLoop` with verl under ``name`` (done for
    ``aworld_agent`` when verl is installed and this module is imported)."""
    _verl().register(name)(AWorldAgentLoop)
    return AWorldAgentLoop


if _loop_base() is not object:
    register_agent_loop()
