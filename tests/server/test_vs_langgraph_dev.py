"""``aworld-graph serve`` side by side with LangGraph's own server, ``langgraph dev``.

Both serve the same ``langgraph.json`` (:mod:`tests.server.langgraph_dev`: a chat graph with a
``messages`` reducer and a fake chat model, and a graph that asks a person with
``interrupt()``), each in a process of its own on 127.0.0.1. Each test runs one scenario
through the real ``langgraph-sdk`` client (or ``RemoteGraph``) against both and compares the
answers, with ids and timestamps normalised (each distinct id becomes ``<idN>`` in order of
appearance, so which values are the same id is still compared) and each side's system
assistants named by their graph id.

Only what the two servers mean alike is compared: the fields the SDK's types declare, the
metadata a client set (plus ``graph_id`` / ``assistant_id``), the values, the order of
events. Where ours differs from LangGraph's server and should not, the comparison is an
``xfail(strict=True)`` naming the difference, so fixing the server turns it into a failure
that says to drop the mark.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk import get_client

from tests.server.langgraph_dev import Side

pytestmark = pytest.mark.slow

Scenario = Callable[[Any], Awaitable[Any]]

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_INTERRUPT_ID = re.compile(r"^[0-9a-f]{32}$")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?$")
_MESSAGE_ID = re.compile(r"^lc_run--(<id\d+>)(-\d+)?$")


def normalise(value: Any, aliases: dict[str, str], ids: dict[str, str] | None = None) -> Any:
    """``value`` with ids as ``<idN>`` (numbered by first appearance, keys in sorted order),
    timestamps as ``<time>``, a side's system assistant ids as their graph id, and the
    ``-0`` that LangGraph appends to a message id it did not stream dropped."""
    ids = {} if ids is None else ids
    if isinstance(value, dict):
        return {
            normalise(k, aliases, ids): normalise(value[k], aliases, ids) for k in sorted(value)
        }
    if isinstance(value, list | tuple):
        return [normalise(v, aliases, ids) for v in value]
    if isinstance(value, str):
        if value in aliases:
            return aliases[value]
        if _STAMP.match(value):
            return "<time>"
        if _INTERRUPT_ID.match(value):
            return ids.setdefault(value, f"<id{len(ids)}>")
        named = _UUID.sub(lambda m: ids.setdefault(m[0], f"<id{len(ids)}>"), value)
        return _MESSAGE_ID.sub(r"lc_run--\1", named)
    return value


async def both(sides: dict[str, Side], scenario: Scenario) -> tuple[Any, Any]:
    """``scenario(client)`` on LangGraph's server and on ours, side by side in time (two
    processes: neither sees the other's calls): (ours, peer), normalised."""

    async def on(side: Side) -> Any:
        client = get_client(url=side.url, api_key=None)
        try:
            return normalise(await scenario(client), side.aliases)
        finally:
            await client.aclose()

    ours, peer = await asyncio.gather(on(sides["ours"]), on(sides["peer"]))
    return ours, peer


# -- projections: what the two servers mean alike ----------------------------------------------

_OWN_METADATA = {"graph_id", "assistant_id", "test", "team", "tag", "v"}


