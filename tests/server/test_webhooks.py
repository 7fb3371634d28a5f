"""Webhooks: a run created with ``webhook=URL`` POSTs its final JSON there when it ends (a
loopback Starlette receiver on its own uvicorn server); a webhook that is not an http(s) URL
is a 422 naming it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.server.conftest import LiveServer

USER = {"messages": [{"role": "user", "content": "count these four words"}]}


class Receiver:
    """A loopback server that keeps every JSON body POSTed to ``/hook``."""

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []

        async def hook(request: Request) -> Response:
            self.got.append(await request.json())
            return Response(status_code=204)

        self.app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])

    async def first(self) -> dict[str, Any]:
        for _ in range(600):  # bounded: 30 s
            if self.got:
                return self.got[0]
            await asyncio.sleep(0.05)
        raise AssertionError("no webhook came")


async def test_a_finished_run_posts_its_final_json_to_its_webhook(server: LiveServer) -> None:
    receiver = Receiver()
    with LiveServer(receiver.app) as hooked:
        client = get_client(url=server.url, api_key=None)
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(
            thread, "counter", input=USER, webhook=f"{hooked.url}/hook", metadata={"k": "v"}
        )
        await client.runs.join(thread, run["run_id"])
        got = await receiver.first()
        await client.aclose()
    assert got["run_id"] == run["run_id"] and got["thread_id"] == thread
    assert got["status"] == "success" and got["assistant_id"] == "counter"
    assert got["values"]["answer"] == "4 words"
    assert got["metadata"] == {"k": "v"}
    assert got["run_started_at"] and got["run_ended_at"] and got["webhook_sent_at"]
    assert "error" not in got


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/hook", "/hook", "http:///nohost", "mailto:x@y"])
def test_a_webhook_that_is_not_an_http_url_is_a_422(server: LiveServer, url: str) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        answer = http.post(
            f"/threads/{thread}/runs",
            json={"assistant_id": "counter", "input": USER, "webhook": url},
        )
        assert answer.status_code == 422, answer.text
        assert "webhook" in answer.json()["message"]
        assert http.get(f"/threads/{thread}/runs").json() == []  # nothing was stored


async def test_a_cron_s_run_posts_to_the_cron_s_webhook(server: LiveServer) -> None:
    receiver = Receiver()
    scheduler = server.app.state.server.crons
    start = datetime(2030, 1, 1, 8, 0, tzinfo=UTC)
    scheduler.clock = lambda: start
    with LiveServer(receiver.app) as hooked:
        client = get_client(url=server.url, api_key=None)
        thread = (await client.threads.create())["thread_id"]
        cron = await client.crons.create_for_thread(
            thread, "counter", schedule="0 9 * * *", input=USER, webhook=f"{hooked.url}/hook"
        )
        scheduler.clock = lambda: start + timedelta(hours=2)
        scheduler.wake()
        got = await receiver.first()
        await client.aclose()
    assert got["thread_id"] == thread and got["status"] == "success"
    assert got["kwargs"]["config"]["configurable"]["cron_id"] == cron["cron_id"]
