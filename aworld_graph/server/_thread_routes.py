"""The thread endpoints: create, search, count, read, patch, delete, copy, state and history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from ._input import (
    History,
    StateAt,
    StateUpdate,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
    check_id,
    query_count,
)

if TYPE_CHECKING:
    from ._app import App, Rows

__all__ = ["ThreadRoutes"]


class ThreadRoutes:
    def __init__(self, app: App) -> None:
        self.app = app

    def rows(self) -> Rows:
        get, post = ["GET"], ["POST"]
        return [
            ("/threads", self.thread_create, post),
            ("/threads/search", self.thread_search, post),
            ("/threads/count", self.thread_count, post),
            ("/threads/{thread_id:str}", self.thread_get, get),
            ("/threads/{thread_id:str}", self.thread_patch, ["PATCH"]),
            ("/threads/{thread_id:str}", self.thread_delete, ["DELETE"]),
            ("/threads/{thread_id:str}/copy", self.thread_copy, post),
            ("/threads/{thread_id:str}/state", self.state_get, get),
            ("/threads/{thread_id:str}/state", self.state_update, post),
            ("/threads/{thread_id:str}/state/checkpoint", self.state_at, post),
            ("/threads/{thread_id:str}/state/{checkpoint_id:str}", self.state_get, get),
            ("/threads/{thread_id:str}/history", self.history, ["GET", "POST"]),
        ]

    async def thread_create(self, request: Request) -> Response:
        thread_id = await self.app.threads.create(await self.app.checked(request, ThreadCreate))
        return self.app.json(await self.app.threads.get(thread_id))

    async def thread_search(self, request: Request) -> Response:
        return self.app.json(
            await self.app.threads.search(await self.app.checked(request, ThreadSearch))
        )

    async def thread_count(self, request: Request) -> Response:
        body = {**await self.app.checked(request, ThreadSearch), "limit": 1 << 30, "offset": 0}
        return self.app.json(len(await self.app.threads.search(body)))

    async def thread_get(self, request: Request) -> Response:
        return self.app.json(await self.app.threads.get(request.path_params["thread_id"]))

    async def thread_patch(self, request: Request) -> Response:
        body = await self.app.checked(request, ThreadPatch)
        return self.app.json(await self.app.threads.patch(request.path_params["thread_id"], body))

    async def thread_delete(self, request: Request) -> Response:
        await self.app.threads.delete(request.path_params["thread_id"])
        return Response(status_code=204)

    async def thread_copy(self, request: Request) -> Response:
        return self.app.json(await self.app.threads.copy(request.path_params["thread_id"]))

    async def state_get(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        checkpoint = request.path_params.get("checkpoint_id")
        return self.app.json(await self.app.threads.state(thread_id, checkpoint))

    async def state_at(self, request: Request) -> Response:
        body = await self.app.checked(request, StateAt)
        checkpoint = (body.get("checkpoint") or {}).get("checkpoint_id")
        return self.app.json(
            await self.app.threads.state(request.path_params["thread_id"], checkpoint)
        )

    async def state_update(self, request: Request) -> Response:
        body = await self.app.checked(request, StateUpdate)
        return self.app.json(
            await self.app.threads.update_state(request.path_params["thread_id"], body)
        )

    async def history(self, request: Request) -> Response:
        query = request.query_params
        body: dict[str, Any] = {"limit": query_count(query, "limit", 10)}
        if query.get("before"):
            body["before"] = check_id("before", query["before"])
        if request.method == "POST":
            body = await self.app.checked(request, History)
        return self.app.json(await self.app.threads.history(request.path_params["thread_id"], body))
