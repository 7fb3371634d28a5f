"""Assistants: what a server serves. Each served graph is a *system* assistant, as LangGraph's
server makes one per graph: one per workflow file or ``MODULE:ATTR`` (an aworld-graph agent
or swarm, or any LangGraph application), one per optimized version
(``workflows/math.v2.yaml`` is assistant ``math@v2`` of graph ``math``), one per graph of a
``langgraph.json``. Assistants created over the API (``POST /assistants``) are versions of a
served graph's settings (``config``, ``context``, ``metadata``, ``name``, ``description``),
kept in the store (:class:`~._assistant_table.AssistantTable`) so they outlive the server;
their ``config`` and ``context`` apply to their runs as LangGraph's server applies them.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from ..run import AppGraph, GraphSource, LangGraphApp, as_source, built
from ._langgraph_app import app_command, steers
from ._wire import ApiError, clean, input_text, now

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from ._assistant_table import AssistantTable

__all__ = ["Assistant", "Assistants", "target_key"]

LANGGRAPH_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
"""LangGraph's server names a graph's own assistant ``uuid5(LANGGRAPH_NAMESPACE, graph_id)``;
that id finds the same assistant here."""

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


SORTABLE = ("assistant_id", "created_at", "updated_at", "name", "graph_id")
"""What ``POST /assistants/search`` sorts by (``sort_by``)."""
FIELDS = (
    *("assistant_id", "graph_id", "name", "description", "config", "context"),
    *("created_at", "updated_at", "metadata", "version"),
)
"""The fields of the API's ``Assistant`` object (what ``select`` picks from)."""


def contains(whole: Any, part: Any) -> bool:
    """Whether ``whole`` contains ``part`` as PostgreSQL's ``@>`` says (LangGraph's metadata
    filter): every key of an object with a contained value, every item of a list found."""
    if isinstance(part, Mapping):
        return isinstance(whole, Mapping) and all(
            k in whole and contains(whole[k], v) for k, v in part.items()
        )
    if isinstance(part, list):
        return isinstance(whole, list) and all(any(contains(w, p) for w in whole) for p in part)
    return bool(whole == part)


def _object(field: str, value: Any) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise ApiError(
            422,
            "invalid_field",
            f"{field} must be a JSON object (or null); got {type(value).__name__}",
        )


