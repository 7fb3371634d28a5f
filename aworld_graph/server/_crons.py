"""Crons: runs the server starts on a schedule, as LangGraph's server has them.

A cron is a row of the store's ``crons`` table (made beside the checkpoints when a server
opens the store, read and written through the store's database layer, on SQLite and
PostgreSQL alike): its ``schedule`` (five cron fields, read by ``croniter``; in UTC unless a
``timezone`` is named), the run ``payload`` it starts, its ``thread_id``, ``end_time``,
``enabled``, ``metadata`` and ``next_run_date``. A thread cron runs on its thread
(``multitask_strategy`` ``enqueue`` unless it names another). A cron without a thread starts
a run on a new thread each time; unless its ``on_run_completed`` is ``keep``, the scheduler
joins the run and deletes its thread, as a client would (a server stopped before the run
ended leaves that thread).

:class:`CronScheduler` is one task of the server's event loop (the server's lifespan starts
and stops it): it sleeps until the earliest ``next_run_date`` of an enabled cron (or until a
cron is created, changed or deleted), then fires every cron due, each as the
``POST …/runs`` a client would send, made to the app itself in-process, so a cron's run is
checked, stored and run exactly as a client's. A cron's ``next_run_date`` moves to its next
time after now before its run is asked for; a run the server refuses (the thread waits for
a person, say) is logged and the cron fires again at its next time, as LangGraph's
scheduler does. The crons live in the store, so a restarted server picks them up; one that
came due while no server ran fires once when one starts. Its clock (:attr:`CronScheduler.
clock`) can be replaced, with :meth:`CronScheduler.wake` to have it look again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx

from ..checkpoint import Database, Tx, strip_secrets
from ._run_table import without_credentials
from ._wire import ApiError

__all__ = ["COLUMNS", "CronScheduler", "CronTable", "next_time", "zone"]

log = logging.getLogger("aworld_graph.server")

COLUMNS = (
    "cron_id",
    "assistant_id",
    "thread_id",
    "schedule",
    "timezone",
    "end_time",
    "enabled",
    "on_run_completed",
    "payload",
    "metadata",
    "next_run_date",
    "created_at",
    "updated_at",
)
"""The ``crons`` table's columns: the API's ``Cron`` object but ``user_id`` (always null)."""

_JSON = ("payload", "metadata")
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM crons"


def _create(tx: Tx) -> None:
    columns = ", ".join(f"{name} TEXT" for name in COLUMNS[1:] if name != "enabled")
    tx.run(
        f"CREATE TABLE IF NOT EXISTS crons (cron_id TEXT PRIMARY KEY, enabled INTEGER, {columns})"
    )


def zone(name: Any, field: str = "timezone") -> ZoneInfo:
    """The IANA time zone ``name`` (UTC for none), else a 422 naming ``field``."""
    if name is None:
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        raise ApiError(
            422,
            "invalid_field",
            f"{field} must be an IANA time zone such as 'America/New_York'; got "
            f"{ascii(str(name)[:60])}",
        ) from None


def next_time(schedule: str, after: datetime, timezone: str | None = None) -> datetime:
    """The first time of ``schedule`` after ``after`` (read in ``timezone``), in UTC; a 422
    naming ``schedule`` when it is not five cron fields."""
    import croniter  # type: ignore[import-untyped]

    # croniter also reads six and seven fields (seconds, years): not the schedule served here
    five = isinstance(schedule, str) and len(schedule.split()) == 5
    if not five or not croniter.croniter.is_valid(schedule):
        raise ApiError(
            422,
            "invalid_field",
            f"schedule must be a cron schedule of five fields (minute hour day-of-month month "
            f"day-of-week), e.g. '*/5 * * * *'; got {ascii(str(schedule)[:60])}",
        )
    base = after.astimezone(zone(timezone))
    try:
        found: datetime = croniter.croniter(schedule, base).get_next(datetime)
    except croniter.CroniterBadDateError:  # a day no month has, e.g. '0 0 31 2 *'
        raise ApiError(
            422,
            "invalid_field",
            f"schedule {ascii(schedule[:60])} never comes (no month has that day); name a "
            "day of the month that exists",
        ) from None
    return found.astimezone(UTC)


def _row(values: tuple[Any, ...]) -> dict[str, Any]:
    row = dict(zip(COLUMNS, values, strict=True))
    for name in _JSON:
        row[name] = json.loads(row[name]) if row[name] else {}
    row["enabled"] = bool(row["enabled"])
    row["payload"] = without_credentials(row["payload"])  # an older version's webhook
    return row


class CronTable:
    """The ``crons`` table of one checkpoint store (made when this is built)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        database.each(_create)

    async def put(self, row: dict[str, Any]) -> None:
        """Store ``row`` (every column), replacing the cron of the same ``cron_id``."""
        stored = {k: row.get(k) for k in COLUMNS}
        for name in _JSON:
            stored[name] = json.dumps(strip_secrets(stored[name] or {}))
        stored["enabled"] = int(bool(stored["enabled"]))
        names = ", ".join(COLUMNS)
        update = ", ".join(f"{n} = excluded.{n}" for n in COLUMNS[1:])
        sql = (
            f"INSERT INTO crons ({names}) VALUES ({', '.join('?' * len(COLUMNS))}) "
            f"ON CONFLICT (cron_id) DO UPDATE SET {update}"
        )
        await self.database.aeach(lambda tx: tx.run(sql, [stored[n] for n in COLUMNS]))

    async def get(self, cron_id: str) -> dict[str, Any] | None:
        def read() -> dict[str, Any] | None:
            with self.database.read() as tx:
                found = tx.one(f"{_SELECT} WHERE cron_id = ?", [cron_id])
            return None if found is None else _row(found)

        return await asyncio.to_thread(read)

    async def all(self) -> list[dict[str, Any]]:
        """Every cron, oldest first."""

        def read() -> list[dict[str, Any]]:
            with self.database.read() as tx:
                return [_row(r) for r in tx.all(f"{_SELECT} ORDER BY created_at, cron_id")]

        return await asyncio.to_thread(read)

    async def move(self, cron_id: str, next_run_date: str) -> None:
        """Set a cron's ``next_run_date``."""
        sql = "UPDATE crons SET next_run_date = ? WHERE cron_id = ?"
        await self.database.aeach(lambda tx: tx.run(sql, [next_run_date, cron_id]))

    async def delete(self, cron_id: str) -> bool:
        """Forget a cron; whether there was one."""

        def delete(tx: Tx) -> bool:
            found = tx.one("SELECT cron_id FROM crons WHERE cron_id = ?", [cron_id])
            tx.run("DELETE FROM crons WHERE cron_id = ?", [cron_id])
            return found is not None

        return await self.database.aeach(delete)


