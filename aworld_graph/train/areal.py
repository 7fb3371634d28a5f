"""AReaL: a workflow object with ``async run(data, **kwargs) -> reward``.

AReaL runs any object with that method behind its OpenAI-compatible proxy, which records the
token ids and logprobs of every call the agent makes through it and trains on those; ``run``
gets the proxy's ``base_url`` (and ``api_key``, ``http_client``) as keyword arguments.
:class:`AReaLWorkflow` runs the agent there – every LLM call of the episode goes through the
proxy – scores the answer against the row's expected answer and returns the reward. AReaL
1.0.4's proxy returns no token ids or logprobs to the agent (it drops the request's
``logprobs`` and ``return_token_ids``), so the workflow asks for none and keeps no token
sequences: what AReaL trains on is what its proxy recorded (tests/train/test_areal_real.py).

>>> workflow = AReaLWorkflow(agent=solver, reward_func=numeric)       # doctest: +SKIP
>>> await workflow.run({"messages": [...], "answer": "391"}, base_url=proxy_url)  # doctest: +SKIP

AReaL itself is not a dependency (AReaL 1.0.4 requires ``torch<2.11``; the tests run it in a
venv of its own); nothing here imports it.
A row without a prompt or an expected answer, a reward function that raises, or a run that
did not finish raises :class:`~aworld_graph.train.episodes.RowError` naming the row and why,
and is counted in :attr:`AReaLWorkflow.failed`, with its reason in
:attr:`AReaLWorkflow.errors`. AReaL's ``OpenAIProxyWorkflow`` takes a ``float`` or a dict of
rewards from ``run`` and rejects the trajectory of a ``run`` that raises, logging its message
(a ``None`` it would refuse as "Invalid reward type"); its batch goes on.

By default each episode is a new checkpoint thread (``areal-<n>-<uuid>``). AReaL hands
``run`` the dataset row and its proxy's ``base_url``, ``api_key`` (one per session) and
``http_client``; the members of a group get the same row, its task ids count from 0 in each
process and its training step does not reach the workflow. Nothing of that names one episode
across a restart, but a group's members are samples of one prompt, any of which may stand for
another. So with ``run_id`` an episode's thread is ``areal-<run_id>-<digest>-<k>``, the
digest of the row's prompt and expected answer, and ``k`` the first that is neither taken in
this process nor finished in the store: a restarted AReaL on the same store resumes each
episode its killed process left unfinished (from its last checkpoint, its finished tool calls
not run again) and samples every other one anew. A finished episode is never read back:
AReaL trains on the calls its proxy recorded in this session, and a finished episode made
none here. A resumed one trains on the calls made after the restart (its earlier ones went
through the killed process's proxy session). An episode whose run failed (AReaL rejected it)
is left unfinished as well: it is not run again in its process, and a restarted one resumes
it like a killed one. A thread another process runs at that moment is passed over. Processes
that run rollouts at the same time give each its own ``run_id`` (say, with its rank), as does
an evaluation workflow: with one ``run_id``, an episode another process finishes between this
one's look at the store and its run would be read back, a reward for no calls. AReaL's ``subproc`` mode runs each call
in a fresh copy of the workflow, in which a group's members could take each other's threads,
and passes ``base_url`` only as ``OPENAI_BASE_URL``: ``run_id`` there is refused.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..agent import Agent
from ..checkpoint import open_store
from ..errors import ConfigError
from ..run import GraphRun, pending_nodes
from ..task import Task
from .episodes import (
    ANSWER_FIELDS,
    Episode,
    RowError,
    digest,
    prompt_text,
    run_episode,
    served_by,
)

__all__ = ["AReaLWorkflow"]


class AReaLWorkflow:
    """An AReaL agent workflow running ``agent`` on each row (see the module docstring)."""

    def __init__(
        self,
        *,
        agent: Agent,
        reward_func: Callable[..., Any],
        model: str = "default",
        run_id: str | None = None,
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
        """Every episode run, in order (its run and reward; AReaL's proxy keeps the tokens)."""
        self.run_id = run_id
        """Names the episodes' threads so that a restarted run resumes them (see the module
        docstring); ``None``: each is a new thread."""
        self._taken: set[str] = set()
        """Threads this workflow has run or passed over as finished (not those it found
        another process running)."""

    async def run(self, data: dict[str, Any], **extra_kwargs: Any) -> float:
        """Run the agent on the row ``data`` through the proxy at ``base_url``: its reward;
        raises :class:`~aworld_graph.train.episodes.RowError` for a row that gives none."""
        base_url = extra_kwargs.get("base_url") or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise ValueError(
                "AReaLWorkflow.run needs base_url= (AReaL passes its proxy's) or OPENAI_BASE_URL"
            )
        if self.run_id is not None and not extra_kwargs.get("base_url"):
            raise ConfigError(
                f"AReaLWorkflow(run_id={self.run_id!r}) resumes episodes in AReaL's inline mode "
                "only (run gets base_url=): each call of its subproc mode is a fresh copy of the "
                "workflow, which cannot tell its threads from another call's; leave run_id out "
                "there, or use OpenAIProxyWorkflow(mode='inline')"
            )
        agent = served_by(
            self.agent,
            str(base_url),
            model=self.model,
            api_key=extra_kwargs.get("api_key") or os.environ.get("OPENAI_API_KEY"),
            http_client=extra_kwargs.get("http_client"),
            record_tokens=False,
        )
        index = len(self.episodes)
        row = dict(data)
        if "messages" in row and "prompt" not in row:
            row["prompt"] = row["messages"]
        episode = Episode(index=index)
        async for thread in self._threads(row, index, agent):
            episode = await run_episode(
                row,
                index,
                agent=agent,
                reward_func=self.reward_func,
                thread_prefix="areal",
                thread_id=thread,
                sequences=False,
            )
            if episode.response is None or episode.response.status != "busy":
                break
            # another process runs that thread now: take the next, and let a later draw of
            # the row look at this one again
            self._taken.discard(str(thread))
        self.episodes.append(episode)
        if episode.error is not None:
            self.failed += 1
            self.errors.append(episode.error)
            raise RowError(episode.error)
        return float(episode.reward)  # AReaL takes a float (or a dict), not an int

    async def _threads(
        self, row: dict[str, Any], index: int, agent: Agent
    ) -> AsyncIterator[str | None]:
        """The threads to try for ``row``, in turn: ``None`` (a new thread) without
        ``run_id`` or for a row that cannot run; else each thread of the row's episodes,
        from the first, that is new or left unfinished and not taken in this process."""
        try:
            text = prompt_text(row, index)
        except RowError:
            yield None  # run_episode says why
            return
        if self.run_id is None:
            yield None
            return
        expected = next((row[k] for k in ANSWER_FIELDS if k in row), None)
        prefix = f"areal-{self.run_id}-{digest([text, expected], 16)}"
        store = open_store(shared=True)
        for k in itertools.count():
            thread = f"{prefix}-{k}"
            if thread in self._taken:
                continue
            self._taken.add(thread)  # before any await: a group's members take one each
            async with GraphRun(Task(input=text, agent=agent, id=thread), store) as run:
                snapshot = await run.snapshot()
            if snapshot.created_at is None or pending_nodes(snapshot):
                yield thread  # new, or left unfinished (a process killed, a failed call)
