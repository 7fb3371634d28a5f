"""Assistants over the API as LangGraph's server has them, through the real ``langgraph-sdk``
client: create (``if_exists``), update (a new version), versions, latest, delete, search and
count; a created assistant's ``config`` and ``context`` apply to its runs; assistants are kept
in the store and outlive the server (SQLite and PostgreSQL); bad input is a 4xx naming the
field."""

# ruff: noqa: F811 (app_server's fixtures, imported here, are the tests' parameters)

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError, NotFoundError

from aworld_graph.checkpoint import TrajectorySaver, open_store
from aworld_graph.server import create_app
from tests.server.app_server import app_sdk, app_server, served  # noqa: F401 (fixtures)
from tests.server.conftest import LiveServer

USER = {"messages": [{"role": "user", "content": "hi there"}]}


async def test_create_update_versions_latest_and_delete(app_sdk: Any) -> None:
    made = await app_sdk.assistants.create(
        "greeter",
        config={"configurable": {"greeting": "ahoy"}, "tags": ["sea"]},
        metadata={"team": "ships", "tier": 1},
        name="Pirate",
        description="greets like a pirate",
        assistant_id="pirate-1",
    )
    assert made["assistant_id"] == "pirate-1" and made["version"] == 1
    assert made["graph_id"] == "greeter" and made["name"] == "Pirate"
    assert made["context"] == {"greeting": "ahoy"}  # kept in step with configurable
    assert made["config"]["tags"] == ["sea"]
    assert await app_sdk.assistants.get("pirate-1") == made
    with pytest.raises(ConflictError, match="pirate-1 exists"):
        await app_sdk.assistants.create("greeter", assistant_id="pirate-1")
    same = await app_sdk.assistants.create(
        "greeter", assistant_id="pirate-1", if_exists="do_nothing"
    )
    assert same == made
    untitled = await app_sdk.assistants.create("greeter")
    assert untitled["name"] == "Untitled" and untitled["assistant_id"] != "pirate-1"

    updated = await app_sdk.assistants.update(
        "pirate-1", config={"configurable": {"greeting": "arr"}}, metadata={"tier": 2}
    )
    assert updated["version"] == 2 and updated["context"] == {"greeting": "arr"}
    assert updated["metadata"] == {"team": "ships", "tier": 2}  # merged
    assert updated["name"] == "Pirate" and updated["created_at"] == made["created_at"]
    renamed = await app_sdk.assistants.update("pirate-1", name="Captain")
    assert renamed["version"] == 3 and renamed["context"] == {"greeting": "arr"}

    versions = await app_sdk.assistants.get_versions("pirate-1")
    assert [v["version"] for v in versions] == [3, 2, 1]
    assert [v["name"] for v in versions] == ["Captain", "Pirate", "Pirate"]
    tier_one = await app_sdk.assistants.get_versions("pirate-1", metadata={"tier": 1})
    assert [v["version"] for v in tier_one] == [1]
    assert [
        v["version"] for v in await app_sdk.assistants.get_versions("pirate-1", limit=1, offset=1)
    ] == [2]

    back = await app_sdk.assistants.set_latest("pirate-1", 1)
    assert back["version"] == 1 and back["config"]["configurable"] == {"greeting": "ahoy"}
    assert back["name"] == "Pirate" and (await app_sdk.assistants.get("pirate-1"))["version"] == 1
    ran = await app_sdk.runs.wait(None, "pirate-1", input=USER)
    assert ran["messages"][-1]["content"] == "ahoy, hi there"  # the latest version's config
    after = await app_sdk.assistants.update("pirate-1", metadata={"x": 1})
    assert after["version"] == 4  # a new version after the highest, not after the latest

    await app_sdk.assistants.delete("pirate-1")
    with pytest.raises(NotFoundError):
        await app_sdk.assistants.get("pirate-1")
    with pytest.raises(NotFoundError):
        await app_sdk.assistants.get_versions("pirate-1")
    with pytest.raises(NotFoundError):
        await app_sdk.assistants.delete("pirate-1")


