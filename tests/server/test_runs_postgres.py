"""The server's runs table on PostgreSQL: a run is stored, listed and read back there as on
SQLite (a throw-away server in a temp dir, ``tests/postgres.py``)."""

from __future__ import annotations

import httpx

from aworld_graph.checkpoint import open_store
from aworld_graph.server import create_app
from tests.server.conftest import LiveServer, assistants

RUN = {"assistant_id": "counter", "input": {"input": "three words here"}}


def test_runs_are_stored_listed_and_read_back_on_postgresql(pg_url: str) -> None:
    saver = open_store(pg_url)
    try:
        with LiveServer(create_app(assistants(), store=saver, api_key="")) as server:
            with httpx.Client(base_url=server.url, timeout=60) as http:
                thread = http.post("/threads", json={}).json()["thread_id"]
                done = http.post(f"/threads/{thread}/runs/wait", json=RUN)
                assert done.status_code == 200 and done.json()["answer"] == "3 words"
                runs = http.get(f"/threads/{thread}/runs").json()
                assert [r["status"] for r in runs] == ["success"]
                run_id = runs[0]["run_id"]
        # a second server on the same database reads the run from the table
        with LiveServer(create_app(assistants(), store=saver, api_key="")) as again:
            with httpx.Client(base_url=again.url, timeout=60) as http:
                run = http.get(f"/threads/{thread}/runs/{run_id}")
                assert run.status_code == 200, run.text
                assert run.json()["status"] == "success" and run.json()["assistant_id"] == "counter"
    finally:
        saver.close()
