"""A webhook URL with ``user:password@`` that an older version stored with a run or a cron
(new requests are refused one) is read without the credentials: a restarted server answers
the run and the cron without them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from aworld_graph.checkpoint import TrajectorySaver, Tx
from tests.server.conftest import LiveServer

USER = {"input": "one two three"}
SECRET = "pw-older-version-7f3a"


def _with_credentials(url: str) -> str:
    return url.replace("http://", f"http://hook-user:{SECRET}@", 1)


def test_credentials_an_older_version_stored_are_not_read_back(
    serve: Callable[..., LiveServer], store: TrajectorySaver
) -> None:
    first = serve()
    hook = "http://127.0.0.1:9/hook"  # nothing listens: the POST fails and is logged
    with httpx.Client(base_url=first.url) as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        body = {"assistant_id": "counter", "input": USER, "webhook": hook}
        run = http.post(f"/threads/{thread}/runs", json=body).json()
        http.get(f"/threads/{thread}/runs/{run['run_id']}/join")
        cron = http.post(
            f"/threads/{thread}/runs/crons",
            json={"assistant_id": "counter", "schedule": "0 9 * * *", "webhook": hook},
        ).json()
    first.__exit__(None, None, None)

    def older(tx: Tx) -> None:  # as an older version wrote them: the URL as given
        kwargs = json.loads(tx.one("SELECT kwargs FROM runs WHERE run_id = ?", (run["run_id"],))[0])
        kwargs["webhook"] = _with_credentials(hook)
        tx.run("UPDATE runs SET kwargs = ? WHERE run_id = ?", (json.dumps(kwargs), run["run_id"]))
        payload = json.loads(
            tx.one("SELECT payload FROM crons WHERE cron_id = ?", (cron["cron_id"],))[0]
        )
        payload["webhook"] = _with_credentials(hook)
        tx.run(
            "UPDATE crons SET payload = ? WHERE cron_id = ?",
            (json.dumps(payload), cron["cron_id"]),
        )

    store.database.each(older)
    second = serve()
    with httpx.Client(base_url=second.url) as http:
        got = http.get(f"/threads/{thread}/runs/{run['run_id']}")
        listed = http.get(f"/threads/{thread}/runs")
        crons = http.post("/runs/crons/search", json={})
    every: list[Any] = [got, listed, crons]
    assert all(r.status_code == 200 for r in every), [r.text for r in every]
    assert got.json()["kwargs"]["webhook"] == hook
    assert [c["payload"].get("webhook") for c in crons.json()] == [hook]
    assert all(SECRET not in r.text and "hook-user" not in r.text for r in every)
