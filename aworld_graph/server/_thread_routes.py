"""The thread endpoints: create, search, count, read, patch, delete, copy, prune, state and
history. What LangGraph's clients send that this server does not keep (a thread's time to
live) is a 422 naming it, never a request silently half done."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictBool
from starlette.requests import Request
from starlette.responses import Response

from ._input import (
    History,
    StateAt,
    StateUpdate,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
    _Body,
    check_id,
    query_count,
)
from ._wire import ApiError

if TYPE_CHECKING:
    from ._app import App, Rows

__all__ = ["EXACT", "ThreadRoutes", "query_flag", "selected"]

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


THREAD_FIELDS = (
    *("thread_id", "created_at", "updated_at", "metadata", "status", "values"),
    "interrupts",
)
"""The fields of the API's ``Thread`` a search's ``select`` may name."""

_EXTRACTABLE = ("values", "metadata", "interrupts")
"""The fields of a ``Thread`` a search's ``extract`` paths start at."""


def refused(field: str, why: str) -> ApiError:
    """The 422 for an option LangGraph's clients send that this server does not serve."""
    return ApiError(422, "unsupported_option", f"{field} is not served here: {why}")


_NO_TTL = "threads are kept until deleted (DELETE /threads/THREAD, or POST /threads/prune)"


EXACT = ConfigDict(extra="forbid")
"""A body of these routes names only fields they read: another is a 422 naming it."""


class ThreadMade(ThreadCreate):
    """``POST /threads``, every field LangGraph's clients send (``supersteps`` checked by
    :class:`~._threads.Threads`; ``ttl`` refused by :func:`_refuse_create`)."""

    model_config = EXACT
    supersteps: Any = None
    ttl: Any = None


class ThreadPatched(ThreadPatch):
    """``PATCH /threads/{thread_id}`` (``ttl`` refused)."""

    model_config = EXACT
    ttl: Any = None


def _refuse_create(body: Mapping[str, Any]) -> None:
    """A 422 for what ``POST /threads`` may carry from LangGraph's clients but is not served."""
    if body.get("ttl") is not None:
        raise refused("ttl", _NO_TTL)


class ThreadQuery(ThreadSearch):
    """``POST /threads/search`` and ``/threads/count``, as LangGraph's server reads them."""

    model_config = EXACT
    values: dict[str, Any] | None = None
    sort_by: Literal["thread_id", "status", "created_at", "updated_at", "state_updated_at"] = (
        "updated_at"
    )
    sort_order: Literal["asc", "desc"] = "desc"
    select: list[Literal[THREAD_FIELDS]] | None = None  # type: ignore[valid-type]
    extract: (
        Annotated[dict[str, Annotated[str, Field(strict=True)]], Field(max_length=10)] | None
    ) = None


class ThreadPrune(_Body):
    """``POST /threads/prune``."""

    model_config = EXACT
    thread_ids: list[Annotated[str, Field(strict=True)]]
    strategy: Literal["delete", "keep_latest"] = "delete"


class StateQuery(StateAt):
    """``POST /threads/{thread_id}/state/checkpoint``."""

    model_config = EXACT
    subgraphs: StrictBool = False


def extracted(thread: Mapping[str, Any], extract: Mapping[str, str]) -> dict[str, Any]:
    """``alias → value`` at each path of ``extract`` (``values.messages[-1].content``) in
    ``thread``, ``None`` where it leads nowhere, as LangGraph's thread search extracts."""
    out: dict[str, Any] = {}
    for alias, path in extract.items():
        current: Any = thread
        for part in path.replace("[", ".[").split("."):
            if part.startswith("[") and part.endswith("]"):
                index = part[1:-1].lstrip("-")
                fits = isinstance(current, list) and index.isdigit()
                n = int(part[1:-1]) if fits else 0
                current = current[n] if fits and -len(current) <= n < len(current) else None
            elif part:
                current = current.get(part) if isinstance(current, Mapping) else None
        out[alias] = current
    return out


