"""AWorld-style configuration objects: ``AgentConfig``, ``TaskConfig``, ``TaskRunMode``,
``RunConfig``."""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ConfigError

__all__ = ["AgentConfig", "DEFAULT_MAX_STEPS", "RunConfig", "TaskConfig", "TaskRunMode"]

DEFAULT_MAX_STEPS = 20
"""The step budget of a task when neither its ``TaskConfig`` nor its swarm sets one."""


@dataclass(kw_only=True)
class AgentConfig:
    """How an agent reaches its model (AWorld's field names).

    Unset fields fall back to the environment variables ``LLM_PROVIDER``, ``LLM_MODEL_NAME``,
    ``LLM_BASE_URL``, ``LLM_API_KEY`` and ``LLM_TEMPERATURE``; with no endpoint configured at
    all, the embedded local model (SmolLM2-135M-Instruct on llama.cpp) is used.
    """

    llm_provider: str | None = None
    """``openai`` (any OpenAI-compatible endpoint: OpenAI, vLLM, llama.cpp server) or ``local``."""
    llm_model_name: str | None = None
    """Model name sent to the endpoint."""
    llm_base_url: str | None = None
    """Base URL of the OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8000/v1``."""
    llm_api_key: str | None = field(default=None, repr=False)
    """API key; never written to a checkpoint, trajectory, log or export."""
    llm_temperature: float | None = None
    """Sampling temperature."""
    max_retries: int = 3
    """Retries on 429, 5xx and timeouts, with exponential backoff."""
    timeout: float = 120.0
    """Seconds to wait for one model call."""
    params: dict[str, Any] = field(default_factory=dict)
    """Extra parameters passed to ``chat.completions.create`` (``max_tokens``, ``top_p``, …)."""
    record_tokens: bool = False
    """Keep what the model sampled in each LLM call's trace record, as ``tokens``: the
    prompt's token ids, the sampled completion's ids, each one's logprob and the tokenizer
    (from the embedded model, vLLM, or any endpoint returning them); an endpoint that returns
    none is marked ``{"available": false, "reason": …}``. On for rollouts meant for training
    (docs/training.md, *Token-level trajectories*)."""

    def resolved(self) -> AgentConfig:
        """A copy with unset fields filled from ``LLM_*`` environment variables."""
        env = os.environ
        temperature = self.llm_temperature
        if temperature is None and env.get("LLM_TEMPERATURE"):
            try:
                temperature = float(env["LLM_TEMPERATURE"])
            except ValueError:
                raise ConfigError(
                    f"LLM_TEMPERATURE={env['LLM_TEMPERATURE']!r} is not a number; "
                    "set it to a float such as 0.2 or unset it"
                ) from None
        return AgentConfig(
            llm_provider=self.llm_provider or env.get("LLM_PROVIDER") or None,
            llm_model_name=self.llm_model_name or env.get("LLM_MODEL_NAME") or None,
            llm_base_url=self.llm_base_url or env.get("LLM_BASE_URL") or None,
            llm_api_key=self.llm_api_key or env.get("LLM_API_KEY") or None,
            llm_temperature=temperature,
            max_retries=self.max_retries,
            timeout=self.timeout,
            params=dict(self.params),
            record_tokens=self.record_tokens,
        )

    def public(self) -> dict[str, Any]:
        """The configuration without secrets, for trajectories and cards."""
        return {
            "llm_provider": self.llm_provider,
            "llm_model_name": self.llm_model_name,
            "llm_base_url": self.llm_base_url,
            "llm_temperature": self.llm_temperature,
        }


class TaskRunMode(enum.StrEnum):
    """How ``Runners`` drives a task."""

    NORMAL = "normal"
    """Run until the graph finishes (or hits ``max_steps``)."""
    INTERACTIVE = "interactive"
    """One superstep per ``Runners.step`` call; state is kept in the checkpointer between calls."""


