"""Crons with the real ``langgraph-sdk`` client: a cron fires a run when it comes due, is
searched, counted, changed and deleted, and survives a server restart (a new server on the
same store fires it; SQLite and PostgreSQL). The scheduler's clock is the test's (``server.crons.clock``), moved past
a cron's time, so nothing waits on the wall clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from aworld_graph.checkpoint import TrajectorySaver, open_store
from aworld_graph.server import create_app
from tests.server import apps
from tests.server.conftest import LiveServer, assistants

USER = {"messages": [{"role": "user", "content": "count these four words"}]}
START = datetime(2030, 1, 1, 8, 0, tzinfo=UTC)


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def _server(saver: TrajectorySaver, clock: Clock) -> LiveServer:
    app = create_app(assistants(), store=saver, api_key="")
    app.state.server.crons.clock = clock
    return LiveServer(app)


async def _until(probe: Callable[[], Any]) -> Any:
    """``await probe()`` until it answers something truthy (bounded: 30 s)."""
    for _ in range(600):
        found = await probe()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("nothing came")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_thread_cron_fires_a_run_when_due_and_again_after_a_restart(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    where = (
        str(tmp_path / "server.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    )
    clock = Clock()
    saver = open_store(where)
    try:
        with _server(saver, clock) as server:
            client = get_client(url=server.url, api_key=None)
            thread = (await client.threads.create())["thread_id"]
            cron = await client.crons.create_for_thread(
                thread, "counter", schedule="0 9 * * *", input=USER, metadata={"who": "test"}
            )
            assert cron["next_run_date"] == "2030-01-01T09:00:00+00:00"
            assert cron["thread_id"] == thread and cron["enabled"] is True
            assert await client.runs.list(thread) == []  # not due yet

            clock.now = START + timedelta(hours=1, minutes=1)  # 09:01: due
            server.app.state.server.crons.wake()
            runs = await _until(lambda: client.runs.list(thread, status="success"))
            assert len(runs) == 1
            assert runs[0]["kwargs"]["config"]["configurable"]["cron_id"] == cron["cron_id"]
            assert runs[0]["metadata"]["who"] == "test"
            state = await client.threads.get_state(thread)
            assert state["values"]["answer"] == "4 words"
            moved = await client.crons.search(thread_id=thread)
            assert moved[0]["next_run_date"] == "2030-01-02T09:00:00+00:00"
            await client.aclose()
    finally:
        saver.close()

    clock.now = START + timedelta(days=1, hours=2)  # the next time passed while no server ran
    reopened = open_store(where)  # as a new server process opens it
    try:
        with _server(reopened, clock) as server:
            client = get_client(url=server.url, api_key=None)
            runs = await _until(
                lambda: _with(client.runs.list(thread, status="success"), lambda r: len(r) == 2)
            )
            assert len(runs) == 2
            (kept,) = await client.crons.search(thread_id=thread)
            assert kept["next_run_date"] == "2030-01-03T09:00:00+00:00"
            await client.aclose()
    finally:
        reopened.close()


async def _with(answer: Any, test: Callable[[Any], bool]) -> Any:
    found = await answer
    return found if test(found) else None


async def test_a_cron_without_a_thread_runs_on_a_new_thread(
    server: LiveServer,
) -> None:
    clock = Clock()
    server.app.state.server.crons.clock = clock
    client = get_client(url=server.url, api_key=None)
    before = await client.threads.count()
    cron = await client.crons.create("counter", schedule="*/5 * * * *", input=USER)
    assert cron["thread_id"] is None and cron["on_run_completed"] == "delete"
    kept = await client.crons.create(
        "counter", schedule="*/5 * * * *", input=USER, on_run_completed="keep"
    )
    await client.crons.update(cron["cron_id"], enabled=False)
    clock.now = START + timedelta(minutes=6)
    server.app.state.server.crons.wake()
    await _until(lambda: _with(client.threads.count(), lambda n: n == before + 1))
    threads = await client.threads.search()
    done = await _until(lambda: client.runs.list(threads[0]["thread_id"], status="success"))
    assert done[0]["kwargs"]["config"]["configurable"]["cron_id"] == kept["cron_id"]

    # on_run_completed="delete" (the default): the run's thread goes once the run has ended
    # (its assistant, gated, holds the answer until the test opens the gate)
    await client.crons.update(kept["cron_id"], enabled=False)
    await client.crons.create("gated", schedule="*/5 * * * *", input=USER)
    clock.now = START + timedelta(minutes=11)
    server.app.state.server.crons.wake()
    made = await _until(lambda: _with(client.threads.search(), lambda t: len(t) == 2))
    fresh = next(t for t in made if t["thread_id"] != threads[0]["thread_id"])
    assert (await client.runs.list(fresh["thread_id"]))[0]["status"] in ("pending", "running")
    apps.GATE.set()
    await _until(lambda: _with(client.threads.count(), lambda n: n == before + 1))
    assert await client.threads.search(ids=[fresh["thread_id"]]) == []
    await client.aclose()


async def test_crons_are_searched_counted_changed_and_deleted(server: LiveServer) -> None:
    client = get_client(url=server.url, api_key=None)
    thread = (await client.threads.create())["thread_id"]
    first = await client.crons.create_for_thread(
        thread, "counter", schedule="0 9 * * *", input=USER, metadata={"team": "a"}
    )
    second = await client.crons.create(
        "chat", schedule="30 8 * * 1", input=USER, timezone="Europe/Paris"
    )
    assert await client.crons.count() == 2
    assert await client.crons.count(thread_id=thread) == 1
    assert await client.crons.count(metadata={"team": "a"}) == 1
    assert [c["cron_id"] for c in await client.crons.search(assistant_id="chat")] == [
        second["cron_id"]
    ]
    oldest_first = await client.crons.search(sort_by="created_at", sort_order="asc")
    assert [c["cron_id"] for c in oldest_first] == [first["cron_id"], second["cron_id"]]
    picked = await client.crons.search(select=["cron_id", "schedule"], limit=1, offset=1)
    assert picked == [{"cron_id": first["cron_id"], "schedule": "0 9 * * *"}]

    changed = await client.crons.update(first["cron_id"], schedule="15 10 * * *", enabled=False)
    assert changed["schedule"] == "15 10 * * *" and changed["enabled"] is False
    assert changed["metadata"] == {"team": "a"}
    assert [c["cron_id"] for c in await client.crons.search(enabled=False)] == [first["cron_id"]]

    await client.crons.delete(first["cron_id"])
    assert await client.crons.count() == 1
    async with httpx.AsyncClient(base_url=server.url) as http:
        gone = await http.get(f"/runs/crons/{first['cron_id']}")
        assert gone.status_code == 404
        again = await http.delete(f"/runs/crons/{first['cron_id']}")
        assert again.status_code == 404
        info = (await http.get("/info")).json()
        assert info["flags"]["crons"] is True
    await client.aclose()


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/runs/crons", {"assistant_id": "counter", "schedule": "every day"}, "schedule"),
        ("/runs/crons", {"assistant_id": "counter"}, "schedule"),
        (
            "/runs/crons",
            {"assistant_id": "counter", "schedule": "0 9 * * *", "timezone": "Mars/Base"},
            "timezone",
        ),
        (
            "/runs/crons",
            {"assistant_id": "counter", "schedule": "0 9 * * *", "webhook": "ftp://x/y"},
            "webhook",
        ),
        (
            "/runs/crons",
            {"assistant_id": "counter", "schedule": "0 9 * * *", "end_time": "soon"},
            "end_time",
        ),
        ("/runs/crons/search", {"limit": 0}, "limit"),
        ("/runs/crons/search", {"sort_by": "color"}, "sort_by"),
    ],
)
def test_bad_input_is_a_422_naming_the_field(
    server: LiveServer, path: str, body: dict[str, Any], field: str
) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        answer = http.post(path, json=body)
    assert answer.status_code == 422, answer.text
    assert field in answer.json()["message"]


def test_unknown_assistant_thread_or_cron_is_a_404_and_an_empty_patch_a_400(
    server: LiveServer,
) -> None:
    body = {"assistant_id": "counter", "schedule": "0 9 * * *"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.post("/threads/nope/runs/crons", json=body).status_code == 404
        nobody = http.post("/runs/crons", json={**body, "assistant_id": "nobody"})
        assert nobody.status_code == 404
        cron = http.post("/runs/crons", json=body).json()
        assert http.patch(f"/runs/crons/{cron['cron_id']}", json={}).status_code == 400
        assert http.patch("/runs/crons/missing", json={"enabled": False}).status_code == 404


async def test_with_an_api_key_a_cron_fires_and_its_routes_need_the_key(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve(api_key="cron-test-key")
    clock = Clock()
    server.app.state.server.crons.clock = clock
    async with httpx.AsyncClient(base_url=server.url) as http:
        refused = await http.post("/runs/crons/search", json={})
        assert refused.status_code == 401
    client = get_client(url=server.url, api_key="cron-test-key")
    thread = (await client.threads.create())["thread_id"]
    await client.crons.create_for_thread(thread, "counter", schedule="0 9 * * *", input=USER)
    clock.now = START + timedelta(hours=2)
    server.app.state.server.crons.wake()
    runs = await _until(lambda: client.runs.list(thread, status="success"))
    assert len(runs) == 1  # the server's own request for the run carried the key
    await client.aclose()