def mirrored(
    config: Mapping[str, Any] | None, context: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``config`` and ``context`` kept in step as LangGraph's server keeps them: the
    ``configurable`` values are the context, or the context fills ``configurable``. Both at
    once is a 400, as there; a ``config``, ``config.configurable`` or ``context`` that is
    not an object is a 422 naming it."""
    _object("config", config)
    _object("context", context)
    config = {k: v for k, v in dict(config or {}).items()}
    _object("config.configurable", config.get("configurable"))
    context = dict(context or {})
    configurable = dict(config.get("configurable") or {})
    if configurable and context:
        raise ApiError(
            400,
            "config_and_context",
            "give either config.configurable or context, not both (context is LangGraph's "
            "replacement for configurable)",
        )
    if configurable:
        context = dict(configurable)
    elif context:
        config["configurable"] = dict(context)
    return config, context


def _langgraph_id(graph_id: str) -> str:
    return str(uuid.uuid5(LANGGRAPH_NAMESPACE, graph_id))


def target_key(target: str) -> str:
    """A target compared across processes: a workflow file by its resolved path."""
    if target.endswith((".yaml", ".yml")):
        return os.path.normcase(str(Path(target).resolve()))
    return target


@dataclass(kw_only=True, eq=False)
class Assistant:
    """One served graph (or one version of a workflow), or an assistant created over the API."""

    assistant_id: str
    """``math``, ``math@v2`` or a created assistant's id: what clients pass as
    ``assistant_id``."""
    graph_id: str
    """The graph's name without the version (``math``)."""
    source: GraphSource
    """What runs: an agent, a swarm or a LangGraph application."""
    target: str | None = None
    """The workflow file or ``MODULE:ATTR`` it was loaded from; kept in run metadata so
    ``aworld-graph resume`` can continue a run the server started."""
    version: int = 1
    """The workflow version (``math.v2.yaml``: 2), or a created assistant's version."""
    description: str | None = None
    """What the workflow does."""
    info: dict[str, Any] = field(default_factory=dict)
    """The built graph's static facts (name, kind, workflow file, card versions)."""
    name: str | None = None
    """Its name (a system assistant's: its id)."""
    config: dict[str, Any] = field(default_factory=dict)
    """The LangGraph config its runs start from (a created assistant's)."""
    context: dict[str, Any] = field(default_factory=dict)
    """The runtime context its runs start from (a created assistant's)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """A created assistant's metadata."""
    created_at: str = _STARTED
    updated_at: str = _STARTED
    system: bool = True
    """Made by the server for a served graph (not over the API)."""

    @classmethod
    def of(
        cls,
        obj: Any,
        *,
        target: str | None = None,
        assistant_id: str | None = None,
        description: str | None = None,
    ) -> Assistant:
        """An assistant for an ``Agent``, a swarm or a LangGraph application ``obj`` (loaded
        from ``target``, if any)."""
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
            description=description or getattr(obj, "description", None) or None,
            info=info,
        )

    def created(self, row: Mapping[str, Any]) -> Assistant:
        """The assistant a stored row describes, running this (system) assistant's graph."""
        return replace(
            self,
            assistant_id=str(row["assistant_id"]),
            graph_id=str(row["graph_id"]),
            version=int(row["version"]),
            name=row.get("name"),
            description=row.get("description"),
            config=dict(row.get("config") or {}),
            context=dict(row.get("context") or {}),
            metadata=dict(row.get("metadata") or {}),
            created_at=str(row.get("created_at") or _STARTED),
            updated_at=str(row.get("updated_at") or _STARTED),
            system=False,
        )

    @property
    def is_app(self) -> bool:
        """Whether it runs a LangGraph application (its own state, not ``SwarmState``)."""
        return isinstance(self.source, LangGraphApp)

    def json(self) -> dict[str, Any]:
        """The API's ``Assistant`` object."""
        if self.system:
            metadata: dict[str, Any] = {"target": self.target, "kind": self.info.get("kind")}
            if self.info.get("workflow"):
                metadata["workflow"] = self.info["workflow"]
            metadata["created_by"] = "system"
        else:
            metadata = self.metadata
        return {
            "assistant_id": self.assistant_id,
            "graph_id": self.graph_id,
            "name": self.name or self.assistant_id,
            "description": self.description,
            "config": clean(self.config),
            "context": clean(self.context),
            "metadata": clean(metadata),
            "version": self.version,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    def version_json(self) -> dict[str, Any]:
        """The API's ``AssistantVersion`` object of this assistant as it is."""
        data = self.json()
        return {k: data[k] for k in FIELDS if k != "updated_at"}

    def agent_json(self) -> dict[str, Any]:
        """The Agent Protocol's ``Agent`` object."""
        return {
            "agent_id": self.assistant_id,
            "name": self.name or self.assistant_id,
            "description": self.description or "",
            "metadata": self.json()["metadata"],
            "capabilities": {"ap.io.messages": True, "ap.io.streaming": True},
        }

    @asynccontextmanager
    async def graph(self) -> AsyncIterator[Any]:
        """Its graph compiled without a store, for the block (to draw it or read its
        schemas); a LangGraph factory is called with this assistant's config, on the
        caller's event loop."""
        source = built(self.source)
        config: RunnableConfig = {**self.config}  # type: ignore[typeddict-item]
        if isinstance(source, AppGraph):
            async with source.read(config if self.config else None) as graph:
                yield graph
        else:
            yield source.compile(None)

    async def graph_json(self, xray: bool | int = False) -> dict[str, Any]:
        """The topology as LangGraph's drawable graph JSON (``nodes`` and ``edges``)."""
        async with self.graph() as compiled:
            drawable = compiled.get_graph(xray=xray)
        graph: dict[str, Any] = clean(drawable.to_json())  # a dict stays a dict
        if self.is_app:  # as LangGraph's server: a node's data without its class path
            for node in graph.get("nodes", []):
                if isinstance(node.get("data"), dict):
                    node["data"].pop("id", None)
        return graph

    async def schemas(self) -> dict[str, Any]:
        """Input, output, state, config and context schemas (JSON Schema): a LangGraph
        application's own, as LangGraph's server gives them."""
        if self.is_app:
            from ._langgraph_app import graph_schemas

            async with self.graph() as compiled:
                return {"graph_id": self.graph_id, **graph_schemas(compiled)}
        return {
            "graph_id": self.graph_id,
            "input_schema": INPUT_SCHEMA,
            "output_schema": STATE_SCHEMA,
            "state_schema": STATE_SCHEMA,
            "config_schema": {"title": "Config", "type": "object", "properties": {}},
            "context_schema": None,
        }

    async def subgraphs(self, namespace: str | None, recurse: bool) -> dict[str, Any]:
        """``namespace → schemas`` of the graph's subgraphs (a compiled graph used as a node);
        an aworld-graph workflow has none (a nested swarm runs as a thread of its own)."""
        if not self.is_app:
            return {}
        from ._langgraph_app import graph_schemas

        async with self.graph() as compiled:
            return {
                ns: graph_schemas(sub)
                async for ns, sub in compiled.aget_subgraphs(namespace=namespace, recurse=recurse)
            }

    def text_of(self, value: Any) -> str | None:
        """The task input of a run request's ``input`` (``None``: there is none). A LangGraph
        application takes any input as it is: its text is the last user message when it has
        one, else empty."""
        if not self.is_app:
            return input_text(value)
        if value is None:
            return None
        try:
            return input_text(value) or ""
        except ApiError:
            return ""

    def run_input(self, body: Mapping[str, Any]) -> str | None:
        """:meth:`text_of` a run request's ``input``, its ``config`` and ``context`` checked
        (both ``config.configurable`` and ``context`` is a 400, as in LangGraph's server)."""
        mirrored(body.get("config"), body.get("context"))
        return self.text_of(body.get("input"))

    def run_options(self, run_id: str, thread_id: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """What :meth:`GraphRun.drive <aworld_graph.run.GraphRun.drive>` takes for a run of
        this assistant with the request's ``kwargs``: the ``input`` as it came, and the
        ``config`` and ``context`` as LangGraph's server makes them (the assistant's, the
        run's over them, and the run's ids in ``configurable``)."""
        run_config, run_context = mirrored(kwargs.get("config"), kwargs.get("context"))
        configurable = {
            **dict(self.config.get("configurable") or {}),
            **dict(run_config.get("configurable") or {}),
            "run_id": run_id,
            "thread_id": thread_id,
            "graph_id": self.graph_id,
            "assistant_id": self.assistant_id,
        }
        config = {**self.config, **run_config, "configurable": configurable}
        context = {**self.context, **run_context}
        given = kwargs.get("input")
        if self.is_app and steers(kwargs.get("command")):  # LangGraph's Command as the input
            given = app_command(kwargs["command"])
        subgraphs = bool(kwargs.get("stream_subgraphs"))  # a workflow has none: no-op
        return {"input": given, "config": config, "context": context, "subgraphs": subgraphs}


class Assistants:
    """The served assistants, by id: the system ones in memory, the created ones in the
    store's ``assistants`` table once :meth:`keep_in` names it."""

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
        self.table: AssistantTable | None = None
        """Where created assistants are kept (``None``: none can be created)."""

    def keep_in(self, saver: Any) -> None:
        """Keep created assistants in ``saver``'s store (its tables made if missing)."""
        from ._assistant_table import AssistantTable

        self.table = AssistantTable(saver)

    def give_store(self, saver: Any, store: BaseStore) -> None:
        """Give the served LangGraph applications' runs on ``saver`` ``store`` (a node's
        ``store``, ``runtime.store``), as LangGraph's server gives a graph its store."""
        for a in self.by_id.values():
            graph = built(a.source)
            if isinstance(graph, AppGraph):
                graph.use_store(saver, store)

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
        """The system assistants."""
        return iter(self.by_id.values())

    def graph(self, graph_id: str) -> Assistant | None:
        """The system assistant that serves graph ``graph_id`` (its first version)."""
        found = self.by_id.get(graph_id)
        if found is not None and found.graph_id == graph_id:
            return found
        versions = [a for a in self.by_id.values() if a.graph_id == graph_id]
        return min(versions, key=lambda a: a.version) if versions else None

    def graph_ids(self) -> list[str]:
        return sorted({a.graph_id for a in self.by_id.values()})

    def _made(self, row: Mapping[str, Any] | None) -> Assistant | None:
        """A stored row as an assistant (``None``: no row, or its graph is not served)."""
        if row is None:
            return None
        base = self.graph(str(row["graph_id"]))
        return None if base is None else base.created(row)

    def find(self, assistant_id: str) -> Assistant | None:
        """The assistant named ``assistant_id`` (or its graph id), or ``None``."""
        found = self.by_id.get(assistant_id)
        if found is None and self.table is not None:
            found = self._made(self.table.get(assistant_id))
        if found is None:  # LangGraph's id of a graph's own assistant
            found = next(
                (a for a in self.by_id.values() if _langgraph_id(a.graph_id) == assistant_id),
                None,
            )
        return found or self.graph(assistant_id)

    def get(self, assistant_id: str) -> Assistant:
        """The assistant named ``assistant_id`` (or its graph id); a 404 otherwise."""
        found = self.find(assistant_id)
        if found is None:
            raise ApiError(
                404,
                "assistant_not_found",
                f"no assistant {assistant_id!r}; this server serves the graphs "
                f"{self.graph_ids() or 'none'} (POST /assistants/search lists the assistants)",
            )
        return found

    def of_metadata(self, metadata: Mapping[str, Any]) -> Assistant | None:
        """The assistant a stored run ran: by ``assistant_id`` (a deleted created assistant:
        its graph's), else by the ``target`` or ``workflow`` a CLI run recorded."""
        ident = metadata.get("assistant_id")
        if isinstance(ident, str):
            found = self.by_id.get(ident)
            if found is None and self.table is not None:
                found = self._made(self.table.get(ident))
            if found is not None:
                return found
        for key in ("target", "workflow"):
            value = metadata.get(key)
            if isinstance(value, str) and target_key(value) in self._by_target:
                return self._by_target[target_key(value)]
        graph = metadata.get("graph_id")
        return self.graph(graph) if isinstance(graph, str) and ident is not None else None

    async def every(self) -> list[Assistant]:
        """The system assistants, then the created ones (of the graphs served here)."""
        rows = await self.table.aall() if self.table is not None else []
        made = [a for a in (self._made(r) for r in rows) if a is not None]
        return [*self.by_id.values(), *made]

    async def matching(self, body: Mapping[str, Any]) -> list[Assistant]:
        """``POST /assistants/search`` and ``/count``: by ``graph_id``, ``name`` (a
        substring, any case), ``metadata`` (contained), sorted by ``sort_by``
        (``created_at`` by default) in ``sort_order`` (``desc`` by default)."""
        graph_id, name = body.get("graph_id"), str(body.get("name") or "").lower()
        if graph_id and self.graph(str(graph_id)) is None:
            raise ApiError(
                404,
                "graph_not_found",
                f"graph_id {graph_id!r} is not served here; the graphs are {self.graph_ids()}",
            )
        wanted = body.get("metadata") or {}
        found = []
        for a in await self.every():
            data = a.json()
            if graph_id and a.graph_id != graph_id:
                continue
            if name and name not in str(data["name"]).lower():
                continue
            if wanted and not contains(data["metadata"], wanted):
                continue
            found.append(a)
        key = str(body.get("sort_by") or "created_at")
        descending = str(body.get("sort_order") or "desc").lower() != "asc"
        lower = key in ("name", "graph_id")
        found.sort(
            key=lambda a: str(a.json()[key]).lower() if lower else str(a.json()[key]),
            reverse=descending,
        )
        return found