async def test_a_created_assistants_config_and_context_apply_to_its_runs(app_sdk: Any) -> None:
    pirate = await app_sdk.assistants.create(
        "greeter", config={"configurable": {"greeting": "ahoy"}}
    )
    gruff = await app_sdk.assistants.create("persona", context={"tone": "gruff"})
    thread = (await app_sdk.threads.create())["thread_id"]
    said = await app_sdk.runs.wait(thread, pirate["assistant_id"], input=USER)
    assert said["messages"][-1]["content"] == "ahoy, hi there"
    state = await app_sdk.threads.get_state(thread)
    assert state["metadata"]["assistant_id"] == pirate["assistant_id"]
    assert state["metadata"]["graph_id"] == "greeter"
    assert (await app_sdk.threads.get(thread))["metadata"]["assistant_id"] == pirate["assistant_id"]
    # the run's own config goes over the assistant's
    told = await app_sdk.runs.wait(
        None, pirate["assistant_id"], input=USER, config={"configurable": {"greeting": "yo"}}
    )
    assert told["messages"][-1]["content"] == "yo, hi there"
    tone = await app_sdk.runs.wait(None, gruff["assistant_id"], input=USER)
    assert tone["messages"][-1]["content"] == "[gruff] hi there"
    runs = await app_sdk.runs.list(thread)
    assert [r["assistant_id"] for r in runs] == [pirate["assistant_id"]]
    # its graph's own assistant still runs with the graph's defaults
    plain = await app_sdk.runs.wait(None, "greeter", input=USER)
    assert plain["messages"][-1]["content"] == "hello, hi there"
    # a thread of a deleted assistant is still read through its graph
    await app_sdk.assistants.delete(pirate["assistant_id"])
    assert (await app_sdk.threads.get_state(thread))["values"]["messages"][-1]["content"] == (
        "ahoy, hi there"
    )


async def test_an_assistant_keeps_no_secret(app_sdk: Any, store: TrajectorySaver) -> None:
    secret = "sk-abcdefghijklmnopqrstuvwx"
    made = await app_sdk.assistants.create(
        "greeter",
        config={"configurable": {"openai_api_key": secret, "greeting": "hi"}},
        metadata={"note": f"key {secret}"},
    )
    assert secret not in str(made) and made["config"]["configurable"] == {"greeting": "hi"}
    with store.database.read() as tx:
        rows = tx.all("SELECT config, context, metadata FROM assistant_versions")
    assert rows and secret not in str(rows)


async def test_search_and_count_see_created_assistants(app_sdk: Any) -> None:
    first = await app_sdk.assistants.create("greeter", name="Alpha", metadata={"team": {"a": 1}})
    second = await app_sdk.assistants.create("persona", name="Beta", metadata={"team": {"a": 2}})
    assert await app_sdk.assistants.count() == 8
    assert await app_sdk.assistants.count(graph_id="greeter") == 2
    assert await app_sdk.assistants.count(metadata={"created_by": "system"}) == 6
    newest = await app_sdk.assistants.search(limit=2)
    assert [a["assistant_id"] for a in newest] == [second["assistant_id"], first["assistant_id"]]
    by_name = await app_sdk.assistants.search(name="alp")
    assert [a["assistant_id"] for a in by_name] == [first["assistant_id"]]
    nested = await app_sdk.assistants.search(metadata={"team": {"a": 2}})
    assert [a["assistant_id"] for a in nested] == [second["assistant_id"]]
    named = await app_sdk.assistants.search(sort_by="name", sort_order="asc", select=["name"])
    names = ["Alpha", "Beta", "chat", "counter", "greeter", "nested", "persona", "review"]
    assert named == [{"name": n} for n in names]
    page = await app_sdk.assistants.search(limit=2, offset=1, response_format="object")
    assert len(page["assistants"]) == 2 and page["next"] == "3"
    last = await app_sdk.assistants.search(limit=2, offset=7, response_format="object")
    assert len(last["assistants"]) == 1 and last["next"] is None
    with pytest.raises(NotFoundError, match="graph_id 'nope' is not served"):
        await app_sdk.assistants.search(graph_id="nope")


