"""Run and thread semantics a LangGraph client relies on, against a real server with the real
``langgraph-sdk`` client and ``RemoteGraph`` (issue 37): multitask strategies, state edits as a
node, thread metadata, the rejoin headers, run options and the bulk routes.

Where a test compares with LangGraph's own server, the comment says what ``langgraph dev``
(``langgraph-api`` with ``langgraph-runtime-inmem``) does in its code.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.server import apps
from tests.server.conftest import LiveServer

USER = {"messages": [{"role": "user", "content": "count these four words"}]}


@pytest.fixture
async def sdk(server: LiveServer) -> AsyncIterator[Any]:
    async with get_client(url=server.url, api_key=None) as client:
        yield client


async def _first(parts: Any, event: str) -> Any:
    async for part in parts:
        if part.event == event:
            return part
    raise AssertionError(f"no {event} event")


async def _going(sdk: Any, thread: str) -> str:
    """Start a ``gated`` run on ``thread`` and return its id once its tool step is saved (its
    answer waits for ``apps.GATE``)."""
    run = await sdk.runs.create(thread, "gated", input=USER)
    stream = sdk.runs.join_stream(thread, run["run_id"], stream_mode="values")
    saved = await _first(stream, "values")
    while saved.data["steps"] < 2:
        saved = await _first(stream, "values")
    await stream.aclose()
    return str(run["run_id"])


# -- multitask strategies ------------------------------------------------------------------


async def test_no_multitask_strategy_enqueues_the_second_run(sdk: Any) -> None:
    """langgraph-api ``assign_defaults``: ``multitask_strategy`` defaults to ``enqueue``; the
    run is stored ``pending`` and starts when the thread's run before it ends."""
    thread = (await sdk.threads.create())["thread_id"]
    first = await sdk.runs.create(thread, "gated", input=USER)
    second = await sdk.runs.create(thread, "gated", input={"input": "two more"})
    assert second["status"] == "pending" and second["multitask_strategy"] == "enqueue"
    apps.GATE.set()
    assert (await sdk.runs.join(thread, first["run_id"]))["answer"] == "4 words"
    assert (await sdk.runs.join(thread, second["run_id"]))["answer"] == "2 words"
    # reject stays a 409 (LangGraph: "Thread is already running a task")
    held = (await sdk.threads.create())["thread_id"]
    apps.GATE.clear()
    going = await sdk.runs.create(held, "gated", input=USER)
    with pytest.raises(ConflictError, match="busy with run"):
        await sdk.runs.create(held, "gated", input=USER, multitask_strategy="reject")
    apps.GATE.set()
    await sdk.runs.join(held, going["run_id"])


async def test_interrupt_runs_the_new_input_on_top_of_the_interrupted_state(sdk: Any) -> None:
    """langgraph-api: ``interrupt`` cancels the run going (it reads ``interrupted``, its
    checkpoints stay) and the new run starts from the state it stopped in; LangGraph's loop
    drops the tasks the stopped run left pending and applies the new input."""
    thread = (await sdk.threads.create())["thread_id"]
    old = await _going(sdk, thread)
    new = await sdk.runs.create(
        thread, "gated", input={"input": "three new words"}, multitask_strategy="interrupt"
    )
    assert (await sdk.runs.get(thread, old))["status"] == "interrupted"
    apps.GATE.set()
    done = await sdk.runs.join(thread, new["run_id"])
    # the agent takes up the turn the cancelled run left unfinished (its last message is the
    # tool's result), on the state that now holds the new input too
    assert "__error__" not in done and done["answer"] == "4 words"
    assert (await sdk.runs.get(thread, new["run_id"]))["status"] == "success"
    said = [m["content"] for m in done["messages"] if m["role"] == "user"]
    assert said[0] == "count these four words" and said[-1] == "three new words"
    history = await sdk.threads.get_history(thread, limit=50)
    assert old in {h["metadata"].get("run_id") for h in history}  # its checkpoints stay
    assert (await sdk.threads.get(thread))["status"] == "idle"


