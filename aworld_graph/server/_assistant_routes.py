"""The assistant endpoints: ``/assistants…`` (read, search, count, graph, schemas, subgraphs;
create, update, versions, latest, delete) and the Agent Protocol's ``/agents…``.

Created assistants follow LangGraph's server: ``POST /assistants`` makes version 1 (``name``
defaults to ``Untitled``; ``if_exists`` ``raise`` is a 409, ``do_nothing`` returns the one
there); ``PATCH`` makes a new version (``metadata`` merged, other given fields replaced) and
makes it the latest; ``…/versions`` lists versions newest first; ``…/latest`` makes a version
the assistant's own; ``DELETE`` removes it and its versions. A graph's own (system) assistant
is the served graph itself: it is read, searched and run, but not changed or deleted here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from ._assistants import Assistant, contains, mirrored
from ._input import Count, Id, Metadata, Text, _Body, query_count
from ._thread_routes import EXACT, query_flag
from ._wire import ApiError

if TYPE_CHECKING:
    from ._app import App, Rows

__all__ = ["AssistantRoutes"]

Limit = Annotated[int, Field(strict=True, ge=1, le=1000)]


class _Config(_Body):
    """A LangGraph config as an assistant or a run carries it."""

    tags: list[Text] | None = None
    recursion_limit: Annotated[int, Field(strict=True, ge=1)] | None = None
    configurable: dict[str, Any] | None = None


class AssistantCreate(_Body):
    """``POST /assistants``."""

    model_config = EXACT

    graph_id: Text
    assistant_id: Id | None = None
    config: _Config | None = None
    context: dict[str, Any] | None = None
    metadata: Metadata | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    name: Annotated[str, Field(strict=True, max_length=1000)] | None = None
    description: Annotated[str, Field(strict=True, max_length=10_000)] | None = None


class AssistantPatch(_Body):
    """``PATCH /assistants/{assistant_id}``."""

    model_config = EXACT

    graph_id: Text | None = None
    config: _Config | None = None
    context: dict[str, Any] | None = None
    metadata: Metadata | None = None
    name: Annotated[str, Field(strict=True, max_length=1000)] | None = None
    description: Annotated[str, Field(strict=True, max_length=10_000)] | None = None


class AssistantQuery(_Body):
    """``POST /assistants/search``, ``/assistants/count`` and ``/agents/search``."""

    model_config = EXACT

    graph_id: Text | None = None
    name: Text | None = None
    metadata: dict[str, Any] | None = None
    limit: Count = 10
    offset: Count = 0
    sort_by: Literal["assistant_id", "created_at", "updated_at", "name", "graph_id"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: (
        list[
            Literal[
                "assistant_id",
                "graph_id",
                "name",
                "description",
                "config",
                "context",
                "created_at",
                "updated_at",
                "metadata",
                "version",
            ]
        ]
        | None
    ) = None


class AssistantVersions(_Body):
    """``POST /assistants/{assistant_id}/versions``."""

    model_config = EXACT

    metadata: dict[str, Any] | None = None
    limit: Limit = 10
    offset: Count = 0


class AssistantLatest(_Body):
    """``POST /assistants/{assistant_id}/latest``."""

    model_config = EXACT

    version: Annotated[int, Field(strict=True, ge=1)]


class AssistantRoutes:
    def __init__(self, app: App) -> None:
        self.app = app

    def rows(self) -> Rows:
        get, post = ["GET"], ["POST"]
        one = "/assistants/{assistant_id:str}"
        return [
            ("/assistants", self.create, post),
            ("/assistants/search", self.assistants_search, post),
            ("/assistants/count", self.assistants_count, post),
            (one, self.assistant, get),
            (one, self.update, ["PATCH"]),
            (one, self.delete, ["DELETE"]),
            (f"{one}/versions", self.versions, post),
            (f"{one}/latest", self.latest, post),
            (f"{one}/graph", self.assistant_graph, get),
            (f"{one}/schemas", self.assistant_schemas, get),
            (f"{one}/subgraphs", self.assistant_subgraphs, get),
            (f"{one}/subgraphs/{{namespace:str}}", self.assistant_subgraphs, get),
            ("/agents/search", self.agents_search, post),
            ("/agents/{assistant_id:str}", self.agent, get),
            ("/agents/{assistant_id:str}/schemas", self.assistant_schemas, get),
        ]

    # -- reading ---------------------------------------------------------------------------

    async def _search(self, request: Request) -> tuple[list[Assistant], dict[str, Any]]:
        body = await self.app.checked(request, AssistantQuery)
        return await self.app.assistants.matching(body), body

    async def assistants_search(self, request: Request) -> Response:
        found, body = await self._search(request)
        offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
        page = [a.json() for a in found[offset : offset + limit]]
        if body.get("select"):
            page = [{k: v for k, v in a.items() if k in body["select"]} for a in page]
        if len(found) > offset + limit:  # as LangGraph's server pages
            headers = {"X-Pagination-Total": str(offset + limit + 1)}
            headers["X-Pagination-Next"] = str(offset + limit)
        else:
            headers = {"X-Pagination-Total": str(len(page) + offset)}
        return self.app.json(page, headers=headers)

    async def assistants_count(self, request: Request) -> Response:
        found, _ = await self._search(request)
        return self.app.json(len(found))

    def _get(self, request: Request) -> Assistant:
        return self.app.assistants.get(request.path_params["assistant_id"])

    async def assistant(self, request: Request) -> Response:
        return self.app.json(self._get(request).json())

    async def assistant_graph(self, request: Request) -> Response:
        raw = request.query_params.get("xray", "false").lower()
        if raw not in ("true", "false"):
            query_count(request.query_params, "xray", 0)  # a 422 unless a depth
        xray: bool | int = raw == "true" if raw in ("true", "false") else int(raw)
        try:
            return self.app.json(await self._get(request).graph_json(xray))
        except NotImplementedError:
            raise ApiError(422, "not_drawable", "this graph cannot be drawn") from None

    async def assistant_schemas(self, request: Request) -> Response:
        return self.app.json(await self._get(request).schemas())

    async def assistant_subgraphs(self, request: Request) -> Response:
        found = self._get(request)
        recurse = query_flag(request.query_params, "recurse")
        namespace = request.path_params.get("namespace")
        return self.app.json(await found.subgraphs(namespace, recurse))

    async def agents_search(self, request: Request) -> Response:
        found, body = await self._search(request)
        offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
        return self.app.json([a.agent_json() for a in found[offset : offset + limit]])

    async def agent(self, request: Request) -> Response:
        return self.app.json(self._get(request).agent_json())

    # -- changing --------------------------------------------------------------------------

    def _table(self) -> Any:
        table = self.app.assistants.table
        if table is None:  # an Assistants made without a store (not through the app)
            raise ApiError(409, "no_store", "this server keeps no assistants of its own")
        return table

    def _graph(self, graph_id: str) -> None:
        if self.app.assistants.graph(graph_id) is None:
            raise ApiError(
                404,
                "graph_not_found",
                f"graph_id {graph_id!r} is not served here; the graphs are "
                f"{self.app.assistants.graph_ids()} (serve it: aworld-graph serve "
                "MODULE:ATTR, or add it to langgraph.json)",
            )

    def _own(self, assistant_id: str, what: str) -> str:
        """``assistant_id`` when it may be ``what`` (changed): a 409 for a graph's own."""
        system = self.app.assistants.by_id.get(assistant_id)
        if system is not None:
            raise ApiError(
                409,
                "system_assistant",
                f"assistant {assistant_id} is graph {system.graph_id}'s own (served from "
                f"{system.target or 'this server'}), so it cannot be {what} over the API; "
                f"create an assistant of it (POST /assistants with graph_id "
                f"{system.graph_id!r}) and change that",
            )
        return assistant_id

    async def create(self, request: Request) -> Response:
        import uuid

        body = await self.app.checked(request, AssistantCreate)
        graph_id = str(body["graph_id"])
        self._graph(graph_id)
        config, context = mirrored(body.get("config"), body.get("context"))
        assistant_id = str(body.get("assistant_id") or uuid.uuid4())
        if assistant_id in self.app.assistants.by_id:
            if body.get("if_exists") == "do_nothing":
                return self.app.json(self.app.assistants.by_id[assistant_id].json())
            self._own(assistant_id, "created again")  # a 409 naming the graph
        row = {
            "assistant_id": assistant_id,
            "graph_id": graph_id,
            "name": body.get("name") or "Untitled",
            "description": body.get("description"),
            "config": config,
            "context": context,
            "metadata": body.get("metadata") or {},
        }
        stored, _ = await self._table().create(row, str(body.get("if_exists") or "raise"))
        return self.app.json(self.app.assistants.get(str(stored["assistant_id"])).json())

    async def update(self, request: Request) -> Response:
        body = await self.app.checked(request, AssistantPatch)
        assistant_id = self._own(request.path_params["assistant_id"], "updated")
        if body.get("graph_id") is not None:
            self._graph(str(body["graph_id"]))
        changes: dict[str, Any] = {
            k: body[k]
            for k in ("graph_id", "name", "description", "metadata")
            if body.get(k) is not None
        }
        if body.get("config") is not None or body.get("context") is not None:
            config, context = mirrored(body.get("config"), body.get("context"))
            if body.get("config"):
                changes["config"] = config
            if body.get("context") is not None or config.get("configurable"):
                changes["context"] = context
                changes.setdefault("config", config)
        await self._table().update(assistant_id, changes)
        return self.app.json(self.app.assistants.get(assistant_id).json())

    async def versions(self, request: Request) -> Response:
        body = await self.app.checked(request, AssistantVersions)
        assistant_id = str(request.path_params["assistant_id"])
        system = self.app.assistants.by_id.get(assistant_id)
        if system is not None:
            rows = [system.version_json()]
        else:
            table = self._table()
            base = self.app.assistants.get(assistant_id)
            rows = [base.created(r).version_json() for r in table.versions(assistant_id)]
        wanted = body.get("metadata") or {}
        if wanted:
            rows = [r for r in rows if contains(r["metadata"], wanted)]
        offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
        return self.app.json(rows[offset : offset + limit])

    async def latest(self, request: Request) -> Response:
        body = await self.app.checked(request, AssistantLatest)
        assistant_id = self._own(request.path_params["assistant_id"], "set to another version")
        await self._table().set_latest(assistant_id, int(body["version"]))
        return self.app.json(self.app.assistants.get(assistant_id).json())

    async def delete(self, request: Request) -> Response:
        """``DELETE /assistants/{id}``; with ``delete_threads=true``, as LangGraph's server,
        also every thread whose ``metadata.assistant_id`` is this assistant (its runs and
        checkpoints with it)."""
        assistant_id = self._own(request.path_params["assistant_id"], "deleted")
        threads = query_flag(request.query_params, "delete_threads")
        self.app.assistants.get(assistant_id)  # a 404 before anything is cancelled
        for run in list(self.app.runs.live.values()):  # its runs going stop, as LangGraph's do
            if run.assistant.assistant_id == assistant_id:
                await self.app.runs.cancel(run, wait=threads)
        if threads:
            mine = {"metadata": {"assistant_id": assistant_id}, "limit": 1 << 30}
            for thread in await self.app.threads.search(mine):
                await self.app.threads.delete(thread["thread_id"])
        await self._table().delete(assistant_id)
        return Response(status_code=204)
