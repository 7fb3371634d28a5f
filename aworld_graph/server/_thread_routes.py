"""The thread endpoints: create, search, count, read, patch, delete, copy, state and history."""

from __future__ import annotations

from collections.abc import Sequence
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
from ._wire import ApiError

if TYPE_CHECKING:
    from ._app import App, Rows

__all__ = ["ThreadRoutes", "selected"]

STATE_FIELDS = (
    *("values", "next", "tasks", "checkpoint", "metadata", "created_at"),
    *("parent_checkpoint", "interrupts"),
)
"""The fields of the API's ``ThreadState`` a ``select`` may name (and ``values.KEY``)."""


def selected(state: dict[str, Any], select: Sequence[str] | None) -> dict[str, Any]:
    """``state`` with only the fields ``select`` names, as LangGraph's ``select``:
    ``values.KEY`` keeps one key of the values. No ``select``: every field."""
    if not select:
        return state
    out: dict[str, Any] = {}
    keys = []
    for name in select:
        if name in STATE_FIELDS:
            out[name] = state[name]
        elif name.startswith("values.") and len(name) > len("values."):
            keys.append(name.removeprefix("values."))
        else:
            raise ApiError(
                422,
                "invalid_field",
                f"select: {name[:40]!r} is not a field of a thread state; use any of "
                f"{', '.join(STATE_FIELDS)}, or values.KEY for one key of its values",
            )
    if keys and "values" not in out:
        out["values"] = {k: state["values"][k] for k in keys if k in state["values"]}
    return out


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
        select = request.query_params.getlist("select")
        selected({name: None for name in STATE_FIELDS} | {"values": {}}, select)  # 422 first
        return self.app.json(selected(await self.app.threads.state(thread_id, checkpoint), select))

    async def state_at(self, request: Request) -> Response:
        body = await self.app.checked(request, StateAt)
        checkpoint = (body.get("checkpoint") or {}).get("checkpoint_id")
        state = await self.app.threads.state(request.path_params["thread_id"], checkpoint)
        return self.app.json(selected(state, body.get("select")))

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
        else:
            body["select"] = query.getlist("select")
        select = body.get("select")
        selected({name: None for name in STATE_FIELDS} | {"values": {}}, select)  # 422 first
        states = await self.app.threads.history(request.path_params["thread_id"], body)
        return self.app.json([selected(state, select) for state in states])
