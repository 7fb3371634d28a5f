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

Each output's ``extra_fields`` also carry verl's ``min_global_steps``/``max_global_steps``:
the first and last weight versions (the ``global_steps`` verl's servers report) its calls
were sampled with, kept with each call in the store (a run that failed before its first call:
the version its step samples with); verl's V1 trainer reads them as integers for its
staleness metrics, and a step with an output without them fails.

Each episode is a checkpoint thread of its own. ``run`` gets only the row's columns (``index``
is the dataset row's, the same for the ``rollout.n`` samples of a prompt and at every epoch;
``uid`` a new uuid per prompt at every step): the step and what tells a group's samples apart
stay in verl's worker. Set verl's own extension point to this module's manager, whose workers
hand the loop what verl passes their ``_run_agent_loop``::

    actor_rollout_ref.rollout.agent.agent_loop_manager_class=aworld_graph.train.verl.AWorldAgentLoopManager

It serves both of verl's PPO trainers: verl builds it with ``create``, which picks by
``trainer.use_v1`` (verl 0.9.1's default is ``True``).

- verl's V1 trainer (``trainer.use_v1=True``): :class:`AWorldAgentLoopManagerTQ`, verl's
  ``AgentLoopManagerTQ`` whose workers (:class:`AWorldAgentLoopWorkerTQ`) run each prompt's
  ``rollout.n`` sessions in one worker and put their outputs in verl's TransferQueue. The
  thread is ``verl-<run_id>-<train|val>-s<step>-i<index>-n<session>-<digest>``: the prompt's
  ``global_steps`` (the step verl fetched it at), the dataset row's ``index`` and the
  session's number in the group. verl's synchronous V1 trainer (``trainer.v1.trainer_mode=
  sync``, its default) restarted from a checkpoint restores ``global_steps`` and its
  dataloader's state and fetches each step's prompts again in the same order, so a step
  gives its rows the same names. Its asynchronous modes (``colocate_async``,
  ``separate_async``) fetch prompts ahead of the step that trains on them, as groups finish:
  after a restart a prompt fetched at the same step as before resumes, one fetched at
  another step (or re-issued from verl's TransferQueue checkpoint, which gives it the resumed
  step) is sampled again under a new name. A row that comes twice in one step (an epoch that
  ends inside a step, where verl fetches prompts one at a time: its asynchronous modes,
  ``filter_groups``, ``sync_refill_failed_groups``) gives both of its groups the same threads.
- verl's trainer of ``trainer.use_v1=False``: the manager is verl's ``AgentLoopManager``
  whose workers (:class:`AWorldAgentLoopWorker`) get a group's samples as rows of the batch,
  split among the workers. The thread is
  ``verl-<run_id>-<train|val>-s<step>-b<place>-i<index>-<digest>``: the sample's place in the
  step's batch (verl's ``priority`` column, numbered before the batch is split, so it is one
  sample's alone where a group's samples land on two workers). Restarted from its
  checkpoint, the trainer restores ``global_steps`` and its dataloader's state and gives the
  step the same batch.

Either way, the step's finished episodes are then read back from the store (the model is not
called for them) and the unfinished ones resume from their last checkpoint, their finished
tool calls not run again. The digest of the prompt and its ground truth keeps a ``run_id``
reused with other data from reading another row's episode (a thread that holds another task
fails its row). ``run_id`` is verl's ``trainer.experiment_name``: the name verl resumes a run
by (its checkpoints are under ``trainer.default_local_dir``,
``checkpoints/<project_name>/<experiment_name>``), so a resumed run keeps it; set ``run_id:``
in the agent loop config to name it otherwise. A run with ``trainer.resume_mode=disable``
never resumes, and its episodes are new threads. A new run under a name whose episodes the
store still keeps would read them back, as verl would resume that name's checkpoints: give a
new run a new ``trainer.experiment_name`` (or ``run_id``). Without the manager (no step
reaches the loop) every episode is a new thread, ``verl-<index>-<uuid4>``, and a restarted
step samples every episode again.

