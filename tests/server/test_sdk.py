"""The real ``langgraph-sdk`` client against the server: assistants, streamed runs, state and
history, human-in-the-loop, fork, cancel, join after a disconnect, multitask strategies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from aworld_graph import Runners, Task
from aworld_graph.checkpoint import TrajectorySaver
from tests.server import apps
from tests.server.conftest import LiveServer

USER = {"messages": [{"role": "user", "content": "count these four words"}]}


@pytest.fixture
async def sdk(server: LiveServer) -> AsyncIterator[Any]:
    client = get_client(url=server.url, api_key=None)
    yield client
    await client.aclose()


async def test_assistants_list_the_workflows_with_graph_and_schemas(sdk: Any) -> None:
    found = await sdk.assistants.search()
    assert sorted(a["assistant_id"] for a in found) == ["approval", "chat", "counter", "gated"]
    one = await sdk.assistants.get("approval")
    assert (
        one["graph_id"] == "approval" and one["metadata"]["target"] == "tests.server.apps:approval"
    )
    graph = await sdk.assistants.get_graph("approval")
    ids = {n["id"] for n in graph["nodes"]}
    assert {"__start__", "drafter", "approval", "publisher", "reviser", "__end__"} <= ids
    assert {"source": "drafter", "target": "drafter__tools"} in [
        {"source": e["source"], "target": e["target"]} for e in graph["edges"]
    ]
    schemas = await sdk.assistants.get_schemas("counter")
    assert "messages" in schemas["input_schema"]["properties"]
    with pytest.raises(NotFoundError, match="no assistant 'nope'"):
        await sdk.assistants.get("nope")


async def test_a_streamed_run_ends_with_the_answer_and_reads_back(
    sdk: Any, store: TrajectorySaver
) -> None:
    thread = await sdk.threads.create(metadata={"user": "ada"})
    parts = [
        p
        async for p in sdk.runs.stream(
            thread["thread_id"],
            "counter",
            input=USER,
            stream_mode=["values", "updates", "custom", "messages-tuple"],
        )
    ]
    events = [p.event for p in parts]
    assert events[0] == "metadata" and "error" not in events
    assert {"values", "updates", "custom", "messages"} <= set(events)
    assert parts[-1].event in ("values", "custom", "updates", "messages")
    last_values = [p.data for p in parts if p.event == "values"][-1]
    assert last_values["answer"] == "4 words"
    custom = [p.data["event"] for p in parts if p.event == "custom"]
    assert {"llm_call", "tool_call", "answer", "node_start", "node_end"} <= set(custom)
    tokens = "".join(p.data[0]["content"] for p in parts if p.event == "messages")
    assert tokens == "4 words"
    updates = [p.data for p in parts if p.event == "updates"]
    assert [next(iter(u)) for u in updates] == ["counter", "counter__tools", "counter"]

    state = await sdk.threads.get_state(thread["thread_id"])
    assert state["values"]["answer"] == "4 words" and state["next"] == []
    assert state["metadata"]["assistant_id"] == "counter" and state["metadata"]["user"] == "ada"
    history = await sdk.threads.get_history(thread["thread_id"], limit=20)
    assert [h["metadata"]["step"] for h in history] == [3, 2, 1, 0, -1]
    assert history[1]["checkpoint"]["checkpoint_id"] == state["parent_checkpoint"]["checkpoint_id"]
    got = await sdk.threads.get(thread["thread_id"])
    assert got["status"] == "idle" and got["values"]["answer"] == "4 words"
    runs = await sdk.runs.list(thread["thread_id"])
    assert [r["status"] for r in runs] == ["success"]

    # an ordinary thread of the store: the library reads the same run back
    tup = store.get_tuple({"configurable": {"thread_id": thread["thread_id"]}})
    assert tup is not None and tup.metadata["target"] == "tests.server.apps:counter"
    found = await sdk.threads.search(metadata={"graph_id": "counter"})
    assert [t["thread_id"] for t in found] == [thread["thread_id"]]


async def test_the_server_sees_runs_the_library_made(sdk: Any, store: TrajectorySaver) -> None:
    task = Task(  # as the CLI does, the run records what it ran as 'target'
        input="one two",
        swarm=apps.counter,
        id="lib-1",
        metadata={"target": "tests.server.apps:counter"},
    )
    done = (await Runners.run_task(task, checkpointer=store))["lib-1"]
    assert done.answer == "2 words"
    thread = await sdk.threads.get("lib-1")
    assert (
        thread["metadata"]["assistant_id"] == "counter" and thread["values"]["answer"] == "2 words"
    )
    state = await sdk.threads.get_state("lib-1")
    assert state["values"]["answer"] == "2 words"


async def test_human_step_interrupts_and_resumes(sdk: Any) -> None:
    thread = (await sdk.threads.create())["thread_id"]
    result = await sdk.runs.wait(thread, "approval", input={"input": "plan the offsite"})
    assert result["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
    state = await sdk.threads.get_state(thread)
    assert (
        state["next"] == ["approval"]
        and state["interrupts"][0]["value"]["answer"] == "plan: three steps"
    )
    assert (await sdk.threads.get(thread))["status"] == "interrupted"
    parts = [
        p
        async for p in sdk.runs.stream(
            thread, "approval", command={"resume": "approve"}, stream_mode="updates"
        )
    ]
    assert [next(iter(p.data)) for p in parts if p.event == "updates"] == ["approval", "publisher"]
    state = await sdk.threads.get_state(thread)
    assert state["values"]["answer"] == "published the plan"
    with pytest.raises(httpx.HTTPStatusError) as refused:  # wait() raises httpx's own error
        await sdk.runs.wait(thread, "approval", command={"resume": "approve"})
    assert refused.value.response.status_code == 409
    assert "not waiting for input" in refused.value.response.json()["message"]


async def test_fork_a_thread_and_take_the_other_branch(sdk: Any) -> None:
    thread = (await sdk.threads.create())["thread_id"]
    await sdk.runs.wait(thread, "approval", input={"input": "plan the offsite"})
    copy = await sdk.threads.copy(thread)
    fork = copy["thread_id"]
    assert fork != thread and copy["status"] == "interrupted"
    edited = await sdk.threads.update_state(fork, {"context": {"budget": 100}})
    state = await sdk.threads.get_state(fork)
    assert state["checkpoint"]["checkpoint_id"] == edited["checkpoint"]["checkpoint_id"]
    assert state["values"]["context"]["budget"] == 100 and state["next"] == ["approval"]
    assert state["metadata"]["forked_from"].startswith(f"{fork}@")
    # an edit replaces the checkpoint the interrupt was raised at: continuing asks again
    again = await sdk.runs.wait(fork, "approval", input=None)
    assert again["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
    published = await sdk.runs.wait(fork, "approval", command={"resume": "approve"})
    revised = await sdk.runs.wait(thread, "approval", command={"resume": "make it shorter"})
    assert published["answer"] == "published the plan"
    assert published["context"] == {"budget": 100, "approval": "approve"}
    assert revised["answer"] == "revised the plan" and "budget" not in revised["context"]
    # the original thread's history is untouched by the fork
    original = await sdk.threads.get_history(thread, limit=50)
    assert all("forked_from" not in h["metadata"] for h in original)


async def _first(parts: Any, event: str) -> Any:
    async for part in parts:
        if part.event == event:
            return part
    raise AssertionError(f"no {event} event")


async def test_cancel_a_running_run_then_continue_it(sdk: Any) -> None:
    thread = (await sdk.threads.create())["thread_id"]
    run = await sdk.runs.create(thread, "gated", input=USER)
    assert run["status"] in ("pending", "running")
    stream = sdk.runs.join_stream(thread, run["run_id"], stream_mode="values")
    saved = await _first(stream, "values")
    while saved.data["steps"] < 2:  # the tool ran and its step is saved; the answer waits
        saved = await _first(stream, "values")
    await stream.aclose()
    await sdk.runs.cancel(thread, run["run_id"], wait=True)
    assert (await sdk.runs.get(thread, run["run_id"]))["status"] == "interrupted"
    assert (await sdk.threads.get(thread))["status"] == "interrupted"
    joined = await sdk.runs.join(thread, run["run_id"])
    assert joined["__error__"]["error"] == "Cancelled"
    apps.GATE.set()
    done = await sdk.runs.wait(thread, "gated", input=None)
    assert done["answer"] == "4 words"
    calls = [r["kind"] for r in done["trace"]]
    assert calls == ["llm", "tools", "llm"]  # the finished tool call was not run again


async def test_a_client_that_disconnects_does_not_kill_the_run(sdk: Any) -> None:
    keep, drop = (
        (await sdk.threads.create())["thread_id"],
        (await sdk.threads.create())["thread_id"],
    )
    ids = {}
    for thread, mode in ((keep, None), (drop, "cancel")):
        parts = sdk.runs.stream(
            thread, "gated", input=USER, stream_mode="updates", on_disconnect=mode
        )
        ids[thread] = (await _first(parts, "metadata")).data["run_id"]
        await _first(parts, "updates")
        await parts.aclose()  # the client goes away mid-run
    dropped = await sdk.runs.join(drop, ids[drop])  # the server noticed: cancelled
    assert dropped["__error__"]["error"] == "Cancelled"
    apps.GATE.set()
    kept = await sdk.runs.join(keep, ids[keep])
    assert kept["answer"] == "4 words"
    assert (await sdk.runs.get(keep, ids[keep]))["status"] == "success"


async def test_multitask_reject_and_enqueue(sdk: Any) -> None:
    thread = (await sdk.threads.create())["thread_id"]
    first = await sdk.runs.create(thread, "gated", input=USER)
    with pytest.raises(ConflictError, match="busy with run"):
        await sdk.runs.create(thread, "gated", input=None, multitask_strategy="reject")
    queued = await sdk.runs.create(thread, "gated", input=None, multitask_strategy="enqueue")
    late = await sdk.runs.create(
        thread, "gated", input={"input": "new"}, multitask_strategy="enqueue"
    )
    assert (await sdk.runs.get(thread, queued["run_id"]))["status"] == "pending"
    apps.GATE.set()
    assert (await sdk.runs.join(thread, first["run_id"]))["answer"] == "4 words"
    assert (await sdk.runs.join(thread, queued["run_id"]))["answer"] == "4 words"
    next_turn = await sdk.runs.join(thread, late["run_id"])  # the thread's second turn
    assert next_turn["answer"] == "1 words"
    statuses = {r["run_id"]: r["status"] for r in await sdk.runs.list(thread)}
    assert statuses == {
        first["run_id"]: "success",
        queued["run_id"]: "success",
        late["run_id"]: "success",
    }


async def test_stateless_runs_and_if_not_exists(sdk: Any) -> None:
    result = await sdk.runs.wait(None, "counter", input={"input": "a b c"})
    assert result["answer"] == "3 words"
    with pytest.raises(NotFoundError, match="no thread 'ghost'"):
        await sdk.runs.create("ghost", "counter", input=USER)
    made = await sdk.runs.wait("made-here", "counter", input=USER, if_not_exists="create")
    assert made["answer"] == "4 words"
    with pytest.raises(ConflictError, match="holds runs of counter"):
        await sdk.runs.create("made-here", "approval", input=USER)
    with pytest.raises(UnprocessableEntityError, match="has not run yet"):
        await sdk.runs.create((await sdk.threads.create())["thread_id"], "counter", input=None)
    await sdk.threads.delete("made-here")
    with pytest.raises(NotFoundError):
        await sdk.threads.get("made-here")


async def test_run_options_not_served_are_refused_not_ignored(sdk: Any) -> None:
    thread = (await sdk.threads.create())["thread_id"]
    refusals = {
        "interrupt_before": ("counter", "interrupt_before: Input should be '\\*'"),
        "on_completion": ("delete", "on_completion='delete' applies to a run without a thread"),
    }
    for option, (value, said) in refusals.items():
        with pytest.raises(UnprocessableEntityError, match=said):
            await sdk.runs.create(thread, "counter", input=USER, **{option: value})
    done = await sdk.runs.wait(thread, "counter", input=USER, on_completion="keep")
    assert done["answer"] == "4 words"  # nothing was started by the refused ones
    assert len(await sdk.runs.list(thread)) == 1


async def test_a_joined_run_streams_the_modes_it_was_made_with(sdk: Any) -> None:
    async def events(thread: str, run_id: str, modes: list[str]) -> set[str]:
        parts = sdk.runs.join_stream(thread, run_id, stream_mode=modes, last_event_id="-1")
        return {part.event async for part in parts} - {"metadata"}

    streamed, background = (await sdk.threads.create())["thread_id"], None
    parts = sdk.runs.stream(streamed, "counter", input=USER, stream_mode=["updates"])
    run_id = (await _first(parts, "metadata")).data["run_id"]
    assert {part.event async for part in parts} == {"updates"}
    # LangGraph's rule: a join may ask for the modes the run was streamed with, or fewer
    assert await events(streamed, run_id, ["updates", "values", "custom"]) == {"updates"}
    background = (await sdk.threads.create())["thread_id"]
    run = await sdk.runs.create(background, "counter", input=USER)
    await sdk.runs.join(background, run["run_id"])
    wanted = ["updates", "values", "custom", "messages-tuple"]
    assert await events(background, run["run_id"], wanted) == {
        "updates",
        "values",
        "custom",
        "messages",
    }


async def test_join_stream_with_the_sdks_defaults_streams_the_runs_modes(sdk: Any) -> None:
    """The SDK sends an empty ``stream_mode=`` when none is asked for (it was a 422): the join
    streams the modes the run was created with (LangGraph's default: ``values``), as
    LangGraph's server does."""
    thread = (await sdk.threads.create())["thread_id"]
    run = await sdk.runs.create(thread, "counter", input=USER)
    events = [part.event async for part in sdk.runs.join_stream(thread, run["run_id"])]
    assert events[0] == "metadata"
    assert set(events) == {"metadata", "values"}
    run = await sdk.runs.create(thread, "counter", input=USER, stream_mode=["values", "custom"])
    events = [part.event async for part in sdk.runs.join_stream(thread, run["run_id"])]
    assert set(events) == {"metadata", "values", "custom"}
    assert (await sdk.runs.join(thread, run["run_id"]))["answer"].endswith("words")


async def test_a_workflow_streams_langgraphs_tasks_and_debug_modes(sdk: Any) -> None:
    """``tasks`` and ``debug`` are LangGraph's own stream modes of the workflow's graph: each
    node's task starting and its result; checkpoints and tasks with their step."""
    thread = (await sdk.threads.create())["thread_id"]
    parts = [
        part
        async for part in sdk.runs.stream(
            thread, "counter", input=USER, stream_mode=["tasks", "debug"]
        )
    ]
    assert parts[0].event == "metadata"
    tasks = [p.data for p in parts if p.event == "tasks"]
    started = [t["name"] for t in tasks if "input" in t]
    ended = [t["name"] for t in tasks if "result" in t]
    # each task that started ends (a tool call's inner task before the tools node it is in)
    assert started[0] == "counter" and sorted(started) == sorted(ended)
    assert all(t["error"] is None for t in tasks if "result" in t)
    kinds = {p.data["type"] for p in parts if p.event == "debug"}
    assert kinds == {"checkpoint", "task", "task_result"}
    assert {p.event for p in parts} == {"metadata", "tasks", "debug"}
