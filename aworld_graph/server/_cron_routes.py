"""The cron routes, as LangGraph's server answers them: ``POST /threads/{thread_id}/runs/crons``
and ``/runs/crons`` (create), ``POST /runs/crons/search`` and ``/runs/crons/count``,
``GET``/``PATCH``/``DELETE /runs/crons/{cron_id}``. The crons are rows of the store's
``crons`` table, fired by :class:`~._crons.CronScheduler`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, TypeAdapter
from starlette.requests import Request
from starlette.responses import Response

from ._crons import CronScheduler, CronTable, next_time, zone
from ._input import (
    Id,
    Metadata,
    RunCreate,
    Text,
    _Body,
    check_run_options,
    durability_of,
    validate,
)
from ._runs import STREAM_MODES
from ._thread_routes import EXACT
from ._webhooks import check_webhook
from ._wire import ApiError, clean, now

if TYPE_CHECKING:
    from ._app import App, Rows

__all__ = ["CronRoutes"]

_NOT_PAYLOAD = ("schedule", "timezone", "end_time", "enabled", "on_run_completed")
"""Fields of a cron request that are the cron's own, not its run's."""

Sort = Literal[
    "cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"
]
Field_ = Literal[
    "cron_id",
    "assistant_id",
    "thread_id",
    "on_run_completed",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "user_id",
    "payload",
    "next_run_date",
    "metadata",
    "enabled",
]


class CronCreate(RunCreate):
    """``POST /runs/crons`` and ``/threads/{thread_id}/runs/crons``: a run's body (what each
    firing sends) and the cron's own fields."""

    assistant_id: Annotated[str, Field(strict=True, min_length=1, max_length=256)]
    schedule: Text
    timezone: Text | None = None
    end_time: datetime | None = None
    enabled: bool = True
    on_run_completed: Literal["delete", "keep"] | None = None
    webhook: Text | None = None


class CronPatch(_Body):
    """``PATCH /runs/crons/{cron_id}``: the cron's own fields and those of its run (checked
    as a run's, by :func:`_check_run`); another is a 422 naming it."""

    model_config = EXACT

    assistant_id: Text | None = None  # a cron's assistant stays: its own, or a 422
    context: Any = None
    interrupt_before: Any = None
    interrupt_after: Any = None
    stream_mode: Any = None
    stream_subgraphs: Any = None
    stream_resumable: Any = None
    durability: Any = None
    schedule: Text | None = None
    timezone: Text | None = None
    end_time: datetime | None = None
    enabled: bool | None = None
    on_run_completed: Literal["delete", "keep"] | None = None
    metadata: Metadata | None = None
    input: Any = None
    config: dict[str, Any] | None = None
    webhook: Text | None = None


class CronSearch(_Body):
    """``POST /runs/crons/search`` and ``/runs/crons/count``."""

    model_config = EXACT

    assistant_id: Annotated[str, Field(strict=True, max_length=256)] | None = None
    thread_id: Id | None = None
    enabled: bool | None = None
    metadata: dict[str, Any] | None = None
    limit: Annotated[int, Field(strict=True, ge=1, le=1000)] = 10
    offset: Annotated[int, Field(strict=True, ge=0, le=10_000)] = 0
    sort_by: Sort = "created_at"
    sort_order: Literal["asc", "desc"] = "desc"
    select: list[Field_] | None = None


_TIME = TypeAdapter(datetime)