def meta(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The metadata a client set, and which graph and assistant ran; each server adds its own
    bookkeeping besides (LangGraph: ``created_by``, ``langgraph_*``; ours: ``kind``,
    ``target``, ``task_*``)."""
    return {k: v for k, v in (metadata or {}).items() if k in _OWN_METADATA}


def thread(t: dict[str, Any]) -> dict[str, Any]:
    return {
        "thread_id": t["thread_id"],
        "metadata": meta(t["metadata"]),
        "status": t["status"],
        "values": t["values"],
        "interrupts": t.get("interrupts") or {},  # LangGraph's create leaves it out
    }


def state(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "values": s["values"],
        "next": s["next"],
        "step": s["metadata"]["step"],
        "source": s["metadata"]["source"],
        "checkpoint_id": s["checkpoint"]["checkpoint_id"],
        "parent_checkpoint_id": (s["parent_checkpoint"] or {}).get("checkpoint_id"),
        "tasks": [
            {"name": t["name"], "interrupts": t["interrupts"], "error": t["error"]}
            for t in s["tasks"]
        ],
        "interrupts": s["interrupts"],
    }


def run(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": r["run_id"],
        "thread_id": r["thread_id"],
        "assistant_id": r["assistant_id"],
        "status": r["status"],
        "multitask_strategy": r["multitask_strategy"],
    }


def said(values: dict[str, Any]) -> list[list[str]]:
    return [[m["type"], m["content"]] for m in values.get("messages", [])]


def user(text: str, delay: float = 0) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "delay": delay}


def without_response_schema(value: Any) -> Any:
    """``value`` without the ``"response_schema": null`` of interrupt items (compared on its own
    in ``test_interrupt_items_carry_response_schema``)."""
    if isinstance(value, dict):
        return {
            k: without_response_schema(v)
            for k, v in value.items()
            if not (k == "response_schema" and v is None)
        }
    if isinstance(value, list):
        return [without_response_schema(v) for v in value]
    return value


async def status_of(call: Awaitable[Any]) -> int:
    """The HTTP status a call fails with (200 when it does not)."""
    try:
        await call
    except httpx.HTTPStatusError as exc:
        return exc.response.status_code
    return 200


# -- threads ------------------------------------------------------------------------------------


async def _threads(client: Any) -> dict[str, Any]:
    marker = str(uuid.uuid4())
    made = await client.threads.create(metadata={"test": marker, "team": "a"})
    tid = made["thread_id"]
    got = await client.threads.get(tid)
    await client.threads.update(tid, metadata={"tag": "x"})
    updated = await client.threads.get(tid)
    found = await client.threads.search(metadata={"test": marker, "tag": "x"})
    counted = await client.threads.count(metadata={"test": marker})
    await client.threads.delete(tid)
    return {
        "made": thread(made),
        "got": thread(got),
        "updated": thread(updated),
        "found": [thread(t) for t in found],
        "counted": counted,
        "gone": await status_of(client.threads.get(tid)),
        "left": await client.threads.count(metadata={"test": marker}),
    }


async def test_threads_create_get_update_search_count_delete(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _threads)
    assert peer["made"]["values"] is None
    assert ours == peer


async def _thread_after_runs(client: Any) -> dict[str, Any]:
    marker = str(uuid.uuid4())
    made = await client.threads.create(metadata={"test": marker})
    tid = made["thread_id"]
    await client.runs.wait(tid, "chat", input=user("hello"))
    await client.threads.update(tid, metadata={"tag": "x"})
    got = await client.threads.get(tid)
    return {
        "thread": thread(got),
        "created_at_kept": got["created_at"] == made["created_at"],
        "updated_at_moved": got["updated_at"] != made["updated_at"],
    }


async def test_a_thread_keeps_its_created_at_after_a_run(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _thread_after_runs)
    assert peer["created_at_kept"] and peer["updated_at_moved"]
    assert ours == peer


async def test_a_thread_that_ran_reads_alike(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _thread_after_runs)
    assert ours["thread"] == peer["thread"]
    assert ours["thread"]["metadata"] == {
        "test": "<id0>",
        "tag": "x",
        "graph_id": "chat",
        "assistant_id": "chat",
    }


async def _copy(client: Any) -> dict[str, Any]:
    made = await client.threads.create(metadata={"test": str(uuid.uuid4())})
    tid = made["thread_id"]
    await client.runs.wait(tid, "chat", input=user("to copy"))
    copied = await client.threads.copy(tid)
    copy_id = copied["thread_id"]
    await client.runs.wait(copy_id, "chat", input=user("only in the copy"))
    return {
        "copy": {**thread(await client.threads.get(copy_id)), "thread_id": None},
        "new_id": copy_id != tid,
        "original": said((await client.threads.get_state(tid))["values"]),
        "copy_history": len(await client.threads.get_history(copy_id, limit=100)),
        "original_history": len(await client.threads.get_history(tid, limit=100)),
    }


async def test_thread_copy(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _copy)
    assert peer["new_id"] and peer["original"] == [
        ["human", "to copy"],
        ["ai", "you said: to copy"],
    ]
    assert ours == peer


# -- runs ---------------------------------------------------------------------------------------


async def _wait(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.wait(tid, "chat", input=user("hi there"))
    second = await client.runs.wait(tid, "chat", input=user("again"))
    stateless = await client.runs.wait(None, "chat", input=user("no thread"))
    return {"first": first, "second": second, "stateless": stateless}


async def test_runs_wait(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _wait)
    assert said(peer["second"])[-1] == ["ai", "you said: again"]
    assert ours == peer


async def _stream(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "chat", input=user("first turn"))
    events: list[Any] = []
    async for part in client.runs.stream(
        tid, "chat", input=user("stream me"), stream_mode=["values", "updates", "messages-tuple"]
    ):
        events.append((part.event, part.data))
    shown: list[Any] = []
    chunk_ids = set()
    for event, data in events:
        if event == "messages":
            chunk, info = data
            chunk_ids.add(chunk["id"])
            shown.append([event, chunk["type"], chunk["content"], info["langgraph_node"]])
        elif event == "metadata":
            shown.append([event, sorted(data)])
        else:
            shown.append([event, data])
    final = (await client.threads.get_state(tid))["values"]["messages"][-1]
    return {"events": shown, "chunks_merge_into_the_answer": chunk_ids == {final["id"]}}


async def test_runs_stream_values_updates_messages_tuple(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _stream)
    kinds = [e[0] for e in peer["events"]]
    assert kinds[0] == "metadata" and "messages" in kinds and kinds[-1] == "values"
    assert ours == peer


async def _failed(client: Any) -> list[Any]:
    tid = (await client.threads.create())["thread_id"]
    return [
        [part.event, part.data]
        async for part in client.runs.stream(
            tid, "chat", input={**user("hi"), "fail": "boom"}, stream_mode="updates"
        )
        if part.event != "metadata"
    ]


async def test_a_failed_run_names_the_exception(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _failed)
    assert peer[-1] == ["error", {"error": "ValueError", "message": "boom"}]
    assert ours == peer


def _events(mode: str) -> Scenario:
    async def scenario(client: Any) -> list[Any]:
        tid = (await client.threads.create())["thread_id"]
        return [
            part.event
            async for part in client.runs.stream(tid, "chat", input=user("hi"), stream_mode=mode)
        ]

    return scenario


@pytest.mark.parametrize(
    "mode",
    ["messages", "checkpoints", "tasks", "debug", "events"],
)
async def test_the_order_of_events_in_other_stream_modes(sides: dict[str, Side], mode: str) -> None:
    ours, peer = await both(sides, _events(mode))
    assert peer[0] == "metadata" and len(peer) > 2
    assert ours == peer


async def _langchain_events(client: Any) -> list[Any]:
    tid = (await client.threads.create())["thread_id"]
    return [
        [part.data["event"], part.data["name"], sorted(part.data["data"])]
        async for part in client.runs.stream(
            tid, "chat", input=user("hi"), stream_mode=["events", "values"]
        )
        if part.event == "events"
    ]


async def test_the_events_mode_streams_langchains_events(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _langchain_events)
    assert ["on_chat_model_stream", "GenericFakeChatModel", ["chunk"]] in peer
    assert ours == peer


async def _events_root(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create())["thread_id"]
    run_id, roots = None, []
    async for part in client.runs.stream(tid, "chat", input=user("hi"), stream_mode="events"):
        if part.event == "metadata":
            run_id = part.data["run_id"]
        elif not part.data["parent_ids"]:  # the graph's own events
            roots.append([part.data["event"], part.data["run_id"] == run_id])
    return {"roots": roots}


async def test_the_events_of_the_graph_carry_the_run_id(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _events_root)
    assert ["on_chain_start", True] in peer["roots"] and ["on_chain_end", True] in peer["roots"]
    assert ours == peer


async def _interrupt(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create())["thread_id"]
    asked = await client.runs.wait(tid, "review", input=user("the plan"))
    waiting = await client.threads.get(tid)
    pending = await client.threads.get_state(tid)
    answered = await client.runs.wait(tid, "review", command={"resume": "yes"})
    return {
        "asked": asked,
        "thread": thread(waiting),
        "state": state(pending),
        "answered": answered,
        "after": thread(await client.threads.get(tid)),
    }


async def test_interrupt_and_resume(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _interrupt)
    assert peer["thread"]["status"] == "interrupted"
    assert peer["answered"]["verdict"] == "yes"
    assert without_response_schema(ours) == without_response_schema(peer)


async def _interrupt_streamed(client: Any) -> dict[str, Any]:
    marker = str(uuid.uuid4())
    tid = (await client.threads.create(metadata={"test": marker}))["thread_id"]
    asked = [
        [part.event, part.data]
        async for part in client.runs.stream(
            tid, "review", input=user("the plan"), stream_mode=["updates", "values"]
        )
        if part.event != "metadata"
    ]
    waiting = {
        "found": [
            t["thread_id"]
            for t in await client.threads.search(metadata={"test": marker}, status="interrupted")
        ],
        "counted": await client.threads.count(metadata={"test": marker}, status="interrupted"),
    }
    answered = [
        [part.event, part.data]
        async for part in client.runs.stream(
            tid, "review", command={"resume": "no"}, stream_mode="updates"
        )
        if part.event != "metadata"
    ]
    return {
        "asked": asked,
        "waiting": waiting,
        "answered": answered,
        "idle": await client.threads.count(metadata={"test": marker}, status="idle"),
    }


async def test_interrupt_and_resume_streamed(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _interrupt_streamed)
    assert peer["waiting"]["counted"] == 1 and peer["idle"] == 1
    assert peer["answered"][-1][1]["review"]["verdict"] == "no"
    assert without_response_schema(ours) == without_response_schema(peer)


async def test_interrupt_items_carry_response_schema(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _interrupt_streamed)
    assert peer["asked"][-1][1]["__interrupt__"][0]["response_schema"] is None
    assert ours == peer


async def _interrupted_run(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create())["thread_id"]
    made = await client.runs.create(tid, "review", input=user("the plan"))
    await client.runs.join(tid, made["run_id"])
    return run(await client.runs.get(tid, made["run_id"]))


async def test_a_run_that_stops_at_an_interrupt_reads_as_success(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _interrupted_run)
    assert peer["status"] == "success"
    assert ours == peer


async def _state(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "chat", input=user("one"))
    await client.runs.wait(tid, "chat", input=user("two"))
    latest = await client.threads.get_state(tid)
    history = await client.threads.get_history(tid, limit=100)
    limited = await client.threads.get_history(tid, limit=2)
    at = await client.threads.get_state(
        tid, checkpoint_id=history[3]["checkpoint"]["checkpoint_id"]
    )
    return {
        "latest": state(latest),
        "history": [state(s) for s in history],
        "limited": [state(s) for s in limited],
        "at": state(at),
    }


async def test_get_state_and_history_with_limit(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _state)
    assert [s["step"] for s in peer["history"]] == [4, 3, 2, 1, 0, -1]
    assert ours == peer


def _before(shape: str) -> Scenario:
    async def scenario(client: Any) -> Any:
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "chat", input=user("one"))
        await client.runs.wait(tid, "chat", input=user("two"))
        checkpoint = (await client.threads.get_history(tid, limit=100))[2]["checkpoint"]
        before = {"configurable": checkpoint} if shape == "config" else checkpoint
        try:
            found = await client.threads.get_history(tid, limit=2, before=before)
        except httpx.HTTPStatusError as exc:
            return exc.response.status_code
        return [s["metadata"]["step"] for s in found]

    return scenario


async def test_history_before_as_a_checkpoint_config(sides: dict[str, Side]) -> None:
    # history 'before' as LangGraph's server takes it: {"configurable": {"checkpoint_id": ...}}
    ours, peer = await both(sides, _before("config"))
    assert peer == [1, 0]
    assert ours == peer


async def test_history_before_as_the_sdk_types_it(sides: dict[str, Side]) -> None:
    # The SDK types `before` as a Checkpoint ({"thread_id", "checkpoint_ns", "checkpoint_id"}):
    # ours takes it; langgraph dev 0.16.7 answers it with a 500 (KeyError 'configurable') and
    # drops the connection, so only ours is asked.
    client = get_client(url=sides["ours"].url, api_key=None)
    try:
        assert await _before("checkpoint")(client) == [1, 0]
    finally:
        await client.aclose()


async def _select(client: Any) -> Any:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "chat", input=user("one"))
    chosen = await client.threads.get_history(tid, limit=2, select=["values", "next"])
    return [sorted(s) for s in chosen]


async def test_history_select(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _select)
    # Documented here (docs/server.md): history takes `select`. langgraph dev 0.16.7 ignores it
    # and answers every field.
    assert ours == [["next", "values"], ["next", "values"]]
    assert len(peer[0]) > 2 and {"next", "values"} <= set(peer[0])


async def _update_state(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "chat", input=user("one"))
    edit = {"messages": [{"role": "assistant", "content": "edited answer"}]}
    written = await client.threads.update_state(tid, edit, as_node="reply")
    edited = await client.threads.get_state(tid)
    again = await client.runs.wait(tid, "chat", input=user("two"))
    return {
        "edited": state(edited),
        # The SDK's ThreadUpdateStateResponse has `checkpoint` only (LangGraph's server also
        # repeats it as `checkpoint_id` and `configurable`).
        "same_checkpoint": written["checkpoint"]["checkpoint_id"]
        == edited["checkpoint"]["checkpoint_id"],
        "again": said(again),
    }


async def test_update_state_as_node_leaves_the_thread_usable(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _update_state)
    assert peer["again"][-3:] == [
        ["ai", "edited answer"],
        ["human", "two"],
        ["ai", "you said: two"],
    ]
    assert ours == peer


async def _runs(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "chat", input=user("one", delay=0.3))
    joined = await client.runs.join(tid, first["run_id"])
    second = await client.runs.create(tid, "chat", input=user("two"))
    await client.runs.join(tid, second["run_id"])
    listed = await client.runs.list(tid)
    got = await client.runs.get(tid, first["run_id"])
    return {
        "created": run(first),
        "joined": said(joined),
        "listed": [run(r) for r in listed],
        "got": run(got),
    }


async def test_runs_create_join_list_get(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _runs)
    # A created run: LangGraph's server queues it for a worker ('pending'); ours starts it at
    # once on an idle thread ('running'). Either is a run not yet done.
    assert peer["created"].pop("status") == "pending"
    assert ours["created"].pop("status") in ("pending", "running")
    assert peer["got"]["status"] == "success"
    assert ours == peer


async def _join_stream(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create())["thread_id"]
    made = await client.runs.create(
        tid, "chat", input=user("joined", delay=0.5), stream_mode=["values", "updates"]
    )
    parts = [[p.event, p.data] async for p in client.runs.join_stream(tid, made["run_id"])]
    return {"events": [e for e, _ in parts], "last": parts[-1]}


async def test_runs_join_stream_with_the_sdk_defaults(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _join_stream)
    assert said(peer["last"][1])[-1] == ["ai", "you said: joined"]
    assert ours == peer


async def _going(client: Any, tid: str, run_id: str) -> None:
    """Wait until run ``run_id`` is in its node: ``running``, its input saved, ``reply``
    next (LangGraph's server takes a created run from its queue a moment later)."""
    for _ in range(600):  # bounded: 30 s
        got = await client.runs.get(tid, run_id)
        state = await client.threads.get_state(tid)
        if got["status"] == "running" and state["next"] == ["reply"]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not start its node")


def _cancel(then: dict[str, Any] | None) -> Scenario:
    """A run cancelled in the middle of its node, then a run with input ``then``."""

    async def scenario(client: Any) -> dict[str, Any]:
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "chat", input=user("before"))
        made = await client.runs.create(tid, "chat", input=user("slow", delay=5))
        await _going(client, tid, made["run_id"])
        await client.runs.cancel(tid, made["run_id"], wait=True)
        after = await client.runs.get(tid, made["run_id"])
        left = await client.threads.get_state(tid)
        status = (await client.threads.get(tid))["status"]
        try:
            again: Any = said(await client.runs.wait(tid, "chat", input=then))
        except httpx.HTTPStatusError as exc:
            again = exc.response.status_code
        return {
            "run": run(after),
            "thread": status,
            "next": left["next"],
            "left": said(left["values"]),
            "again": again,
            "then": (await client.threads.get(tid))["status"],
            "runs": [r["status"] for r in await client.runs.list(tid)],
        }

    return scenario


async def test_runs_cancel_ends_the_run(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _cancel(user("after the cancel")))
    assert peer["run"]["status"] == "interrupted"
    assert ours["run"] == peer["run"]


async def test_a_cancelled_thread_takes_new_input_on_top(sides: dict[str, Side]) -> None:
    # The cancelled run's saved steps stay: the thread reads 'interrupted' where it stopped,
    # and new input goes on top of it (the task left pending is dropped).
    ours, peer = await both(sides, _cancel(user("after the cancel")))
    assert peer["thread"] == "interrupted" and peer["next"] == ["reply"]
    assert peer["again"][-3:] == [
        ["human", "slow"],
        ["human", "after the cancel"],
        ["ai", "you said: after the cancel"],
    ]
    assert ours == peer


async def test_a_cancelled_run_continues_with_input_null(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _cancel(None))
    assert peer["again"][-2:] == [["human", "slow"], ["ai", "you said: slow"]]
    assert peer["runs"] == ["success", "interrupted", "success"] and peer["then"] == "idle"
    assert ours == peer


def _input_on_top(stop: str) -> Scenario:
    """A run that stops (``stop``: at a human step, at ``interrupt_before`` /
    ``interrupt_after``, or failed), then new input on its thread instead of an answer."""

    async def scenario(client: Any) -> dict[str, Any]:
        tid = (await client.threads.create())["thread_id"]
        graph, first, then = "chat", user("one"), user("two")
        if stop == "interrupt":
            graph = "review"
            await client.runs.wait(tid, graph, input=first)
        elif stop == "failed":
            made = await client.runs.create(tid, graph, input={**first, "fail": "boom"})
            await client.runs.join(tid, made["run_id"])
            then = {**then, "fail": ""}
        else:
            graph = "review" if stop == "interrupt_after" else "chat"
            node = "draft" if stop == "interrupt_after" else "reply"
            await client.runs.wait(tid, graph, input=first, **{stop: [node]})
        before = await client.threads.get_state(tid)
        status = (await client.threads.get(tid))["status"]
        again = await client.runs.wait(tid, graph, input=then)
        history = await client.threads.get_history(tid, limit=100)
        return {
            "before": {"status": status, "next": before["next"]},
            "again": {**again, "__interrupt__": bool(again.get("__interrupt__"))},
            "history": [state(s) for s in history],
            "thread": thread(await client.threads.get(tid)),
            "runs": [r["status"] for r in await client.runs.list(tid)],
        }

    return scenario


@pytest.mark.parametrize("stop", ["interrupt", "interrupt_before", "interrupt_after", "failed"])
async def test_new_input_goes_on_top_of_a_stopped_thread(sides: dict[str, Side], stop: str) -> None:
    # New input on a thread that waits for a human step (or stopped before/after a node, or
    # failed) is no 409: it runs on top, the pending task dropped (a chat UI user who types
    # instead of answering gets a new turn); the earlier checkpoints all stay in the history.
    ours, peer = await both(sides, _input_on_top(stop))
    assert peer["before"]["next"] and said(peer["again"])[:2] == [
        ["human", "one"],
        ["human", "two"],
    ]
    assert peer["runs"][0] == "success"
    assert without_response_schema(ours) == without_response_schema(peer)


def _multitask(strategy: str) -> Scenario:
    async def scenario(client: Any) -> dict[str, Any]:
        tid = (await client.threads.create())["thread_id"]
        first = await client.runs.create(tid, "chat", input=user("first", delay=1.5))
        await asyncio.sleep(0.5)
        try:
            second = await client.runs.create(
                tid, "chat", input=user("second"), multitask_strategy=strategy
            )
        except httpx.HTTPStatusError as exc:
            second = {"refused": exc.response.status_code}
        if "run_id" in second:
            await client.runs.join(tid, second["run_id"])
        joined_first = await client.http.client.get(f"/threads/{tid}/runs/{first['run_id']}/join")
        try:
            first_status: Any = (await client.runs.get(tid, first["run_id"]))["status"]
        except httpx.HTTPStatusError as exc:
            first_status = exc.response.status_code
        values = (await client.threads.get_state(tid))["values"]
        return {
            "first": first_status,
            "joined_first": joined_first.status_code,
            "second": second.get("refused") or second.get("multitask_strategy"),
            "said": said(values),
            "runs": len(await client.runs.list(tid)),
        }

    return scenario


@pytest.mark.parametrize("strategy", ["enqueue", "reject"])
async def test_multitask_strategy(sides: dict[str, Side], strategy: str) -> None:
    ours, peer = await both(sides, _multitask(strategy))
    assert ours == peer


async def test_multitask_interrupt(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _multitask("interrupt"))
    # The interrupted run's input: ours keeps it and runs the new input on top (as LangGraph's
    # double-texting docs show the 'interrupt' outcome); langgraph dev 0.16.7 drops the
    # interrupted run's writes, its input too.
    assert ours.pop("said") == [["human", "first"], ["human", "second"], ["ai", "you said: second"]]
    assert peer.pop("said") == [["human", "second"], ["ai", "you said: second"]]
    assert ours == peer


async def test_multitask_rollback(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _multitask("rollback"))
    # Joining the deleted run: ours answers 404; LangGraph's server 200 with a body of
    # {"__error__": {"message": "404: Run not found"}}.
    assert (ours.pop("joined_first"), peer.pop("joined_first")) == (404, 200)
    assert ours == peer


async def _errors(client: Any) -> dict[str, Any]:
    tid = (await client.threads.create())["thread_id"]
    missing = str(uuid.uuid4())
    return {
        "thread exists": await status_of(client.threads.create(thread_id=tid, if_exists="raise")),
        "thread do_nothing": await status_of(
            client.threads.create(thread_id=tid, if_exists="do_nothing")
        ),
        "unknown thread": await status_of(client.threads.get(missing)),
        "run on an unknown thread": await status_of(
            client.runs.wait(missing, "chat", input=user("x"))
        ),
        "unknown assistant": await status_of(client.assistants.get(missing)),
        "run of an unknown assistant": await status_of(client.runs.wait(tid, missing)),
        "unknown run": await status_of(client.runs.get(tid, missing)),
        "unknown store item": await status_of(client.store.get_item(["none"], "x")),
    }


async def test_error_statuses(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _errors)
    assert peer["unknown thread"] == 404 and peer["thread exists"] == 409
    assert ours == peer


async def _if_not_exists(client: Any) -> dict[str, Any]:
    tid = str(uuid.uuid4())
    done = await client.runs.wait(
        tid, "chat", input=user("made on the way"), if_not_exists="create"
    )
    return {"said": said(done), "thread": thread(await client.threads.get(tid))}


async def test_a_run_may_create_its_thread(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _if_not_exists)
    assert peer["said"][-1] == ["ai", "you said: made on the way"]
    assert ours == peer


async def system_assistant(client: Any, graph_id: str) -> str:
    """The id of the assistant the server made for ``graph_id`` (LangGraph's server takes only
    that uuid where an assistant is read, not the graph id)."""
    (found,) = await client.assistants.search(graph_id=graph_id, metadata={"created_by": "system"})
    return str(found["assistant_id"])


async def _graph_views(client: Any) -> dict[str, Any]:
    aid = await system_assistant(client, "chat")
    schemas = await client.assistants.get_schemas(aid)
    drawn = await client.assistants.get_graph(aid)
    return {
        "schemas": sorted(k for k, v in schemas.items() if v is not None),
        "state": sorted(schemas["state_schema"]["properties"]),
        "nodes": sorted(n["id"] for n in drawn["nodes"]),
        "edges": sorted((e["source"], e["target"]) for e in drawn["edges"]),
        "subgraphs": await client.assistants.get_subgraphs(aid),
    }


async def test_assistant_schemas_graph_and_subgraphs(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _graph_views)
    assert peer["nodes"] == ["__end__", "__start__", "reply"]
    assert ours == peer


# -- assistants, store, crons -------------------------------------------------------------------


async def _assistants(client: Any) -> dict[str, Any]:
    marker = str(uuid.uuid4())
    made = await client.assistants.create(
        "chat", config={"configurable": {"tone": "dry"}}, metadata={"test": marker}, name="mine"
    )
    aid = made["assistant_id"]
    updated = await client.assistants.update(aid, metadata={"test": marker, "v": 2})
    versions = await client.assistants.get_versions(aid)
    found = await client.assistants.search(metadata={"test": marker})
    counted = await client.assistants.count(metadata={"test": marker})
    ran = await client.runs.wait(None, aid, input=user("via mine"))
    await client.assistants.delete(aid)

    def shown(a: dict[str, Any]) -> dict[str, Any]:
        keep = ("assistant_id", "graph_id", "config", "context", "version", "name", "description")
        return {**{k: a.get(k) for k in keep}, "metadata": meta(a["metadata"])}

    return {
        "made": shown(made),
        "updated": shown(updated),
        "versions": [shown(v) for v in versions],
        "found": [shown(a) for a in found],
        "counted": counted,
        "ran": said(ran),
        "gone": await status_of(client.assistants.get(aid)),
    }


async def test_assistants_create_update_versions_search_count_delete(
    sides: dict[str, Side],
) -> None:
    ours, peer = await both(sides, _assistants)
    assert [v["version"] for v in peer["versions"]] == [2, 1]
    assert ours == peer


async def _store(client: Any) -> dict[str, Any]:
    marker = str(uuid.uuid4())
    await client.store.put_item(["docs", marker], "a", {"kind": "note", "n": 1})
    await client.store.put_item(["docs", marker, "deep"], "b", {"kind": "todo", "n": 2})
    got = await client.store.get_item(["docs", marker], "a")
    found = await client.store.search_items(["docs", marker], filter={"kind": "todo"})
    spaces = await client.store.list_namespaces(prefix=["docs", marker])
    await client.store.delete_item(["docs", marker], "a")

    def item(i: dict[str, Any]) -> dict[str, Any]:
        return {k: i[k] for k in ("namespace", "key", "value")}

    return {
        "got": item(got),
        "found": [item(i) for i in found["items"]],
        "spaces": spaces,
        "gone": await status_of(client.store.get_item(["docs", marker], "a")),
    }


async def test_store_put_get_search_namespaces(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _store)
    assert ours == peer


async def _crons(client: Any) -> dict[str, Any]:
    marker = str(uuid.uuid4())
    made = await client.crons.create(
        "chat", schedule="0 0 1 1 *", input=user("yearly"), metadata={"test": marker}
    )
    cron_id = made["cron_id"]
    aid = await system_assistant(client, "chat")
    found = await client.crons.search(assistant_id=aid, metadata={"test": marker})
    await client.crons.delete(cron_id)
    left = await client.crons.search(assistant_id=aid, metadata={"test": marker})

    def shown(c: dict[str, Any]) -> dict[str, Any]:
        keep = ("cron_id", "assistant_id", "thread_id", "schedule", "end_time", "enabled")
        return {**{k: c.get(k) for k in keep}, "metadata": meta(c.get("metadata"))}

    return {
        "made": sorted(made),
        "found": [shown(c) for c in found],
        "left": left,
    }


async def test_crons_create_search_delete(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _crons)
    assert ours == peer


# -- RemoteGraph --------------------------------------------------------------------------------


async def test_remote_graph_invoke_stream_and_state(sides: dict[str, Side]) -> None:
    async def scenario(url: str) -> dict[str, Any]:
        client = get_client(url=url, api_key=None)
        try:
            graph = RemoteGraph("chat", client=client)
            tid = (await client.threads.create())["thread_id"]
            config = {"configurable": {"thread_id": tid}}
            done = await graph.ainvoke(user("remote"), config)
            chunks = [c async for c in graph.astream(user("again"), config, stream_mode="updates")]
            now = await graph.aget_state(config)
            review = RemoteGraph("review", client=client)
            asked_in = {"configurable": {"thread_id": (await client.threads.create())["thread_id"]}}
            asked = [c async for c in review.astream(user("plan"), asked_in, stream_mode="updates")]
            resumed = await review.ainvoke(Command(resume="fine"), asked_in)
        finally:
            await client.aclose()
        return {
            "done": said(done),
            "chunks": chunks,
            "next": list(now.next),
            "values": now.values,
            "asked": without_response_schema(asked),
            "resumed": [resumed["verdict"], said(resumed)],
        }

    said_by = {}
    for name in ("peer", "ours"):
        said_by[name] = normalise(await scenario(sides[name].url), sides[name].aliases)
    assert said_by["peer"]["resumed"] == [
        "fine",
        [["human", "plan"], ["ai", "verdict: fine"]],
    ]
    assert said_by["ours"] == said_by["peer"]


async def _goto_end(client: Any) -> dict[str, Any]:
    """The Agent Chat UI's "mark as resolved" on a thread that waits: ``goto`` END alone."""
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "review", input=user("the plan"))
    after = await client.runs.wait(tid, "review", command={"goto": "__end__"})
    latest = await client.threads.get_state(tid)
    return {
        "after": sorted(after),
        "next": latest["next"],
        "asked": len(latest["interrupts"]),
        "status": (await client.threads.get(tid))["status"],
    }


async def test_a_goto_end_command_is_taken_alike(sides: dict[str, Side]) -> None:
    """LangGraph takes ``goto`` END on a graph that waits at an interrupt, and its node,
    run again, asks again."""
    ours, peer = await both(sides, _goto_end)
    assert peer["status"] == "interrupted" and peer["next"] == ["review"]
    assert ours == peer