Configure it in the process that runs it (``AWorldAgentLoop.configure(agent=...,
reward_func=...)``) or, for verl's Ray workers, in the agent loop config file::

    - name: aworld_agent
      _target_: aworld_graph.train.verl.AWorldAgentLoop
      agent: my_project.agents:solver          # module:attribute
      reward_func: aworld_graph.rewards:numeric
      run_id: exp1                             # optional: trainer.experiment_name by default

verl pins ``transformers<5.11``, below this project's ``train`` extra: install it in an
environment of its own (``pip install 'aworld-graph[train-verl]'``, with the TransferQueue its
V1 trainer imports; docs/training.md). This module imports without verl; using it without
verl (or the V1 classes without TransferQueue) raises :class:`TrainerNotInstalled`.
"""

from __future__ import annotations

import contextvars
import dataclasses
import importlib
import operator
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..agent import Agent
from ..config import AgentConfig
from ..errors import ModelError
from ..model import ModelProfile, ModelResponse, ToolCall, Usage
from .episodes import digest, run_episode
from .extras import TRAINERS, AgentConfigured, TrainerNotInstalled
from .sequences import flatten

__all__ = [
    "AWorldAgentLoop",
    "AWorldAgentLoopManager",
    "AWorldAgentLoopManagerTQ",
    "AWorldAgentLoopWorker",
    "AWorldAgentLoopWorkerTQ",
    "VerlServerModel",
    "register_agent_loop",
]

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


_SAMPLE: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "aworld_verl_sample", default=None
)
"""What verl's worker knows of the sample its agent loop runs: the trajectory it hands
``_run_agent_loop`` (``step``, ``sample_index``, ``rollout_n``, ``validate``) and what tells a
group's samples apart: the sample's ``place`` in the batch (:class:`AWorldAgentLoopWorker`)
or its ``session`` (:class:`AWorldAgentLoopWorkerTQ`); set by the worker for that sample's
task."""


def _number(value: Any) -> int | None:
    """An integer (numpy's included), else ``None``."""
    try:
        return operator.index(value)
    except TypeError:
        return None


def _weight_steps(response: Any, row: Mapping[str, Any]) -> dict[str, int]:
    """verl's ``min_global_steps``/``max_global_steps`` of a run: the first and last weight
    versions its calls were sampled with (each call's ``tokens["weights"]``, kept in the store,
    so a run read back has them too). A run without a call that reported them (one that
    failed before its first call) gets the version its step samples with,
    ``global_steps - 1``, where the row has verl's V1 ``global_steps``; else none."""
    trace = response.state.get("trace") or [] if response is not None else []
    spans = [
        r["tokens"]["weights"]
        for r in trace
        if r.get("kind") == "llm"
        and isinstance(r.get("tokens"), Mapping)
        and r["tokens"].get("weights")
    ]
    if not spans:
        step = _number(row.get("global_steps"))
        if step is None:
            return {}
        return dict.fromkeys(("min_global_steps", "max_global_steps"), step - 1)
    return {
        "min_global_steps": min(int(lo) for lo, _ in spans),
        "max_global_steps": max(int(hi) for _, hi in spans),
    }


def _episode_thread(run_id: str | None, row: Mapping[str, Any]) -> str | None:
    """The thread of the episode the running sample is (see the module docstring): ``None``
    without a ``run_id`` or outside :class:`AWorldAgentLoopWorker` (a new thread then)."""
    sample = _SAMPLE.get()
    if not run_id or sample is None:
        return None
    step, index = _number(sample.get("step")), _number(sample.get("sample_index"))
    place, session = _number(sample.get("place")), _number(sample.get("session"))
    if step is None or step < 0 or (place is None and session is None):
        return None
    task = {
        "raw_prompt": row.get("raw_prompt"),
        "ground_truth": (row.get("reward_model") or {}).get("ground_truth"),
    }
    mode = "val" if sample.get("validate") else "train"
    where = f"b{place}-i{index}" if session is None else f"i{index}-n{session}"
    return f"verl-{run_id}-{mode}-s{step}-{where}-{digest(task, 10)}"


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
        extra = getattr(out, "extra_fields", None) or {}
        weights = [
            _number(extra.get(f"{end}_global_steps", extra.get("global_steps")))
            for end in ("min", "max")
        ]
        if None not in weights:
            tokens["weights"] = weights
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


def _v1() -> Any:
    """The agent loop module of verl's V1 trainer (``trainer.use_v1=True``), which needs
    TransferQueue, or the one-line error naming the extra."""
    _verl()
    try:
        return importlib.import_module("verl.trainer.ppo.v1.agent_loop_tq")
    except ImportError as exc:
        raise TrainerNotInstalled(
            f"verl's V1 trainer (trainer.use_v1=True) cannot be imported ({exc}): "
            f"{TRAINERS['verl'][1]}"
        ) from exc


def _base(name: str, module: Callable[[], Any] = _verl) -> type:
    """verl's class ``name`` (in ``module()``) to subclass, the class itself where verl made
    it a Ray actor (``@ray.remote``); ``object`` without verl (the module still imports, and
    using the subclass raises :class:`TrainerNotInstalled`)."""
    try:
        found = getattr(module(), name)
    except TrainerNotInstalled:
        return object
    actor = getattr(found, "__ray_metadata__", None)
    return actor.modified_class.__ray_actor_class__ if actor is not None else found  # type: ignore[no-any-return]


class AWorldAgentLoop(AgentConfigured, _base("AgentLoopBase")):  # type: ignore[misc]
    """verl's agent loop for an aworld-graph agent (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        verl = _verl()
        agent = kwargs.pop("agent", None)
        reward = kwargs.pop("reward_func", None)
        run_id = kwargs.pop("run_id", None)
        kwargs.pop("tools", None)  # verl's own tool list: the agent brings its tools
        verl.AgentLoopBase.__init__(self, *args, **kwargs)
        self.agent: Agent | None = (
            _ref(agent, "agent") if agent is not None else type(self).configured_agent
        )
        self.reward_func: Callable[..., Any] | None = (
            _ref(reward, "reward_func") if reward is not None else type(self).configured_reward
        )
        trainer = self.config.get("trainer") or {}
        if run_id is None and trainer.get("resume_mode", "auto") != "disable":
            run_id = trainer.get("experiment_name")
        self.run_id: str | None = str(run_id) if run_id else None
        """Names the training run in its episodes' threads (``trainer.experiment_name`` unless
        the agent loop config sets ``run_id``; none for a run that never resumes)."""
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
            thread_id=_episode_thread(self.run_id, kwargs),
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
                    **_weight_steps(episode.response, kwargs),
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
                **_weight_steps(episode.response, kwargs),
            },
        )


class _SampleNames:
    """Puts what verl's worker hands ``_run_agent_loop`` of a sample in :data:`_SAMPLE` for
    that sample's agent loop: its trajectory and ``kwargs[key]`` (what tells a group's samples
    apart) as ``label``, for the workers of both of verl's trainers."""

    key: str
    label: str

    async def _run_agent_loop(
        self, sampling_params: dict[str, Any], trajectory: dict[str, Any], **kwargs: Any
    ) -> Any:
        # verl runs each sample in a task of its own, so the value is that sample's alone
        token = _SAMPLE.set({**trajectory, self.label: kwargs.get(self.key)})
        try:
            return await super()._run_agent_loop(  # type: ignore[misc]
                sampling_params, trajectory, **kwargs
            )
        finally:
            _SAMPLE.reset(token)


