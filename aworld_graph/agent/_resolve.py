"""Which model an agent gets: its ``AgentConfig``, else the ``LLM_*`` environment, else the
embedded local model.

It sits above :mod:`aworld_graph.model` and :mod:`aworld_graph.local` (the local model
is an ``OpenAIModel`` on a loopback server), so neither imports the other's user.
"""

from __future__ import annotations

from ..config import AgentConfig
from ..local import LocalModel
from ..model import ChatModel, OpenAIModel

__all__ = ["resolve_model"]


def resolve_model(conf: AgentConfig | None) -> ChatModel:
    """The model for an agent: its ``AgentConfig``, else ``LLM_*`` env vars, else the local one."""
    resolved = (conf or AgentConfig()).resolved()
    provider = (resolved.llm_provider or "").lower()
    if provider in ("local", "smollm2") or (
        not provider and not resolved.llm_base_url and not resolved.llm_model_name
    ):
        return LocalModel(temperature=resolved.llm_temperature, params=resolved.params)
    return OpenAIModel(
        model=resolved.llm_model_name or "gpt-4o-mini",
        base_url=resolved.llm_base_url,
        api_key=resolved.llm_api_key,
        temperature=resolved.llm_temperature,
        max_retries=resolved.max_retries,
        timeout=resolved.timeout,
        params=resolved.params,
    )
