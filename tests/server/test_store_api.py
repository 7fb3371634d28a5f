"""The store API (``/store/items``, ``/store/items/search``, ``/store/namespaces``) with the
real ``langgraph-sdk`` client: put, get, search with filters and a keyword query, namespaces,
delete; the items are in the checkpoint store, so a restarted server (a new saver on the same
SQLite file, or on the same PostgreSQL database) reads them back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import UnprocessableEntityError

from aworld_graph.checkpoint import TrajectorySaver, open_store
from aworld_graph.server import create_app
from tests.server.conftest import LiveServer, assistants

ADA = ("users", "ada", "prefs")
BOB = ("users", "bob", "prefs")


async def _fill(client: Any) -> None:
    await client.store.put_item(ADA, "theme", {"color": "dark", "size": 12, "note": "Likes tea"})
    await client.store.put_item(BOB, "theme", {"color": "light", "size": 16})
    await client.store.put_item(("docs",), "intro", {"title": "Python tips", "body": "use ruff"})
    await client.store.put_item(
        ("docs",), "secret", {"title": "python inside", "body": "no"}, index=["body"]
    )


async def _check(client: Any) -> None:
    item = await client.store.get_item(ADA, "theme")
    assert item["namespace"] == list(ADA) and item["key"] == "theme"
    assert item["value"] == {"color": "dark", "size": 12, "note": "Likes tea"}
    assert item["created_at"] and item["updated_at"]
    assert await client.store.get_item(ADA, "nope") is None

    users = (await client.store.search_items(("users",)))["items"]
    assert sorted(i["namespace"][1] for i in users) == ["ada", "bob"]
    assert all(i["score"] is None for i in users)
    big = (await client.store.search_items(("users",), filter={"size": {"$gt": 14}}))["items"]
    assert [i["namespace"] for i in big] == [list(BOB)]
    dark = (await client.store.search_items(("users",), filter={"color": "dark"}))["items"]
    assert [i["namespace"] for i in dark] == [list(ADA)]
    page = (await client.store.search_items(("users",), limit=1, offset=1))["items"]
    assert len(page) == 1
    # query: a keyword match over the indexed text ("secret" indexed only its body)
    found = (await client.store.search_items((), query="Python"))["items"]
    assert [(i["key"], i["score"]) for i in found] == [("intro", 1.0)]

    everything = await client.store.list_namespaces()
    assert everything["namespaces"] == [["docs"], list(ADA), list(BOB)]
    top = await client.store.list_namespaces(max_depth=2)
    assert top["namespaces"] == [["docs"], ["users", "ada"], ["users", "bob"]]
    bobs = await client.store.list_namespaces(prefix=["users", "*"], suffix=["prefs"])
    assert bobs["namespaces"] == [list(ADA), list(BOB)]


async def test_items_put_searched_listed_deleted_and_kept_across_a_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "server.db"
    saver = TrajectorySaver(path)
    try:
        with LiveServer(create_app(assistants(), store=saver, api_key="")) as server:
            client = get_client(url=server.url, api_key=None)
            await _fill(client)
            await _check(client)
            await client.store.put_item(ADA, "theme", {"color": "blue", "size": 12})
            again = await client.store.get_item(ADA, "theme")
            assert again["value"]["color"] == "blue"
            await client.store.delete_item(("docs",), "secret")
            assert await client.store.get_item(("docs",), "secret") is None
            await client.store.put_item(
                ADA, "theme", {"color": "dark", "size": 12, "note": "Likes tea"}
            )
            await client.aclose()
    finally:
        saver.close()
    reopened = TrajectorySaver(path)  # a new server process would open the file afresh
    try:
        with LiveServer(create_app(assistants(), store=reopened, api_key="")) as server:
            client = get_client(url=server.url, api_key=None)
            item = await client.store.get_item(ADA, "theme")
            assert item["value"]["color"] == "dark"
            assert (await client.store.get_item(("docs",), "intro"))["value"]["body"] == "use ruff"
            assert await client.store.get_item(("docs",), "secret") is None
            await client.aclose()
    finally:
        reopened.close()


async def test_a_stored_secret_is_stripped(server: LiveServer) -> None:
    client = get_client(url=server.url, api_key=None)
    await client.store.put_item(("keys",), "openai", {"api_key": "sk-abcdefghijklmnop1234567890"})
    item = await client.store.get_item(("keys",), "openai")
    assert "sk-abcdefghijklmnop" not in str(item)
    await client.aclose()


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k"}, "value"),
        ("PUT", "/store/items", {"namespace": ["a.b"], "key": "k", "value": {}}, "namespace"),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "", "value": {}}, "key"),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": 3}, "value"),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": {}, "ttl": 5}, "ttl"),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": {}, "index": 1}, "index"),
        ("POST", "/store/items/search", {"limit": "many"}, "limit"),
        ("POST", "/store/items/search", {"filter": {"n": {"$regex": "x"}}}, "filter.n"),
        ("POST", "/store/items/search", {"namespace_prefix": "users"}, "namespace_prefix"),
        ("POST", "/store/namespaces", {"max_depth": 0}, "max_depth"),
        ("DELETE", "/store/items", {"namespace": ["a"]}, "key"),
    ],
)
def test_bad_input_is_a_422_naming_the_field(
    server: LiveServer, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        answer = http.request(method, path, json=body)
    assert answer.status_code == 422, answer.text
    assert field in answer.json()["message"]


def test_get_without_a_key_is_a_422(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        answer = http.get("/store/items", params={"namespace": "a"})
    assert answer.status_code == 422 and "key" in answer.json()["message"]


async def test_the_sdk_sees_a_422_for_a_ttl(server: LiveServer) -> None:
    client = get_client(url=server.url, api_key=None)
    with pytest.raises(UnprocessableEntityError):
        await client.store.put_item(("a",), "k", {"v": 1}, ttl=5)
    await client.aclose()


async def test_items_on_postgresql_are_read_back_by_a_second_server(pg_url: str) -> None:
    saver = open_store(pg_url)
    try:
        with LiveServer(create_app(assistants(), store=saver, api_key="")) as server:
            client = get_client(url=server.url, api_key=None)
            await _fill(client)
            await _check(client)
            await client.aclose()
    finally:
        saver.close()
    again = open_store(pg_url)
    try:
        with LiveServer(create_app(assistants(), store=again, api_key="")) as server:
            client = get_client(url=server.url, api_key=None)
            await _check(client)
            await client.aclose()
    finally:
        again.close()
