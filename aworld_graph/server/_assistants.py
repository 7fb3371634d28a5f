"""Assistants: the workflows a server serves, one per workflow file or ``MODULE:ATTR`` and one
per optimized version (``workflows/math.v2.yaml`` is assistant ``math@v2`` of graph ``math``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..run import GraphSource, as_source, built
from ._wire import ApiError, clean, now

__all__ = ["Assistant", "Assistants", "target_key"]

_VERSIONED = re.compile(r"^(?P<base>.+)\.v(?P<n>\d+)$")
_STARTED = now()

INPUT_SCHEMA: dict[str, Any] = {
    "title": "Input",
    "type": "object",
    "description": 'The user\'s request: {"messages": [{"role": "user", "content": ...}]} '
    '(LangGraph apps) or {"input": "..."} (AWorld).',
    "properties": {
        "input": {"type": "string"},
        "messages": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "role": {"type": "string"},
                    "type": {"type": "string"},
                    "content": {},
                },
            },
        },
    },
}
STATE_SCHEMA: dict[str, Any] = {
    "title": "SwarmState",
    "type": "object",
    "properties": {
        "messages": {"type": "array", "items": {"type": "object"}},
        "trace": {"type": "array", "items": {"type": "object"}},
        "rewards": {"type": "array", "items": {"type": "object"}},
        "active_agent": {"type": "string"},
        "answer": {"type": ["string", "null"]},
        "outputs": {"type": "object"},
        "input": {"type": "string"},
        "steps": {"type": "integer"},
        "status": {"type": "string"},
        "error": {"type": ["string", "null"]},
        "context": {"type": "object"},
    },
}


def target_key(target: str) -> str:
    """A target compared across processes: a workflow file by its resolved path."""
    if target.endswith((".yaml", ".yml")):
        return os.path.normcase(str(Path(target).resolve()))
    return target


@dataclass(kw_only=True, eq=False)
class Assistant:
    """One served workflow (or one version of it)."""

    assistant_id: str
    """``math`` or ``math@v2``: what clients pass as ``assistant_id``."""
    graph_id: str
    """The workflow's name without the version (``math``)."""
    source: GraphSource
    """What runs: an agent or a swarm."""
    target: str | None = None
    """The workflow file or ``MODULE:ATTR`` it was loaded from; kept in run metadata so
    ``aworld-graph resume`` can continue a run the server started."""
    version: int = 1
    """The workflow version (``math.v2.yaml``: 2)."""
    description: str | None = None
    """What the workflow does."""
    info: dict[str, Any] = field(default_factory=dict)
    """The built graph's static facts (name, kind, workflow file, card versions)."""

    @classmethod
    def of(
        cls, obj: Any, *, target: str | None = None, assistant_id: str | None = None
    ) -> Assistant:
        """An assistant for an ``Agent`` or swarm ``obj`` (loaded from ``target``, if any)."""
        source = as_source(obj)
        info = dict(built(source).info)
        stem = Path(target).stem if target and target.endswith((".yaml", ".yml")) else None
        match = _VERSIONED.match(stem) if stem else None
        if assistant_id is None:
            base = match.group("base") if match else (stem or str(source.name))
            assistant_id = f"{base}@v{match.group('n')}" if match else base
        graph_id = assistant_id.split("@", 1)[0]
        version = int(match.group("n")) if match else int(info.get("workflow_version") or 1)
        return cls(
            assistant_id=assistant_id,
            graph_id=graph_id,
            source=source,
            target=target,
            version=version,
            description=getattr(obj, "description", None) or None,
            info=info,
        )

    def json(self) -> dict[str, Any]:
        """The API's ``Assistant`` object."""
        metadata = {"target": self.target, "kind": self.info.get("kind")}
        if self.info.get("workflow"):
            metadata["workflow"] = self.info["workflow"]
        return {
            "assistant_id": self.assistant_id,
            "graph_id": self.graph_id,
            "name": self.assistant_id,
            "description": self.description,
            "config": {},
            "context": {},
            "metadata": clean(metadata),
            "version": self.version,
            "created_at": _STARTED,
            "updated_at": _STARTED,
        }

    def agent_json(self) -> dict[str, Any]:
        """The Agent Protocol's ``Agent`` object."""
        return {
            "agent_id": self.assistant_id,
            "name": self.assistant_id,
            "description": self.description or "",
            "metadata": self.json()["metadata"],
            "capabilities": {"ap.io.messages": True, "ap.io.streaming": True},
        }

    def graph_json(self, xray: bool | int = False) -> dict[str, Any]:
        """The topology as LangGraph's drawable graph JSON (``nodes`` and ``edges``)."""
        drawable = built(self.source).compile(None).get_graph(xray=xray)
        graph: dict[str, Any] = clean(drawable.to_json())  # a dict stays a dict
        return graph

    def schemas(self) -> dict[str, Any]:
        """Input, output and state schemas (JSON Schema)."""
        return {
            "graph_id": self.graph_id,
            "input_schema": INPUT_SCHEMA,
            "output_schema": STATE_SCHEMA,
            "state_schema": STATE_SCHEMA,
            "config_schema": {"title": "Config", "type": "object", "properties": {}},
            "context_schema": None,
        }


