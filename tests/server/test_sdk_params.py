"""The ``langgraph-sdk`` parameters that a server could take and silently drop, each driven
through the real client: served as LangGraph's server serves them (thread search by
``values``, sorted, ``select``, ``extract``; ``threads.prune``; ``supersteps``;
``return_minimal``; a
subgraph's state in ``get_state(subgraphs=True)``; ``assistants.delete(delete_threads=True)``)
or refused with a 422 that names the parameter and what to do instead (a thread's ``ttl``,
``include``, prune's ``keep_latest``). docs/server.md, "Every SDK call", lists
them; tests/server/test_sdk_coverage.py checks that list against the SDK."""

# ruff: noqa: F811 (app_server's fixtures, imported here, are the tests' parameters)

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk.errors import UnprocessableEntityError

from aworld_graph.server import Assistant
from tests.server import langgraph_apps as graphs
from tests.server import nested_interrupt
from tests.server.app_server import app_sdk, app_server  # noqa: F401 (fixtures)

USER = {"messages": [{"role": "user", "content": "hi there"}]}

SUPERSTEPS = [
    {
        "updates": [
            {"values": {"messages": [{"type": "human", "content": "hi"}]}, "as_node": "__start__"}
        ]
    },
    {
        "updates": [
            {"values": {"messages": [{"type": "ai", "content": "hello"}]}, "as_node": "reply"}
        ]
    },
]
"""A chat thread's two steps: the user's message as the graph's start, the reply as ``reply``'s."""


def served() -> list[Assistant]:
    return [
        Assistant.of(graphs.chat, assistant_id="chat"),
        Assistant.of(nested_interrupt.parent, assistant_id="parent"),
    ]


async def _threads(sdk: Any, *words: str, marker: str = "m") -> list[str]:
    """A thread per word, each run once on ``chat`` (its answer holds the word)."""
    made = []
    for word in words:
        tid = (await sdk.threads.create(metadata={"test": marker, "word": word}))["thread_id"]
        await sdk.runs.wait(tid, "chat", input={"messages": [{"role": "user", "content": word}]})
        made.append(tid)
    return made


async def test_thread_search_takes_values_sort_select_and_extract(app_sdk: Any) -> None:
    a, b, c = await _threads(app_sdk, "alpha", "beta", "gamma")
    by_values = await app_sdk.threads.search(
        values={"messages": [{"content": "beta"}]}, metadata={"test": "m"}
    )
    assert [t["thread_id"] for t in by_values] == [b]
    assert await app_sdk.threads.count(values={"messages": [{"content": "beta"}]}) == 1
    assert await app_sdk.threads.count(values={"messages": [{"content": "delta"}]}) == 0

    ascending = await app_sdk.threads.search(sort_by="thread_id", sort_order="asc")
    assert [t["thread_id"] for t in ascending] == sorted([a, b, c])
    oldest_first = await app_sdk.threads.search(sort_by="updated_at", sort_order="asc")
    assert [t["thread_id"] for t in oldest_first] == [a, b, c]
    newest_first = await app_sdk.threads.search(limit=2)
    assert [t["thread_id"] for t in newest_first] == [c, b]
    second = await app_sdk.threads.search(sort_by="created_at", limit=1, offset=1)
    assert [t["thread_id"] for t in second] == [b]

    picked = await app_sdk.threads.search(
        ids=[a],
        select=["thread_id", "status"],
        extract={"first": "values.messages[0].content", "word": "metadata.word"},
    )
    assert picked == [
        {"thread_id": a, "status": "idle", "extracted": {"first": "alpha", "word": "alpha"}}
    ]
    with pytest.raises(UnprocessableEntityError, match="select"):
        await app_sdk.threads.search(select=["secrets"])
    with pytest.raises(UnprocessableEntityError, match="extract"):
        await app_sdk.threads.search(extract={"x": "kwargs.a"})


async def test_prune_deletes_the_threads_named_and_refuses_keep_latest(app_sdk: Any) -> None:
    a, b = await _threads(app_sdk, "one", "two")
    assert await app_sdk.threads.prune([a, "no-such-thread"]) == {"pruned_count": 1}
    assert [t["thread_id"] for t in await app_sdk.threads.search()] == [b]
    with pytest.raises(UnprocessableEntityError, match="keep_latest"):
        await app_sdk.threads.prune([b], strategy="keep_latest")
    assert (await app_sdk.threads.get(b))["thread_id"] == b  # refused before anything changed


async def test_a_thread_made_with_supersteps_holds_them_as_its_history(app_sdk: Any) -> None:
    made = await app_sdk.threads.create(graph_id="chat", supersteps=SUPERSTEPS)
    state = await app_sdk.threads.get_state(made["thread_id"])
    assert [(m["type"], m["content"]) for m in state["values"]["messages"]] == [
        ("human", "hi"),
        ("ai", "hello"),
    ]
    history = await app_sdk.threads.get_history(made["thread_id"])
    assert [h["metadata"]["source"] for h in history] == ["update", "update"]
    done = await app_sdk.runs.wait(made["thread_id"], "chat", input=USER)
    assert len(done["messages"]) == 4  # the next turn goes on from them
    for bad, field in [
        ({"graph_id": None}, "graph_id"),
        ({"supersteps": [{"updates": [{"values": {}, "as_node": "nope"}]}]}, "supersteps"),
        (
            {"supersteps": [{"updates": [{"values": {}, "as_node": None}]}]},
            r"supersteps\[0\].updates\[0\].as_node",
        ),
        (
            {
                "supersteps": [
                    {
                        "updates": [
                            {"values": None, "command": {"goto": "reply"}, "as_node": "reply"}
                        ]
                    }
                ]
            },
            r"supersteps\[0\].updates\[0\].command is not served",
        ),
    ]:
        options = {"graph_id": "chat", "supersteps": SUPERSTEPS, **bad}
        with pytest.raises(UnprocessableEntityError, match=field):
            await app_sdk.threads.create(**options)
    assert await app_sdk.threads.count() == 1  # nothing stays of a refused one