async def test_rollback_deletes_the_old_run_and_its_checkpoints(sdk: Any) -> None:
    """langgraph-api: ``rollback`` cancels the run going and deletes it with its checkpoints
    (``_delete_checkpoints_for_thread`` / ``adelete_for_runs``); the new run starts from the
    thread as it was before."""
    thread = (await sdk.threads.create())["thread_id"]
    old = await _going(sdk, thread)
    new = await sdk.runs.create(
        thread, "gated", input={"input": "only two"}, multitask_strategy="rollback"
    )
    apps.GATE.set()
    done = await sdk.runs.join(thread, new["run_id"])
    assert done["answer"] == "2 words"
    with pytest.raises(NotFoundError):
        await sdk.runs.get(thread, old)
    assert [r["run_id"] for r in await sdk.runs.list(thread)] == [new["run_id"]]
    history = await sdk.threads.get_history(thread, limit=50)
    assert {h["metadata"].get("run_id") for h in history} == {new["run_id"]}


# -- state edits as a node, thread metadata ------------------------------------------------


async def test_update_state_as_a_node_leaves_the_thread_usable(sdk: Any) -> None:
    """LangGraph's pattern for answering a human step without ``Command``: write the node's
    output with ``update_state(..., as_node=NODE)``, then continue with input ``None``."""
    thread = (await sdk.threads.create(metadata={"user": "ada"}))["thread_id"]
    await sdk.runs.wait(thread, "approval", input={"input": "plan the offsite"})
    edited = await sdk.threads.update_state(
        thread, {"context": {"approval": "approve"}}, as_node="approval"
    )
    state = await sdk.threads.get_state(thread)
    assert state["checkpoint"]["checkpoint_id"] == edited["checkpoint"]["checkpoint_id"]
    assert state["next"] == ["publisher"] and state["metadata"]["assistant_id"] == "approval"
    assert (await sdk.threads.get(thread))["metadata"]["user"] == "ada"
    assert len(await sdk.threads.get_history(thread, limit=50)) >= 3
    done = await sdk.runs.wait(thread, "approval", input=None)
    assert done["answer"] == "published the plan"


def test_remote_graph_update_state_as_a_node(server: LiveServer) -> None:
    sync_client = get_sync_client(url=server.url, api_key=None)
    try:
        graph = RemoteGraph("approval", sync_client=sync_client)
        config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
        graph.invoke({"input": "plan the offsite"}, config)
        graph.update_state(config, {"context": {"approval": "make it shorter"}}, as_node="approval")
        assert graph.get_state(config).next == ("reviser",)
        assert graph.invoke(None, config)["answer"] == "revised the plan"
    finally:
        sync_client.close()


async def test_thread_metadata_set_after_a_run_is_kept_across_a_restart(
    serve: Callable[..., LiveServer],
) -> None:
    """langgraph-api ``PATCH /threads/{id}`` merges ``metadata`` into the thread's, whatever
    it has run; ``threads.search(metadata=...)`` then finds it."""
    first = serve()
    async with get_client(url=first.url, api_key=None) as sdk:
        thread = (await sdk.threads.create(metadata={"user": "ada"}))["thread_id"]
        await sdk.runs.wait(thread, "counter", input=USER)
        patched = await sdk.threads.update(thread, metadata={"topic": "words"})
        assert patched["metadata"]["topic"] == "words" and patched["metadata"]["user"] == "ada"
        await sdk.threads.update(thread, metadata={"topic": "counting", "n": 2})
    first.__exit__(None, None, None)
    second = serve()
    async with get_client(url=second.url, api_key=None) as sdk:
        got = await sdk.threads.get(thread)
        assert {"user": "ada", "topic": "counting", "n": 2}.items() <= got["metadata"].items()
        found = await sdk.threads.search(metadata={"topic": "counting"})
        assert [t["thread_id"] for t in found] == [thread]
        copy = await sdk.threads.copy(thread)
        assert copy["metadata"]["topic"] == "counting"
        await sdk.threads.delete(thread)
        found = await sdk.threads.search(metadata={"topic": "counting"})
        assert [t["thread_id"] for t in found] == [copy["thread_id"]]
