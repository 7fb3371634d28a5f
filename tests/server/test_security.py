"""Auth, bad input and secrets: every error is a JSON 4xx naming the problem, never a
traceback; with a key set only health answers without it; nothing secret comes back."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from click.testing import CliRunner
from langgraph_sdk import get_client
from langgraph_sdk.errors import AuthenticationError

from aworld_graph.cli import main
from aworld_graph.errors import ConfigError
from aworld_graph.server import check_bind
from tests.server.conftest import TARGETS, LiveServer

KEY = "test-key-7f3a9c"


def _json_error(response: httpx.Response, status: int, words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"code", "message"} and words in body["message"], body
    assert "Traceback" not in response.text


def test_bad_requests_get_clear_json_errors(serve: Callable[..., LiveServer]) -> None:
    server = serve(max_body=4096)
    with httpx.Client(base_url=server.url) as http:
        as_json = {"Content-Type": "application/json"}
        _json_error(http.post("/threads", content=b"{not json", headers=as_json), 400, "not JSON")
        _json_error(
            http.post("/threads", content=b"[1, 2]", headers=as_json), 422, "must be a JSON object"
        )
        _json_error(
            http.post("/threads", content=b"x" * 5000, headers=as_json), 413, "over 4096 bytes"
        )
        _json_error(http.get("/threads/ghost"), 404, "no thread 'ghost'")
        _json_error(http.get("/threads/ghost/state"), 404, "no thread 'ghost'")
        _json_error(
            http.post("/runs/wait", json={"assistant_id": "nope"}), 404, "no assistant 'nope'"
        )
        _json_error(http.get("/no/such/route"), 404, "no route GET /no/such/route")
        _json_error(http.put("/assistants/search"), 405, "PUT is not served")
        thread = http.post("/threads", json={}).json()["thread_id"]
        run = {
            "assistant_id": "counter",
            "input": {"messages": [{"role": "robot", "content": "x"}]},
        }
        _json_error(http.post(f"/threads/{thread}/runs", json=run), 422, "no known role")
        run = {"assistant_id": "counter", "input": {"input": "a"}, "stream_mode": "everything"}
        _json_error(
            http.post(f"/threads/{thread}/runs/stream", json=run), 422, "'everything' is not served"
        )
        run = {"assistant_id": "counter", "command": {"resume": "yes"}}
        _json_error(http.post(f"/threads/{thread}/runs", json=run), 409, "nothing to resume")
        run = {"assistant_id": "counter", "input": {"input": "a"}, "multitask_strategy": "x"}
        _json_error(http.post(f"/threads/{thread}/runs", json=run), 422, "multitask_strategy")
        _json_error(http.get(f"/threads/{thread}/runs/nope"), 404, "no run")
        assert (
            "access-control-allow-origin"
            not in http.get("/ok", headers={"Origin": "http://x"}).headers
        )


async def test_api_key_is_required_on_every_route_but_health(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve(api_key=KEY)
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get("/ok")).json() == {"ok": True}
        for method, path in (("POST", "/assistants/search"), ("GET", "/"), ("GET", "/threads/x")):
            _json_error(await http.request(method, path, json={}), 401, "API key")
        _json_error(
            await http.post("/assistants/search", headers={"x-api-key": KEY + "x"}), 401, "API key"
        )
        ok = await http.post(
            "/assistants/search", json={}, headers={"Authorization": f"Bearer {KEY}"}
        )
        assert ok.status_code == 200 and len(ok.json()) == len(TARGETS)
        assert (await http.get(f"/?key={KEY}")).status_code == 200
    anonymous = get_client(url=server.url, api_key=None)
    with pytest.raises(AuthenticationError):
        await anonymous.assistants.search()
    await anonymous.aclose()
    keyed = get_client(url=server.url, api_key=KEY)
    result = await keyed.runs.wait(None, "counter", input={"input": "with a key"})
    assert result["answer"] == "3 words"
    await keyed.aclose()


def test_cors_only_when_configured(serve: Callable[..., LiveServer]) -> None:
    server = serve(cors_origins=["http://127.0.0.1:9999"])
    with httpx.Client(base_url=server.url) as http:
        ok = http.get("/ok", headers={"Origin": "http://127.0.0.1:9999"})
        assert ok.headers["access-control-allow-origin"] == "http://127.0.0.1:9999"
        other = http.get("/ok", headers={"Origin": "http://elsewhere.test"})
        assert "access-control-allow-origin" not in other.headers


def test_secrets_never_come_back(serve: Callable[..., LiveServer]) -> None:
    server = serve()
    secret = "sk-live-abcdef0123456789abcdef"
    with httpx.Client(base_url=server.url) as http:
        thread = http.post("/threads", json={"metadata": {"llm_api_key": secret, "team": "a"}})
        thread_id = thread.json()["thread_id"]
        run = {
            "assistant_id": "counter",
            "input": {"input": f"my key is {secret}"},
            "metadata": {"password": "hunter2-hunter2"},
            "stream_mode": ["values", "updates", "custom", "messages-tuple"],
        }
        streamed = http.post(f"/threads/{thread_id}/runs/stream", json=run).text
        bodies = [
            thread.text,
            streamed,
            http.get(f"/threads/{thread_id}").text,
            http.get(f"/threads/{thread_id}/state").text,
            http.post(f"/threads/{thread_id}/history", json={"limit": 20}).text,
            http.get(f"/threads/{thread_id}/runs").text,
            http.get(f"/ui/threads/{thread_id}/run").text,
        ]
    for body in bodies:
        assert secret not in body and "hunter2" not in body
    assert json.loads(bodies[2])["metadata"]["team"] == "a"


def test_a_public_bind_needs_a_key_or_insecure() -> None:
    with pytest.raises(ConfigError, match="without an API key"):
        check_bind("0.0.0.0", None)
    check_bind("0.0.0.0", KEY)
    check_bind("0.0.0.0", None, insecure=True)
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "tests.server.apps:counter"])
    assert result.exit_code == 1 and "refusing to serve on 0.0.0.0" in result.output
    assert "Traceback" not in result.output
