"""The assistant endpoints: ``/assistants…`` and the Agent Protocol's ``/agents…``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from ._input import AssistantSearch, query_count

if TYPE_CHECKING:
    from ._app import App, Rows

__all__ = ["AssistantRoutes"]


class AssistantRoutes:
    def __init__(self, app: App) -> None:
        self.app = app

    def rows(self) -> Rows:
        get, post = ["GET"], ["POST"]
        return [
            ("/assistants/search", self.assistants_search, post),
            ("/assistants/count", self.assistants_count, post),
            ("/assistants/{assistant_id:str}", self.assistant, get),
            ("/assistants/{assistant_id:str}/graph", self.assistant_graph, get),
            ("/assistants/{assistant_id:str}/schemas", self.assistant_schemas, get),
            ("/assistants/{assistant_id:str}/subgraphs", self.assistant_subgraphs, get),
            ("/agents/search", self.agents_search, post),
            ("/agents/{assistant_id:str}", self.agent, get),
            ("/agents/{assistant_id:str}/schemas", self.assistant_schemas, get),
        ]

    async def assistants_search(self, request: Request) -> Response:
        return self.app.json(
            self.app.assistants.search(await self.app.checked(request, AssistantSearch))
        )

    async def assistants_count(self, request: Request) -> Response:
        body = {**await self.app.checked(request, AssistantSearch), "limit": 1 << 30, "offset": 0}
        return self.app.json(len(self.app.assistants.search(body)))

    async def assistant(self, request: Request) -> Response:
        return self.app.json(self.app.assistants.get(request.path_params["assistant_id"]).json())

    async def assistant_graph(self, request: Request) -> Response:
        raw = request.query_params.get("xray", "false").lower()
        if raw not in ("true", "false"):
            query_count(request.query_params, "xray", 0)  # a 422 unless a depth
        xray: bool | int = raw == "true" if raw in ("true", "false") else int(raw)
        found = self.app.assistants.get(request.path_params["assistant_id"])
        return self.app.json(found.graph_json(xray))

    async def assistant_schemas(self, request: Request) -> Response:
        return self.app.json(self.app.assistants.get(request.path_params["assistant_id"]).schemas())

    async def assistant_subgraphs(self, request: Request) -> Response:
        self.app.assistants.get(request.path_params["assistant_id"])
        return self.app.json({})

    async def agents_search(self, request: Request) -> Response:
        found = self.app.assistants.search(await self.app.checked(request, AssistantSearch))
        return self.app.json(
            [self.app.assistants.get(a["assistant_id"]).agent_json() for a in found]
        )

    async def agent(self, request: Request) -> Response:
        return self.app.json(
            self.app.assistants.get(request.path_params["assistant_id"]).agent_json()
        )