def test_bad_input_is_a_4xx_naming_the_field(app_server: LiveServer) -> None:
    with httpx.Client(base_url=app_server.url, timeout=30) as http:

        def refused(method: str, path: str, body: Any, status: int, *words: str) -> None:
            answer = http.request(method, path, json=body)
            assert answer.status_code == status, (path, body, answer.text)
            message = answer.json()["message"]
            assert all(w in message for w in words), (path, body, message)

        refused("POST", "/assistants", {}, 422, "graph_id")
        refused("POST", "/assistants", {"graph_id": 5}, 422, "graph_id")
        refused("POST", "/assistants", {"graph_id": "nope"}, 404, "graph_id", "greeter")
        refused(
            "POST", "/assistants", {"graph_id": "greeter", "if_exists": "maybe"}, 422, "if_exists"
        )
        refused(
            "POST",
            "/assistants",
            {"graph_id": "greeter", "config": {"recursion_limit": "many"}},
            422,
            "config",
        )
        refused("POST", "/assistants", {"graph_id": "greeter", "metadata": [1]}, 422, "metadata")
        refused(
            "POST",
            "/assistants",
            {"graph_id": "greeter", "assistant_id": "a b"},
            422,
            "assistant_id",
        )
        both = {"graph_id": "greeter", "config": {"configurable": {"a": 1}}, "context": {"a": 1}}
        refused("POST", "/assistants", both, 400, "configurable", "context")
        refused("POST", "/assistants", {"graph_id": "greeter", "assistant_id": "chat"}, 409, "chat")
        refused("PATCH", "/assistants/ghost", {"name": "x"}, 404, "ghost")
        refused("PATCH", "/assistants/chat", {"name": "x"}, 409, "POST /assistants")
        refused("DELETE", "/assistants/greeter", None, 409, "graph greeter")
        made = http.post("/assistants", json={"graph_id": "greeter"}).json()["assistant_id"]
        refused("PATCH", f"/assistants/{made}", {"graph_id": "nope"}, 404, "graph_id")
        refused("PATCH", f"/assistants/{made}", {"name": 3}, 422, "name")
        refused("POST", f"/assistants/{made}/latest", {"version": 9}, 404, "version 9")
        refused("POST", f"/assistants/{made}/latest", {"version": "1"}, 422, "version")
        refused("POST", f"/assistants/{made}/latest", {}, 422, "version")
        refused("POST", f"/assistants/{made}/versions", {"limit": 0}, 422, "limit")
        refused("POST", "/assistants/ghost/versions", {}, 404, "ghost")
        refused("POST", "/assistants/search", {"sort_by": "size"}, 422, "sort_by")
        refused("POST", "/assistants/search", {"limit": "many"}, 422, "limit")
        refused("POST", "/assistants/search", {"select": ["secret"]}, 422, "select")
        refused("POST", "/assistants/count", {"metadata": "x"}, 422, "metadata")
        refused("GET", "/assistants/greeter/subgraphs?recurse=maybe", None, 422, "recurse")
        # LangGraph's server's id of a graph's own assistant finds it here too
        langgraph_id = str(uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "greeter"))
        assert http.get(f"/assistants/{langgraph_id}").json()["assistant_id"] == "greeter"
        # a graph's own assistant lists one version: itself
        versions = http.post("/assistants/greeter/versions", json={}).json()
        assert [v["assistant_id"] for v in versions] == ["greeter"]


async def _restart_keeps(saver: Any) -> None:
    """Assistants created on one server are there, with their versions, on the next."""
    with LiveServer(create_app(served(), store=saver, api_key="")) as first:
        client = get_client(url=first.url, api_key=None)
        made = await client.assistants.create(
            "greeter", config={"configurable": {"greeting": "ahoy"}}, name="Pirate"
        )
        await client.assistants.update(made["assistant_id"], metadata={"v": 2})
        await client.aclose()
    with LiveServer(create_app(served(), store=saver, api_key="")) as second:
        client = get_client(url=second.url, api_key=None)
        kept = await client.assistants.get(made["assistant_id"])
        assert kept["version"] == 2 and kept["metadata"] == {"v": 2} and kept["name"] == "Pirate"
        versions = await client.assistants.get_versions(made["assistant_id"])
        assert [v["version"] for v in versions] == [2, 1]
        assert await client.assistants.count(graph_id="greeter") == 2
        ran = await client.runs.wait(None, made["assistant_id"], input=USER)
        assert ran["messages"][-1]["content"] == "ahoy, hi there"
        await client.aclose()


async def test_created_assistants_outlive_the_server(store: TrajectorySaver) -> None:
    await _restart_keeps(store)


async def test_created_assistants_outlive_the_server_on_postgresql(pg_url: str) -> None:
    saver = open_store(pg_url)
    try:
        await _restart_keeps(saver)
    finally:
        saver.close()
