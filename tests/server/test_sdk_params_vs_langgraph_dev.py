"""The ``langgraph-sdk`` parameters served in issue 37's "Every SDK call" pass (thread search
by ``values``, sorted, ``select`` and ``extract``; ``threads.count(values=…)``;
``threads.prune``; ``threads.create(supersteps=…)``; ``threads.update(return_minimal=True)``;
``assistants.delete(delete_threads=True)``) side by side with LangGraph's own server
(``langgraph dev``), on the LangGraph project of :mod:`tests.server.langgraph_dev`, with the
real client."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.server.test_sdk_params import SUPERSTEPS
from tests.server.test_vs_langgraph_dev import Side, both, state, status_of, user

pytestmark = pytest.mark.slow


async def _made(client: Any, marker: str, *words: str) -> list[str]:
    """A thread per word (metadata ``test`` and ``tag``), each run once on ``chat`` (the
    ``n``-th word's with ``delay`` ``n / 100`` in its values)."""
    made = []
    for n, word in enumerate(words):
        tid = (await client.threads.create(metadata={"test": marker, "tag": word}))["thread_id"]
        await client.runs.wait(tid, "chat", input=user(word, delay=n / 100))
        made.append(tid)
    return made


async def _search(client: Any) -> dict[str, Any]:
    marker = str(uuid.uuid4())
    a, b, c = await _made(client, marker, "alpha", "beta", "gamma")
    word = dict(zip((a, b, c), ("alpha", "beta", "gamma"), strict=True))
    mine = {"test": marker}
    beta = {"delay": 0.01}  # langgraph dev's in-memory filter compares lists whole
    by_values = await client.threads.search(metadata=mine, values=beta)
    by_id = await client.threads.search(metadata=mine, sort_by="thread_id", sort_order="asc")
    oldest = await client.threads.search(metadata=mine, sort_by="created_at", sort_order="asc")
    picked = await client.threads.search(
        ids=[a],
        select=["thread_id", "status"],
        extract={"first": "values.messages[0].content", "tag": "metadata.tag", "x": "values.no"},
    )
    return {
        "by_values": [word[t["thread_id"]] for t in by_values],
        "counted": await client.threads.count(metadata=mine, values=beta),
        "none": await client.threads.count(metadata=mine, values={"delay": 0.5}),
        "by_id_sorted": [t["thread_id"] for t in by_id] == sorted([a, b, c]),
        "oldest": [word[t["thread_id"]] for t in oldest],
        "picked": picked,
        "bad_extract": await status_of(client.threads.search(extract={"x": "kwargs.a"})),
    }


async def test_thread_search_by_values_sorted_selected_and_extracted(
    sides: dict[str, Side],
) -> None:
    ours, peer = await both(sides, _search)
    assert peer["by_values"] == ["beta"] and peer["counted"] == 1 and peer["none"] == 0
    assert peer["by_id_sorted"] and peer["oldest"] == ["alpha", "beta", "gamma"]
    assert peer["picked"] == [
        {
            "thread_id": "<id0>",
            "status": "idle",
            "extracted": {"first": "alpha", "tag": "alpha", "x": None},
        }
    ]
    assert ours == peer


async def _prune(client: Any) -> dict[str, Any]:
    marker = str(uuid.uuid4())
    a, b = await _made(client, marker, "one", "two")
    pruned = await client.threads.prune([a, str(uuid.uuid4())])
    keep_latest = await status_of(client.threads.prune([b], strategy="keep_latest"))
    return {
        "pruned": pruned,
        "a": await status_of(client.threads.get(a)),
        "left": [t["thread_id"] for t in await client.threads.search(metadata={"test": marker})],
        "keep_latest": keep_latest,
    }


async def test_prune(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _prune)
    assert peer == {"pruned": {"pruned_count": 1}, "a": 404, "left": ["<id0>"], "keep_latest": 422}
    assert ours == peer


async def _minimal(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create(metadata={"test": str(uuid.uuid4())}))["thread_id"]
    answer = await client.threads.update(tid, metadata={"tag": "x"}, return_minimal=True)
    return {"answer": answer, "tag": (await client.threads.get(tid))["metadata"]["tag"]}


async def test_update_with_return_minimal(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _minimal)
    assert peer == {"answer": None, "tag": "x"}
    assert ours == peer


async def _delete_threads(client: Any) -> dict[str, Any]:
    kept = await client.assistants.create("chat", name="kept threads")
    gone = await client.assistants.create("chat", name="threads deleted too")
    threads = {}
    for assistant in (kept, gone):
        tid = (await client.threads.create(metadata={"test": str(uuid.uuid4())}))["thread_id"]
        await client.runs.wait(tid, assistant["assistant_id"], input=user("hi"))
        threads[assistant["name"]] = tid
    await client.assistants.delete(kept["assistant_id"])
    await client.assistants.delete(gone["assistant_id"], delete_threads=True)
    return {name: await status_of(client.threads.get(tid)) for name, tid in threads.items()}


async def test_deleting_an_assistant_with_its_threads(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _delete_threads)
    assert peer == {"kept threads": 200, "threads deleted too": 404}
    assert ours == peer


async def _supersteps(client: Any) -> dict[str, Any]:
    made = await client.threads.create(graph_id="chat", supersteps=SUPERSTEPS)
    tid = made["thread_id"]
    after = await client.threads.get_state(tid)
    history = await client.threads.get_history(tid)
    done = await client.runs.wait(tid, "chat", input=user("and now"))
    return {
        "status": made["status"],
        "state": {
            **state(after),
            "values": [[m["type"], m["content"]] for m in after["values"]["messages"]],
        },
        "history": [(h["metadata"]["source"], h["metadata"]["step"], h["next"]) for h in history],
        "then": [[m["type"], m["content"]] for m in done["messages"]],
    }


async def test_a_thread_made_with_supersteps(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _supersteps)
    assert peer["state"]["values"] == [["human", "hi"], ["ai", "hello"]]
    assert peer["then"][-1] == ["ai", "you said: and now"]
    assert ours == peer