class AWorldAgentLoopWorker(_SampleNames, _base("AgentLoopWorker")):  # type: ignore[misc]
    """verl's ``AgentLoopWorker`` (its trainer of ``trainer.use_v1=False``) that hands each
    sample's agent loop the step, the sample's place in the batch and whether it validates
    (see the module docstring); everything else is verl's."""

    key, label = "priority", "place"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _verl()
        super().__init__(*args, **kwargs)


class AWorldAgentLoopWorkerTQ(_SampleNames, _base("AgentLoopWorkerTQ", _v1)):  # type: ignore[misc]
    """verl's ``AgentLoopWorkerTQ`` (its V1 trainer's, which runs a prompt's ``rollout.n``
    sessions and puts their outputs in the TransferQueue) that hands each session's agent
    loop the step, its session number and whether it validates; everything else is verl's."""

    key, label = "session_id", "session"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _v1()
        super().__init__(*args, **kwargs)


def _uses_v1(config: Any) -> bool:
    """Whether verl's config runs its V1 trainer (``trainer.use_v1``)."""
    return bool((config.get("trainer") or {}).get("use_v1"))


def _auto_await(func: Callable[..., Any]) -> Any:
    """verl's ``auto_await`` (its managers' ``create``: awaited in a coroutine, run to its end
    from other code); ``func`` itself without verl."""
    try:
        return importlib.import_module("verl.utils.ray_utils").auto_await(func)
    except ImportError:
        return func