def _end(value: Any) -> str | None:
    """``end_time`` as a UTC ISO time, read as the request model read it (an ISO time or a
    Unix time in seconds)."""
    if value is None:
        return None
    end = _TIME.validate_python(value)
    return (end if end.tzinfo else end.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def _check_run(payload: dict[str, Any], is_app: bool) -> None:
    """A 422 for a cron's run that its firing would refuse: a field of the wrong type, an
    option the run of the assistant (a LangGraph application if ``is_app``) does not take,
    or a stream mode the server does not serve (checked now, not when it fires)."""
    validate(RunCreate, payload)
    check_run_options(payload)
    durability_of(payload, is_app)
    modes = payload.get("stream_mode")
    for mode in [modes] if isinstance(modes, str) else modes or []:
        if mode not in STREAM_MODES:
            raise ApiError(
                422,
                "invalid_stream_mode",
                f"stream_mode {mode[:40]!r} is not served; use any of {', '.join(STREAM_MODES)}",
            )


def _json(cron: dict[str, Any]) -> dict[str, Any]:
    """The API's ``Cron`` object."""
    shown: dict[str, Any] = clean({**cron, "user_id": None})
    return shown


class CronRoutes:
    """Handlers for ``/runs/crons…`` and ``/threads/{thread_id}/runs/crons``."""

    def __init__(self, app: App, table: CronTable, scheduler: CronScheduler) -> None:
        self.app = app
        self.table = table
        self.scheduler = scheduler

    def rows(self) -> Rows:
        post, one = ["POST"], "/runs/crons/{cron_id:str}"
        return [
            ("/threads/{thread_id:str}/runs/crons", self.create, post),
            ("/runs/crons", self.create, post),
            ("/runs/crons/search", self.search, post),
            ("/runs/crons/count", self.count, post),
            (one, self.get, ["GET"]),
            (one, self.patch, ["PATCH"]),
            (one, self.delete, ["DELETE"]),
        ]

    async def create(self, request: Request) -> Response:
        body = await self.app.checked(request, CronCreate)
        thread_id = request.path_params.get("thread_id")
        assistant = self.app.assistants.get(body["assistant_id"])
        check_webhook(body.get("webhook"))
        if thread_id is not None and not await self.app.threads.exists(thread_id):
            raise self.app.threads.not_found(thread_id)
        timezone = body.get("timezone")
        zone(timezone)
        stamp = datetime.now(UTC)
        payload = {k: v for k, v in body.items() if k not in _NOT_PAYLOAD and v is not None}
        payload["assistant_id"] = assistant.assistant_id
        _check_run(payload, assistant.is_app)
        cron = {
            "cron_id": str(uuid.uuid4()),
            "assistant_id": assistant.assistant_id,
            "thread_id": thread_id,
            "schedule": body["schedule"],
            "timezone": timezone,
            "end_time": _end(body.get("end_time")),
            "enabled": body.get("enabled", True),
            "on_run_completed": None if thread_id else (body.get("on_run_completed") or "delete"),
            "payload": payload,
            "metadata": body.get("metadata") or {},
            "next_run_date": next_time(
                body["schedule"], self.scheduler.clock(), timezone
            ).isoformat(),
            "created_at": stamp.isoformat(),
            "updated_at": stamp.isoformat(),
        }
        await self.table.put(cron)
        self.scheduler.wake()
        return self.app.json(_json(cron))

    async def _cron(self, request: Request) -> dict[str, Any]:
        cron_id = request.path_params["cron_id"]
        found = await self.table.get(cron_id)
        if found is None:
            raise ApiError(
                404, "cron_not_found", f"no cron {cron_id!r}; POST /runs/crons/search lists them"
            )
        return found

    async def get(self, request: Request) -> Response:
        return self.app.json(_json(await self._cron(request)))

    async def patch(self, request: Request) -> Response:
        body = await self.app.body(request)
        if not body:
            raise ApiError(400, "empty_body", "send the fields to change, e.g. {'enabled': false}")
        validate(CronPatch, body)
        cron = await self._cron(request)
        check_webhook(body.get("webhook"))
        named = body.get("assistant_id")
        if (
            named is not None
            and self.app.assistants.get(named).assistant_id != cron["assistant_id"]
        ):
            raise ApiError(
                422,
                "invalid_field",
                f"assistant_id: cron {cron['cron_id']} runs {cron['assistant_id']}, and a "
                "cron's assistant does not change; make a new cron for another",
            )
        if "timezone" in body:
            zone(body["timezone"])
            cron["timezone"] = body["timezone"]
        if body.get("schedule") is not None:
            cron["schedule"] = body["schedule"]
        if "schedule" in body or "timezone" in body:
            when = next_time(cron["schedule"], self.scheduler.clock(), cron["timezone"])
            cron["next_run_date"] = when.isoformat()
        if "end_time" in body:  # null clears it
            cron["end_time"] = _end(body["end_time"])
        for name in ("enabled", "on_run_completed"):
            if body.get(name) is not None:
                cron[name] = body[name]
        if body.get("metadata") is not None:
            cron["metadata"] = {**cron["metadata"], **body["metadata"]}
        changes = {k: v for k, v in body.items() if k not in _NOT_PAYLOAD and v is not None}
        if changes:
            cron["payload"] = {**cron["payload"], **changes}
            cron["payload"]["assistant_id"] = cron["assistant_id"]
            assistant = self.app.assistants.get(cron["assistant_id"])
            _check_run(cron["payload"], assistant.is_app)
        cron["updated_at"] = now()
        await self.table.put(cron)
        self.scheduler.wake()
        return self.app.json(_json(cron))

    async def delete(self, request: Request) -> Response:
        cron_id = request.path_params["cron_id"]
        if not await self.table.delete(cron_id):
            raise ApiError(404, "cron_not_found", f"no cron {cron_id!r}")
        self.scheduler.wake()
        return Response(status_code=204)

    async def _matching(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        crons = await self.table.all()
        if body.get("assistant_id"):
            assistant = self.app.assistants.get(str(body["assistant_id"])).assistant_id
            crons = [c for c in crons if c["assistant_id"] == assistant]
        if body.get("thread_id"):
            crons = [c for c in crons if c["thread_id"] == body["thread_id"]]
        if body.get("enabled") is not None:
            crons = [c for c in crons if c["enabled"] == body["enabled"]]
        wanted = body.get("metadata") or {}
        return [c for c in crons if all(c["metadata"].get(k) == v for k, v in wanted.items())]

    async def search(self, request: Request) -> Response:
        body = await self.app.checked(request, CronSearch)
        crons = await self._matching(body)
        key = str(body.get("sort_by") or "created_at")
        crons.sort(key=lambda c: (c[key] is None, c[key] or ""))
        if body.get("sort_order", "desc") == "desc":
            crons.reverse()
        offset, limit = int(body.get("offset", 0)), int(body.get("limit", 10))
        page = [_json(c) for c in crons[offset : offset + limit]]
        if body.get("select"):
            page = [{k: c[k] for k in body["select"]} for c in page]
        return self.app.json(page)

    async def count(self, request: Request) -> Response:
        body = await self.app.checked(request, CronSearch)
        return self.app.json(len(await self._matching(body)))
