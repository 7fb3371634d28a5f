"""Hostile input to the store, cron, webhook and MCP routes of a real server on 127.0.0.1:
wrong types, bad schedules and namespaces, credentials in URLs, oversized bodies and
unknown paths without the key. Every refusal is a JSON 4xx naming the field, never a 500,
and nothing secret is stored or answered back."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import LiveServer

KEY = "review-key-0123456789"
HEADERS = {"x-api-key": KEY}
ODD: list[Any] = [None, 0, -1, 1.5, True, "", "x", [], [1], {}, {"a": 1}, "a" * 5000, 10**30]
"""Values of the wrong type or shape for some field."""


def _refused(response: httpx.Response, *words: str) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"code", "message"}, body
    for word in words:
        assert word in body["message"], (word, body)


def _no_500(response: httpx.Response, what: str) -> None:
    assert response.status_code < 500, (what, response.status_code, response.text)


def test_odd_values_in_every_field_are_4xx_never_500(server: LiveServer) -> None:
    bodies: dict[str, tuple[str, dict[str, Any], list[str]]] = {
        "cron": (
            "/runs/crons",
            {"assistant_id": "counter", "schedule": "0 0 1 1 *"},
            ["schedule", "timezone", "end_time", "enabled", "on_run_completed", "webhook"],
        ),
        "put": (
            "/store/items",
            {"namespace": ["a"], "key": "k", "value": {"n": 1}},
            ["namespace", "key", "value", "index", "ttl"],
        ),
        "search": (
            "/store/items/search",
            {},
            ["namespace_prefix", "filter", "limit", "offset", "query"],
        ),
        "namespaces": (
            "/store/namespaces",
            {},
            ["prefix", "suffix", "max_depth", "limit", "offset"],
        ),
        "assistant": (
            "/assistants",
            {"graph_id": "counter"},
            ["graph_id", "config", "context", "metadata", "name", "description", "if_exists"],
        ),
    }
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for what, (path, base, fields) in bodies.items():
            method = "PUT" if what == "put" else "POST"
            for field in [*fields, "unknown_field"]:
                for value in ODD:
                    response = client.request(method, path, json={**base, field: value})
                    _no_500(response, (what, field, value))
                    if response.status_code >= 400:
                        _refused(response)


def test_a_cron_end_time_that_is_not_a_time_is_a_422(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for end in (1, 1.5, -1, "tomorrow"):
            body = {"assistant_id": "counter", "schedule": "0 0 1 1 *", "end_time": end}
            response = client.post("/runs/crons", json=body)
            _no_500(response, end)
            if response.status_code >= 400:
                _refused(response, "end_time")
            else:  # a number pydantic reads as a Unix time is stored as an ISO time
                assert response.json()["end_time"].endswith("+00:00"), response.json()


@pytest.mark.parametrize("schedule", ["* * * * * *", "* * * * * * *", "0 0 31 2 *", "0 0 30 2 *"])
def test_a_schedule_is_five_fields_that_come(server: LiveServer, schedule: str) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        body = {"assistant_id": "counter", "schedule": schedule}
        _refused(client.post("/runs/crons", json=body), "schedule")
        made = client.post("/runs/crons", json={**body, "schedule": "0 0 1 1 *"})
        assert made.status_code == 200, made.text
        patched = client.patch(f"/runs/crons/{made.json()['cron_id']}", json=body)
        _refused(patched, "schedule")


def test_bad_namespaces_are_422_naming_the_namespace(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for namespace in ([], ["langgraph"], ["a\x00b"], ["ok", "\x00"]):
            put = client.put("/store/items", json={"namespace": namespace, "key": "k", "value": {}})
            _refused(put, "namespace")
        for namespace in (["a\x00b"],):
            gone = client.request(
                "DELETE", "/store/items", json={"namespace": namespace, "key": "k"}
            )
            _refused(gone, "namespace")
            found = client.post("/store/items/search", json={"namespace_prefix": namespace})
            _refused(found, "namespace")
        _refused(client.get("/store/items", params={"namespace": "a\x00", "key": "k"}), "namespace")
        good = client.put("/store/items", json={"namespace": ["a"], "key": "k", "value": {}})
        assert good.status_code == 204, good.text


def test_credentials_in_a_webhook_url_are_refused(server: LiveServer, store: Any) -> None:
    hook = "https://someone:hunter2pass@example.invalid/hook"
    with httpx.Client(base_url=server.url, timeout=30) as client:
        body = {"assistant_id": "counter", "schedule": "0 0 1 1 *", "webhook": hook}
        _refused(client.post("/runs/crons", json=body), "webhook")
        made = client.post("/runs/crons", json={**body, "webhook": None})
        assert made.status_code == 200, made.text
        patch = client.patch(f"/runs/crons/{made.json()['cron_id']}", json={"webhook": hook})
        _refused(patch, "webhook")
        assert "hunter2pass" not in patch.text
        run = client.post(
            "/runs", json={"assistant_id": "counter", "input": {"input": "a b"}, "webhook": hook}
        )
        _refused(run, "webhook")
    with sqlite3.connect(store.path) as con:
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            for row in con.execute(f"SELECT * FROM {table}"):  # noqa: S608 - the store's own names
                assert "hunter2pass" not in repr(row), table


def test_an_oversized_mcp_request_is_refused_before_it_is_read(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve(max_body=4096)
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "counter", "arguments": {"input": "word " * 2000}},
    }
    headers = {"accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        response = client.post("/mcp", json=call, headers=headers)
        assert response.status_code == 413, response.text
        assert "4096" in response.text
        listed = client.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers
        )
        assert listed.status_code == 200, listed.text


def test_without_the_key_no_path_is_told_apart(serve: Callable[..., LiveServer]) -> None:
    server = serve(api_key=KEY)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        answers = {
            path: client.request(method, path)
            for method, path in [
                ("GET", "/no/such/route"),
                ("GET", "/a2a/no-such-agent"),
                ("PUT", "/assistants/search"),
                ("GET", "/mcp"),
                ("DELETE", "/store/namespaces"),
            ]
        }
        for path, response in answers.items():
            assert response.status_code == 401, (path, response.status_code, response.text)
            assert path not in response.text
        assert client.get("/no/such/route", headers=HEADERS).status_code == 404
        assert client.get("/ok").status_code == 200


def test_a2a_json_nested_too_deep_is_an_invalid_request(server: LiveServer) -> None:
    deep = b"[" * 3000 + b"]" * 3000
    headers = {"content-type": "application/json", "A2A-Version": "1.0"}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        rpc = client.post("/a2a/counter", content=deep, headers=headers)
        assert rpc.status_code == 200, rpc.text
        assert rpc.json()["error"]["code"] == -32600, rpc.text
        assert "deeper" in rpc.json()["error"]["message"]
        rest = client.post("/a2a/counter/message:send", content=deep, headers=headers)
        assert rest.status_code == 400, rest.text


def test_a2a_push_url_with_credentials_is_refused(server: LiveServer, store: Any) -> None:
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "a b"}]},
            "configuration": {
                "taskPushNotificationConfig": {"url": "https://bob:hunter2pass@example.invalid/h"},
                "returnImmediately": True,
            },
        },
    }
    headers = {"A2A-Version": "1.0"}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        answer = client.post("/a2a/counter", json=send, headers=headers).json()
        assert answer["error"]["code"] == -32602, answer
        assert "credentials" in answer["error"]["message"]
        assert "hunter2pass" not in json.dumps(answer)
    with sqlite3.connect(store.path) as con:
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            for row in con.execute(f"SELECT * FROM {table}"):  # noqa: S608 - the store's own names
                assert "hunter2pass" not in repr(row), table


def test_a_remote_agent_url_carries_no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    from aworld_graph import RemoteAgent
    from aworld_graph.errors import DefinitionError
    from aworld_graph.secrets import scrub_text

    with pytest.raises(DefinitionError, match="credentials") as raised:
        RemoteAgent(name="far", url="http://bob:hunter2pass@127.0.0.1:9/")
    assert "hunter2pass" not in str(raised.value)
    for url in ("http://", "ftp://127.0.0.1/"):
        with pytest.raises(DefinitionError, match="url must be"):
            RemoteAgent(name="far", url=url)
    monkeypatch.setenv("REVIEW_REMOTE_KEY", "remote-key-5u9x2q7w3e")
    agent = RemoteAgent(name="far", url="http://127.0.0.1:9", api_key_env="REVIEW_REMOTE_KEY")
    assert agent.api_key() == "remote-key-5u9x2q7w3e"
    assert "remote-key-5u9x2q7w3e" not in scrub_text("the remote said: remote-key-5u9x2q7w3e")


def test_a_run_context_or_configurable_that_is_not_an_object_is_a_422(server: LiveServer) -> None:
    run = {"assistant_id": "counter", "input": {"input": "a b"}}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for field, value in [
            ("context", "x"),
            ("context", [1]),
            ("context", -1),
            ("config", {"configurable": 5}),
        ]:
            _refused(client.post("/runs/wait", json={**run, field: value}), field)


def test_a_projects_secret_env_values_are_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aworld_graph.secrets import scrub_text
    from aworld_graph.server import read_project

    value = "proj-k3y-value-9q8w7e6r"
    (tmp_path / "langgraph.json").write_text(
        json.dumps({"graphs": {"g": "./g.py:graph"}, "env": {"REVIEW_SERVICE_API_KEY": value}})
    )
    monkeypatch.setattr(sys, "path", list(sys.path))  # apply() adds the project's folder
    monkeypatch.delenv("REVIEW_SERVICE_API_KEY", raising=False)  # restored after the test
    read_project(tmp_path).apply()
    assert value not in scrub_text(f"the service said: bad key {value}")


def test_the_servers_own_key_is_scrubbed(serve: Callable[..., LiveServer]) -> None:
    from aworld_graph.secrets import scrub_text

    serve(api_key="own-server-key-4t6y8u0i")
    assert "own-server-key-4t6y8u0i" not in scrub_text("x-api-key: own-server-key-4t6y8u0i")


def test_a_public_card_names_nothing_else(serve: Callable[..., LiveServer]) -> None:
    server = serve(api_key=KEY)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        made = client.post(
            "/assistants",
            json={"graph_id": "counter", "name": "private-name", "description": "private-about"},
            headers=HEADERS,
        ).json()["assistant_id"]
        for path in (
            "/a2a/nope/.well-known/agent-card.json",
            "/.well-known/agent-card.json?assistant_id=nope",
            f"/a2a/{made}/.well-known/agent-card.json",
            f"/.well-known/agent-card.json?assistant_id={made}",
        ):
            answer = client.get(path)
            assert answer.status_code == 404, (path, answer.text)
            for word in ("approval", "gated", "private-name", "private-about"):
                assert word not in answer.text, (path, answer.text)
        assert client.get("/a2a/counter/.well-known/agent-card.json").status_code == 200
