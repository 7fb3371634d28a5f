"""Candidates: versions of a workflow, kept as workflow data (the YAML form, nodes inline).

A candidate's ``spec`` is what :func:`~aworld_graph.spec.swarm_to_dict` gives for a swarm:
plain data that goes to YAML and back losslessly, so it can be stored in the database,
edited by the rewrite operators and turned into a runnable :class:`~aworld_graph.swarm.Swarm`
again by :func:`materialize`. Each node keeps its card fields (``version``, ``parent``,
``score``, ``operator``), so the lineage of every node travels with the workflow.
"""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..agent import Agent
from ..model import ChatModel
from ..swarm import Swarm

__all__ = [
    "Candidate",
    "Evaluation",
    "materialize",
    "next_version",
    "node_of",
    "nodes_of",
    "seed_spec",
]


@dataclass(kw_only=True)
class Evaluation:
    """The result of running one candidate on one split."""

    candidate: str
    """Candidate id."""
    split: str
    """``train``, ``dev`` or ``test``."""
    scores: dict[str, float] = field(default_factory=dict)
    """Task id → reward."""
    threads: dict[str, str] = field(default_factory=dict)
    """Task id → checkpoint thread of its run."""
    statuses: dict[str, str] = field(default_factory=dict)
    """Task id → how the run ended (``finished``, ``max_steps``, ``error``…)."""
    mean: float = float("nan")
    """Mean reward."""
    ci_low: float = float("nan")
    """Lower end of the 95 % bootstrap interval of the mean."""
    ci_high: float = float("nan")
    """Upper end."""
    llm_calls: int = 0
    """Model calls made by the runs."""
    tokens: int = 0
    """Tokens used by the runs (prompt + completion)."""
    seconds: float = 0.0
    """Wall time of the evaluation."""

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def ci(self) -> tuple[float, float]:
        return (self.ci_low, self.ci_high)

    @property
    def errors(self) -> int:
        """Runs that ended in an error (they score like any other run, usually 0)."""
        return sum(1 for s in self.statuses.values() if s == "error")

    def values(self, order: Sequence[str] | None = None) -> list[float]:
        """Scores in ``order`` of task ids (default: as stored)."""
        return [self.scores[t] for t in (order if order is not None else list(self.scores))]

    def as_dict(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "split": self.split,
            "scores": self.scores,
            "threads": self.threads,
            "statuses": self.statuses,
            "mean": self.mean,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "llm_calls": self.llm_calls,
            "tokens": self.tokens,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evaluation:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def summary(self) -> str:
        return (
            f"{self.split} {self.mean:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}] n={self.n} "
            f"({self.llm_calls} calls, {self.tokens} tokens, {self.seconds:.1f}s)"
        )


@dataclass(kw_only=True)
class Candidate:
    """One version of the workflow in the optimizer's pool."""

    id: str
    """``c000`` (the seed), ``c001``…"""
    spec: dict[str, Any]
    """The workflow as data (nodes inline)."""
    parent: str | None = None
    """The candidate it was derived from."""
    operator: str = "seed"
    """The rewrite operator that made it (``rewrite_prompt``, ``demos``, ``insert_critic``…)."""
    target: str | None = None
    """The node the operator changed, if one."""
    change: str = ""
    """What changed, in words."""
    key: str = ""
    """Identifies the edit, so that one parent is not given the same edit twice."""
    iteration: int = 0
    """The search iteration that made it."""
    status: str = "pending"
    """``seed``, ``pending`` (made, not yet judged), ``accepted``, ``rejected`` or ``invalid``."""
    evals: dict[str, Evaluation] = field(default_factory=dict)
    """Split → evaluation."""
    cost: dict[str, float] = field(default_factory=dict)
    """What making it cost (the optimizer agent's calls, tokens, seconds)."""

    def score(self, split: str) -> float | None:
        """Mean reward on ``split``, if evaluated there."""
        ev = self.evals.get(split)
        return None if ev is None else ev.mean

    def node(self, name: str) -> dict[str, Any] | None:
        return node_of(self.spec, name)

    def agents(self) -> list[str]:
        """Names of the agent nodes (top level), in order."""
        return [n["name"] for n in nodes_of(self.spec) if n.get("kind") == "agent"]


def nodes_of(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The top-level node definitions of a workflow spec (inline ones)."""
    return [n for n in spec.get("nodes") or [] if isinstance(n, dict) and "name" in n]


def node_of(spec: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The node named ``name`` in ``spec`` (top level), or ``None``."""
    return next((n for n in nodes_of(spec) if n["name"] == name), None)


def next_version(candidates: list[Candidate], name: str) -> int:
    """One more than the highest version node ``name`` has in any candidate so far."""
    versions = [int(n.get("version") or 1) for c in candidates if (n := c.node(name)) is not None]
    return max(versions, default=0) + 1


def seed_spec(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The spec of a workflow file, and each node's card file (for nodes that came from one)."""
    from ..spec import load_workflow, swarm_to_dict

    swarm = load_workflow(path)
    origins = {
        name: str(meta["card"])
        for name, meta in (swarm.info.get("cards") or {}).items()
        if meta.get("card")
    }
    return swarm_to_dict(swarm), origins


def _sample_as_carded(swarm: Swarm) -> None:
    """An agent given the embedded model object samples as its card says (``llm_temperature``,
    ``params``: the ``set_temperature`` / ``set_max_tokens`` edits); an agent whose model is
    resolved from its card gets them anyway. Other model objects are used as they are."""
    from ..local import LocalModel

    for node in swarm.nodes.values():
        if isinstance(node, Agent) and isinstance(node.model, LocalModel) and node.conf:
            temperature, params = node.conf.llm_temperature, dict(node.conf.params or {})
            if temperature is not None or params:
                node.model = LocalModel(
                    temperature=node.model.temperature if temperature is None else temperature,
                    params={**node.model.params, **params},
                )


def materialize(
    spec: Mapping[str, Any],
    *,
    model: ChatModel | None = None,
    models: Mapping[str, ChatModel] | None = None,
    pool: Mapping[str, ChatModel] | None = None,
    info: Mapping[str, Any] | None = None,
) -> Swarm:
    """A runnable swarm for ``spec`` (raises :class:`~aworld_graph.spec.SpecError` if invalid).

    ``model`` / ``models`` are applied as :func:`~aworld_graph.spec.load_workflow` does;
    then every agent whose ``model.llm_model_name`` names a model of ``pool`` runs on that
    model object (how a model swap is tried with fake or pre-built models). ``info`` is
    merged into ``swarm.info`` (it lands in every run's metadata).
    """
    from ..spec import load_workflow

    with tempfile.TemporaryDirectory(prefix="aworld-meta-") as tmp:
        path = Path(tmp) / "candidate.yaml"
        path.write_text(
            yaml.safe_dump(copy.deepcopy(dict(spec)), sort_keys=False), encoding="utf-8"
        )
        swarm = load_workflow(path, model=model, models=models)
    if pool:
        for node in swarm.nodes.values():
            if isinstance(node, Agent) and node.conf:
                name = node.conf.llm_model_name
                if name is not None and name in pool:
                    node.model = pool[name]
    _sample_as_carded(swarm)
    swarm.info = {**swarm.info, **dict(info or {})}
    return swarm
