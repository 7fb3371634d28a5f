"""AReaL: a workflow object with ``async run(data, **kwargs) -> reward``.

AReaL runs any object with that method behind its OpenAI-compatible proxy, which records the
token ids and logprobs of every call the agent makes through it; ``run`` gets the proxy's
``base_url`` (and ``api_key``, ``http_client``) as keyword arguments. :class:`AReaLWorkflow`
runs the agent there – every LLM call of the episode goes through the proxy – scores the
answer against the row's expected answer and returns the reward.

>>> workflow = AReaLWorkflow(agent=solver, reward_func=numeric)       # doctest: +SKIP
>>> await workflow.run({"messages": [...], "answer": "391"}, base_url=proxy_url)  # doctest: +SKIP

AReaL itself is not a dependency (AReaL 1.0.4 requires ``torch<2.11``, whose Linux wheels
on PyPI are the CUDA builds); nothing here imports it.
A row without a prompt or an expected answer, a reward function that raises, or a run that
did not finish raises :class:`~aworld_graph.train.episodes.RowError` naming the row and why,
and is counted in :attr:`AReaLWorkflow.failed`, with its reason in
:attr:`AReaLWorkflow.errors`. AReaL's ``OpenAIProxyWorkflow`` takes a ``float`` or a dict of
rewards from ``run`` and rejects the trajectory of a ``run`` that raises, logging its message
(a ``None`` it would refuse as "Invalid reward type"); its batch goes on.

Each episode is a new checkpoint thread (``areal-<n>-<uuid>``), so a restarted AReaL samples
every episode again: AReaL hands ``run`` the dataset row and its proxy's ``base_url``,
``api_key`` (one per session) and ``http_client``, and the members of a group get the same
row; its task ids count from 0 in each process and its training step does not reach the
workflow. Nothing of that names one episode across a restart, and a thread named from it
would give one episode another's finished run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..agent import Agent
from .episodes import Episode, RowError, run_episode, served_by

__all__ = ["AReaLWorkflow"]


class AReaLWorkflow:
    """An AReaL agent workflow running ``agent`` on each row (see the module docstring)."""

    def __init__(
        self,
        *,
        agent: Agent,
        reward_func: Callable[..., Any],
        model: str = "default",
    ) -> None:
        self.agent = agent
        self.reward_func = reward_func
        self.model = model
        """The model name sent to the proxy (AReaL's is ``default``)."""
        self.failed = 0
        """Rows that gave no reward."""
        self.errors: list[str] = []
        """Why, one line per failed row."""
        self.episodes: list[Episode] = []
        """Every episode run, in order (its run, reward and token sequences)."""

    async def run(self, data: dict[str, Any], **extra_kwargs: Any) -> float:
        """Run the agent on the row ``data`` through the proxy at ``base_url``: its reward;
        raises :class:`~aworld_graph.train.episodes.RowError` for a row that gives none."""
        base_url = extra_kwargs.get("base_url") or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise ValueError(
                "AReaLWorkflow.run needs base_url= (AReaL passes its proxy's) or OPENAI_BASE_URL"
            )
        agent = served_by(
            self.agent,
            str(base_url),
            model=self.model,
            api_key=extra_kwargs.get("api_key") or os.environ.get("OPENAI_API_KEY"),
            http_client=extra_kwargs.get("http_client"),
        )
        index = len(self.episodes)
        row = dict(data)
        if "messages" in row and "prompt" not in row:
            row["prompt"] = row["messages"]
        episode = await run_episode(
            row, index, agent=agent, reward_func=self.reward_func, thread_prefix="areal"
        )
        self.episodes.append(episode)
        if episode.error is not None:
            self.failed += 1
            self.errors.append(episode.error)
            raise RowError(episode.error)
        return episode.reward