def _check_extract(extract: Mapping[str, str] | None) -> None:
    for alias, path in (extract or {}).items():
        if not alias.isidentifier() or alias in THREAD_FIELDS:
            raise ApiError(
                422,
                "invalid_field",
                f"extract: key {alias[:40]!r} must be a name (letters, digits, _) other than a "
                "thread's own fields",
            )
        if path.split(".")[0].split("[")[0] not in _EXTRACTABLE:
            raise ApiError(
                422,
                "invalid_field",
                f"extract.{alias}: path {path[:60]!r} must start with one of "
                f"{', '.join(_EXTRACTABLE)}, like values.messages[-1].content",
            )


def query_flag(query: Mapping[str, str], name: str) -> bool:
    """Query flag ``name`` (``true``/``false``, any case; absent: false), else a 422."""
    raw = query.get(name, "false").lower()
    if raw not in ("true", "false"):
        raise ApiError(422, "invalid_query", f"{name} must be true or false; got {raw[:20]!r}")
    return raw == "true"


class ThreadRoutes:
    def __init__(self, app: App) -> None:
        self.app = app

    def rows(self) -> Rows:
        get, post = ["GET"], ["POST"]
        return [
            ("/threads", self.thread_create, post),
            ("/threads/search", self.thread_search, post),
            ("/threads/count", self.thread_count, post),
            ("/threads/prune", self.thread_prune, post),
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
        body = await self.app.checked(request, ThreadMade)
        _refuse_create(body)
        thread_id = await self.app.threads.create(body)
        return self.app.json(await self.app.threads.get(thread_id))

    async def _query(self, request: Request) -> dict[str, Any]:
        body = await self.app.checked(request, ThreadQuery)
        _check_extract(body.get("extract"))
        return body

    async def thread_search(self, request: Request) -> Response:
        body = await self._query(request)
        found = await self.app.threads.search(body)
        if body.get("extract"):
            found = [t | {"extracted": extracted(t, body["extract"])} for t in found]
        if body.get("select"):
            keep = {*body["select"], "extracted"}
            found = [{k: v for k, v in t.items() if k in keep} for t in found]
        return self.app.json(found)

    async def thread_count(self, request: Request) -> Response:
        body = {**await self._query(request), "limit": 1 << 30, "offset": 0}
        return self.app.json(len(await self.app.threads.search(body)))

    async def thread_prune(self, request: Request) -> Response:
        body = await self.app.checked(request, ThreadPrune)
        if body.get("strategy") == "keep_latest":
            raise refused(
                "strategy='keep_latest'",
                "a thread's history is kept whole (as in langgraph dev); prune with "
                "strategy='delete', or copy a thread (POST /threads/THREAD/copy)",
            )
        ids = [check_id("thread_ids", str(t)) for t in body["thread_ids"]]
        return self.app.json({"pruned_count": await self.app.threads.prune(ids)})

    async def thread_get(self, request: Request) -> Response:
        include = [f for f in request.query_params.get("include", "").split(",") if f.strip()]
        if include:
            raise refused(f"include={include[0].strip()[:20]}", _NO_TTL + ", so there is no ttl")
        return self.app.json(await self.app.threads.get(request.path_params["thread_id"]))

    async def thread_patch(self, request: Request) -> Response:
        body = await self.app.checked(request, ThreadPatched)
        if body.get("ttl") is not None:
            raise refused("ttl", _NO_TTL)
        thread = await self.app.threads.patch(request.path_params["thread_id"], body)
        if request.headers.get("prefer", "").strip() == "return=minimal":
            return Response(status_code=204)  # as LangGraph's server: the SDK's return_minimal
        return self.app.json(thread)

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
        subgraphs = query_flag(request.query_params, "subgraphs")
        state = await self.app.threads.state(thread_id, checkpoint, subgraphs=subgraphs)
        return self.app.json(selected(state, select))

    async def state_at(self, request: Request) -> Response:
        body = await self.app.checked(request, StateQuery)
        checkpoint = (body.get("checkpoint") or {}).get("checkpoint_id")
        state = await self.app.threads.state(
            request.path_params["thread_id"], checkpoint, subgraphs=bool(body.get("subgraphs"))
        )
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