async def test_a_threads_ttl_and_include_are_refused_by_name(app_sdk: Any) -> None:
    with pytest.raises(UnprocessableEntityError, match="ttl is not served"):
        await app_sdk.threads.create(ttl=60)
    assert await app_sdk.threads.count() == 0  # nothing was made
    tid = (await app_sdk.threads.create())["thread_id"]
    with pytest.raises(UnprocessableEntityError, match="ttl is not served"):
        await app_sdk.threads.update(tid, metadata={"a": 1}, ttl=60)
    assert (await app_sdk.threads.get(tid))["metadata"] == {}  # refused before it changed
    with pytest.raises(UnprocessableEntityError, match="include=ttl"):
        await app_sdk.threads.get(tid, include=["ttl"])


async def test_update_with_return_minimal_answers_nothing_and_applies(app_sdk: Any) -> None:
    tid = (await app_sdk.threads.create())["thread_id"]
    assert await app_sdk.threads.update(tid, metadata={"a": 1}, return_minimal=True) is None
    assert (await app_sdk.threads.get(tid))["metadata"] == {"a": 1}


async def test_get_state_with_subgraphs_holds_the_subgraphs_state(app_sdk: Any) -> None:
    tid = (await app_sdk.threads.create())["thread_id"]
    await app_sdk.runs.wait(tid, "parent", input={"log": ["start"]})
    flat = await app_sdk.threads.get_state(tid)
    assert [t["name"] for t in flat["tasks"]] == ["child"] and flat["tasks"][0]["state"] is None
    deep = await app_sdk.threads.get_state(tid, subgraphs=True)
    inner = deep["tasks"][0]["state"]
    assert inner["values"] == {"log": ["start"]} and inner["next"] == ["ask"]
    assert inner["tasks"][0]["interrupts"][0]["value"] == "go on?"
    at = await app_sdk.threads.get_state(tid, checkpoint=deep["checkpoint"], subgraphs=True)
    assert at["tasks"][0]["state"]["next"] == ["ask"]


async def test_deleting_an_assistant_deletes_its_threads_when_asked(app_sdk: Any) -> None:
    kept = await app_sdk.assistants.create("chat", name="kept threads")
    gone = await app_sdk.assistants.create("chat", name="threads deleted too")
    threads = {}
    for assistant in (kept, gone):
        tid = (await app_sdk.threads.create())["thread_id"]
        await app_sdk.runs.wait(tid, assistant["assistant_id"], input=USER)
        threads[assistant["assistant_id"]] = tid
    await app_sdk.assistants.delete(kept["assistant_id"])
    await app_sdk.assistants.delete(gone["assistant_id"], delete_threads=True)
    left = [t["thread_id"] for t in await app_sdk.threads.search()]
    assert left == [threads[kept["assistant_id"]]]


async def test_a_crons_run_is_checked_when_it_is_made_not_when_it_fires(app_sdk: Any) -> None:
    with pytest.raises(UnprocessableEntityError, match="stream_mode 'bogus' is not served"):
        await app_sdk.crons.create("chat", schedule="0 9 * * *", input=USER, stream_mode="bogus")
    cron = await app_sdk.crons.create("chat", schedule="0 9 * * *", input=USER)
    with pytest.raises(UnprocessableEntityError, match="stream_mode 'nope' is not served"):
        await app_sdk.crons.update(cron["cron_id"], stream_mode=["values", "nope"])
    changed = await app_sdk.crons.update(cron["cron_id"], stream_mode=["updates"])
    assert changed["payload"]["stream_mode"] == ["updates"]
    assert await app_sdk.crons.count() == 1


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("post", "/threads", {"thread_id": "t-1", "metdata": {}}, "metdata"),
        ("post", "/threads/search", {"limit": 5, "order_by": "thread_id"}, "order_by"),
        ("post", "/threads/count", {"idz": ["t-1"]}, "idz"),
        ("post", "/threads/prune", {"thread_ids": [], "force": True}, "force"),
        ("post", "/assistants", {"graph_id": "chat", "version": 3}, "version"),
        ("post", "/assistants/search", {"tags": ["a"]}, "tags"),
        ("post", "/runs/crons/search", {"schedule": "* * * * *"}, "schedule"),
        ("post", "/store/items/search", {"namespace": ["a"]}, "namespace"),
        ("put", "/store/items", {"namespace": ["a"], "key": "k", "value": {}, "x": 1}, "x"),
    ],
)
async def test_a_field_a_route_does_not_read_is_a_422_naming_it(
    app_sdk: Any, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    # the SDK sends only the fields it knows; another client (or a typo) may send others
    with pytest.raises(UnprocessableEntityError, match=f"{field}: Extra inputs"):
        await getattr(app_sdk.http, method)(path, json=body)
    assert await app_sdk.threads.count() == 0  # nothing was made