class _Server(Protocol):
    """What the scheduler uses of the server app: its ASGI app and API key."""

    app: Any
    api_key: str | None


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _due(cron: dict[str, Any], at: datetime) -> bool:
    if not cron["enabled"] or not cron["next_run_date"]:
        return False
    end = cron["end_time"]
    if end and datetime.fromisoformat(end) < at:
        return False
    return datetime.fromisoformat(cron["next_run_date"]) <= at


class CronScheduler:
    """Fires the crons of ``table`` while the server runs (:meth:`running`)."""

    def __init__(self, table: CronTable, server: _Server) -> None:
        self.table = table
        self.server = server
        self.clock: Callable[[], datetime] = _utcnow
        """The time now (UTC, timezone-aware): replaceable, e.g. by a test's clock."""
        self._changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deleting: set[asyncio.Task[None]] = set()
        """Tasks that delete a cron run's thread when the run ends."""

    def wake(self) -> None:
        """Have the scheduler look at the table again (from any thread)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._changed.set)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The scheduler's task, for the length of the block."""
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        task = self._loop.create_task(self._run(), name="aworld-graph crons")
        try:
            yield
        finally:
            for going in (task, *self._deleting):
                going.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(task, *self._deleting, return_exceptions=True)
            self._loop = None

    async def _run(self) -> None:
        while True:
            self._changed.clear()
            try:
                wait = await self.fire_due()
            except Exception:  # the store failed: try again in a minute
                log.exception("crons: firing the due crons failed")
                wait = 60.0
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._changed.wait()

    async def fire_due(self) -> float | None:
        """Fire every cron due now; the seconds until the next one is due (``None``: none
        is)."""
        at = self.clock()
        soonest: datetime | None = None
        for cron in await self.table.all():
            if _due(cron, at):
                try:
                    following = next_time(cron["schedule"], at, cron["timezone"])
                except ApiError as exc:  # a row stored by an older server: the others still fire
                    log.error("cron %s cannot fire: %s", cron["cron_id"], exc.message)
                    continue
                await self.table.move(cron["cron_id"], following.isoformat())
                try:
                    await self._fire(cron)
                except Exception:  # this cron's run failed to start; the others still fire
                    log.exception("cron %s: asking for its run failed", cron["cron_id"])
                cron["next_run_date"] = following.isoformat()
            if cron["enabled"] and cron["next_run_date"]:
                when = datetime.fromisoformat(cron["next_run_date"])
                ended = cron["end_time"] and datetime.fromisoformat(cron["end_time"]) < when
                if not ended and (soonest is None or when < soonest):
                    soonest = when
        if soonest is None:
            return None
        return max((soonest - self.clock()) / timedelta(seconds=1), 0.0)

    def _client(self) -> httpx.AsyncClient:
        """A client of the app itself, in-process, with its API key."""
        headers = {"x-api-key": self.server.api_key} if self.server.api_key else {}
        transport = httpx.ASGITransport(app=self.server.app)
        return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers)

    async def _fire(self, cron: dict[str, Any]) -> None:
        """Ask the app for the cron's run, as a client would."""
        payload = dict(cron["payload"])
        payload["metadata"] = {**(cron["metadata"] or {}), **(payload.get("metadata") or {})}
        config = dict(payload.get("config") or {})
        config["configurable"] = {**(config.get("configurable") or {}), "cron_id": cron["cron_id"]}
        payload["config"] = config
        path = "/runs"
        if cron["thread_id"]:
            path = f"/threads/{cron['thread_id']}/runs"
            payload.setdefault("multitask_strategy", "enqueue")
        async with self._client() as http:
            answer = await http.post(path, json=payload)
        if answer.status_code >= 400:
            log.warning(
                "cron %s: its run was refused (%s): %s",
                cron["cron_id"],
                answer.status_code,
                answer.text[:500],
            )
        elif not cron["thread_id"] and cron["on_run_completed"] != "keep":
            run = answer.json()
            task = asyncio.get_running_loop().create_task(
                self._delete_after(run["thread_id"], run["run_id"])
            )
            self._deleting.add(task)
            task.add_done_callback(self._deleting.discard)

    async def _delete_after(self, thread_id: str, run_id: str) -> None:
        """Delete the thread of a cron's run once the run has ended
        (``on_run_completed="delete"``)."""
        try:
            async with self._client() as http:
                await http.get(f"/threads/{thread_id}/runs/{run_id}/join", timeout=None)
                await http.delete(f"/threads/{thread_id}")
        except httpx.HTTPError:
            log.exception("cron run %s: deleting its thread %s failed", run_id, thread_id)