@dataclass(kw_only=True)
class TaskConfig:
    """Per-task settings (AWorld's names where they exist)."""

    max_steps: int | None = None
    """Upper bound on node executions (LLM calls + tool executions) in one run. It wins over
    the swarm's own ``max_steps`` (a workflow file's), as a command-line flag wins over a file;
    ``None`` uses the swarm's, else :data:`DEFAULT_MAX_STEPS`."""
    resp_carry_context: bool = True
    """Include the conversation (``state.messages``) in each trajectory item."""
    run_mode: TaskRunMode = TaskRunMode.NORMAL
    """``NORMAL`` runs to the end; ``INTERACTIVE`` is driven by ``Runners.step``."""
    timeout: float | None = None
    """Seconds before the run is cancelled (it stays resumable)."""
    stream: bool = False
    """Stream model tokens as events (used by ``Runners.streaming_run``)."""
    ext: dict[str, Any] = field(default_factory=dict)
    """Free-form extra settings, kept in the run's metadata."""

    def __post_init__(self) -> None:
        steps = self.max_steps
        if steps is not None and (
            isinstance(steps, bool) or not isinstance(steps, int) or steps < 1
        ):
            raise ConfigError(
                f"TaskConfig.max_steps must be a whole number of at least 1, got {steps!r}; "
                "give the most node executions the run may take (or leave it unset to use the "
                f"swarm's max_steps, else {DEFAULT_MAX_STEPS})"
            )


@dataclass(kw_only=True)
class RunConfig:
    """Where a batch of runs goes (AWorld's ``RunConfig``): this process, or a Ray cluster.

    ``Runners.run_task``, ``Runners.rollout``, the meta-learning evaluation and ``optimize``
    take it as ``run_conf=``. On Ray, long-lived worker actors each run a share of the batch
    on their own event loop, write to the same checkpoint store as the driver, and send back
    the same ``TaskResponse`` objects the local engine returns (see ``docs/scale-out.md``).
    """

    engine_name: Literal["local", "ray"] = "local"
    """``local`` runs in this process's event loop; ``ray`` on Ray worker actors (extra
    ``ray``)."""
    worker_num: int = 2
    """Ray worker actors (processes) sharing the batch; ignored by the local engine."""
    max_concurrency: int = 8
    """Runs in flight at once per worker (for the local engine: in this process)."""
    address: str | None = None
    """An existing Ray cluster (``ray://host:10001``, ``host:6379`` or ``auto``); ``None``
    uses the one this process already joined, else starts a local one on 127.0.0.1."""
    runtime_env: dict[str, Any] | None = None
    """Ray ``runtime_env`` of the worker actors, passed through (``env_vars`` such as
    ``LLM_BASE_URL``, ``pip``, ``working_dir``…)."""
    progress: bool | None = None
    """Show a progress bar on stderr for a batch; ``None``: when stderr is a terminal."""
    max_retries: int = 2
    """Times a run whose worker died is retried on another worker (it resumes from its last
    checkpoint)."""

    def __post_init__(self) -> None:
        if self.engine_name not in ("local", "ray"):
            raise ConfigError(f"RunConfig(engine_name={self.engine_name!r}): use 'local' or 'ray'")
        for name in ("worker_num", "max_concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"RunConfig({name}={value!r}) must be a whole number of at least 1"
                )
        if (
            isinstance(self.max_retries, bool)
            or not isinstance(self.max_retries, int)
            or (self.max_retries < 0)
        ):
            raise ConfigError(
                f"RunConfig(max_retries={self.max_retries!r}) must be a whole number, 0 or more"
            )
        if self.runtime_env is not None and not isinstance(self.runtime_env, dict):
            raise ConfigError(
                "RunConfig(runtime_env=...) must be a dict, as ray.init takes it, e.g. "
                "{'env_vars': {'LLM_BASE_URL': 'http://10.0.0.5:8000/v1'}}"
            )