class Assistants:
    """The served assistants, by id."""

    def __init__(self, assistants: Iterable[Assistant]) -> None:
        self.by_id: dict[str, Assistant] = {}
        for a in assistants:
            if a.assistant_id in self.by_id:
                raise ValueError(f"two workflows are both served as assistant {a.assistant_id!r}")
            self.by_id[a.assistant_id] = a
        self._by_target = {target_key(a.target): a for a in self.by_id.values() if a.target}
        for a in self.by_id.values():
            workflow = a.info.get("workflow")
            if workflow:
                self._by_target.setdefault(target_key(str(workflow)), a)

    @classmethod
    def load(
        cls, targets: Iterable[str], load: Callable[[str], Any]
    ) -> tuple[Assistants, list[str]]:
        """Assistants for ``targets`` (loaded with ``load``), and a line per target that failed."""
        found, problems = [], []
        for target in targets:
            try:
                found.append(Assistant.of(load(target), target=target))
            except Exception as exc:  # one broken workflow does not stop the others
                problems.append(f"{target}: {exc}")
        return cls(found), problems

    def __iter__(self) -> Any:
        return iter(self.by_id.values())

    def get(self, assistant_id: str) -> Assistant:
        """The assistant named ``assistant_id`` (or its graph id); a 404 otherwise."""
        found = self.by_id.get(assistant_id)
        if found is None:
            versions = [a for a in self.by_id.values() if a.graph_id == assistant_id]
            found = min(versions, key=lambda a: a.version) if versions else None
        if found is None:
            raise ApiError(
                404,
                "assistant_not_found",
                f"no assistant {assistant_id!r}; this server has "
                f"{sorted(self.by_id) or 'none'} (POST /assistants/search lists them)",
            )
        return found

    def of_metadata(self, metadata: Mapping[str, Any]) -> Assistant | None:
        """The assistant a stored run ran: by ``assistant_id``, else by the ``target`` or
        ``workflow`` a CLI run recorded."""
        ident = metadata.get("assistant_id")
        if isinstance(ident, str) and ident in self.by_id:
            return self.by_id[ident]
        for key in ("target", "workflow"):
            value = metadata.get(key)
            if isinstance(value, str) and target_key(value) in self._by_target:
                return self._by_target[target_key(value)]
        return None

    def search(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``POST /assistants/search``: by ``graph_id``, ``name`` (substring), ``metadata``."""
        out = []
        name = str(body.get("name") or "").lower()
        for a in self.by_id.values():
            data = a.json()
            if body.get("graph_id") and a.graph_id != body["graph_id"]:
                continue
            if name and name not in a.assistant_id.lower():
                continue
            wanted = body.get("metadata") or {}
            if any(data["metadata"].get(k) != v for k, v in wanted.items()):
                continue
            out.append(data)
        offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
        return out[offset : offset + limit]