class AWorldAgentLoopManager(_base("AgentLoopManager")):  # type: ignore[misc]
    """verl's agent loop manager for either of its trainers: name it in
    ``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` (see the module docstring).
    verl builds it with :meth:`create`, which gives its V1 trainer (``trainer.use_v1=True``)
    an :class:`AWorldAgentLoopManagerTQ`; built here, it is verl's ``AgentLoopManager`` whose
    workers are :class:`AWorldAgentLoopWorker`."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        _verl()
        if _uses_v1(config):
            raise ValueError(
                "aworld_graph.train.verl.AWorldAgentLoopManager(config) serves verl's trainer "
                "with trainer.use_v1=False: for its V1 trainer build it with "
                "AWorldAgentLoopManager.create(config=...) (as verl does), or build "
                "AWorldAgentLoopManagerTQ"
            )
        ray = importlib.import_module("ray")
        self.agent_loop_workers_class = ray.remote(AWorldAgentLoopWorker)
        super().__init__(config, *args, **kwargs)

    @classmethod
    @_auto_await
    async def create(cls, *args: Any, **kwargs: Any) -> Any:
        """verl's ``create``, for the trainer ``config`` names: an
        :class:`AWorldAgentLoopManagerTQ` where ``trainer.use_v1`` is set."""
        _verl()
        config = kwargs["config"] if "config" in kwargs else args[0]
        if _uses_v1(config):
            return await AWorldAgentLoopManagerTQ.create(*args, **kwargs)
        return await super().create(*args, **kwargs)


class AWorldAgentLoopManagerTQ(_base("AgentLoopManagerTQ", _v1)):  # type: ignore[misc]
    """verl's ``AgentLoopManagerTQ`` (its V1 trainer's) whose workers are
    :class:`AWorldAgentLoopWorkerTQ`; :meth:`AWorldAgentLoopManager.create` gives it to
    verl's V1 trainer."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        _v1()
        if not _uses_v1(config):
            raise ValueError(
                "aworld_graph.train.verl.AWorldAgentLoopManagerTQ serves verl's V1 trainer "
                "(trainer.use_v1=True): name AWorldAgentLoopManager in "
                "actor_rollout_ref.rollout.agent.agent_loop_manager_class, which serves both"
            )
        super().__init__(config, *args, **kwargs)
        ray = importlib.import_module("ray")
        # verl's AgentLoopManagerTQ sets its own worker class in its __init__
        self.agent_loop_workers_class = ray.remote(AWorldAgentLoopWorkerTQ)


def register_agent_loop(name: str = AGENT_LOOP_NAME) -> type[AWorldAgentLoop]:
    """Register :class:`AWorldAgentLoop` with verl under ``name`` (done for
    ``aworld_agent`` when verl is installed and this module is imported)."""
    _verl().register(name)(AWorldAgentLoop)
    return AWorldAgentLoop


if _base("AgentLoopBase") is not object:
    register_agent_loop()
