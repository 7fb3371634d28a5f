"""Run and thread semantics a LangGraph client relies on, against a real server with the real
``langgraph-sdk`` client and ``RemoteGraph`` (issue 37): multitask strategies, state edits as a
node, thread metadata, the rejoin headers, run options and the bulk routes.

Where a test compares with LangGraph's own server, the comment says what ``langgraph dev``
(``langgraph-api`` with ``langgraph-runtime-inmem``) does in its code.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

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


# -- rejoining a cut response, a human step --------------------------------------------------


class CutOnce:
    """A loopback TCP proxy in front of the server that cuts the first connection whose
    response carries a ``values`` event, right after passing that event on: a stream cut
    mid-run, as a proxy's timeout or a dropped network cuts one. Sets ``apps.GATE`` when the
    client comes back, so the run ends only after the rejoin."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sent: list[bytes] = []
        self.cut = False
        self.tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)

        async def up() -> None:
            while data := await reader.read(65536):
                self.sent.append(data)
                if self.cut:
                    apps.GATE.set()
                up_writer.write(data)
                await up_writer.drain()

        going = asyncio.ensure_future(up())
        try:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()
                if not self.cut and b"event: values" in data:
                    self.cut = True
                    break
        finally:
            going.cancel()
            writer.close()
            up_writer.close()


async def test_a_cut_stream_is_rejoined_where_it_was_cut(server: LiveServer) -> None:
    """langgraph-api's ``stream_run`` answers with ``Location: /threads/T/runs/R/stream`` and
    ``Content-Location: /threads/T/runs/R``; the SDK goes on from ``Location`` with the
    ``Last-Event-ID`` it read when the connection drops."""
    proxy = CutOnce(int(server.url.rsplit(":", 1)[1]))
    async with proxy as url, get_client(url=url, api_key=None) as sdk:
        thread = (await sdk.threads.create())["thread_id"]
        parts = [
            p async for p in sdk.runs.stream(thread, "gated", input=USER, stream_mode="values")
        ]
    assert proxy.cut
    run_id = parts[0].data["run_id"]
    steps = [p.data["steps"] for p in parts if p.event == "values"]
    assert steps == sorted(set(steps)) and steps[-1] == 3  # nothing twice, nothing lost
    assert [p.data for p in parts if p.event == "values"][-1]["answer"] == "4 words"
    heads = [h.decode().lower() for h in proxy.sent]
    rejoin = [h for h in heads if h.startswith(f"get /threads/{thread}/runs/{run_id}/stream")]
    assert rejoin and "last-event-id:" in rejoin[0]


async def test_location_headers_of_waited_created_and_stateless_runs(sdk: Any) -> None:
    """As langgraph-api's ``wait_run`` (``Location: …/join``), ``create_run`` and the
    stateless routes (``/runs/R`` and ``/runs/R/stream``) send them."""
    http = sdk.http.client
    thread = (await sdk.threads.create())["thread_id"]
    run = {"assistant_id": "counter", "input": USER}
    waited = await http.post(f"/threads/{thread}/runs/wait", json=run)
    base = waited.headers["content-location"]
    assert base.startswith(f"/threads/{thread}/runs/")
    assert waited.headers["location"] == f"{base}/join"
    assert (await http.get(waited.headers["location"])).json()["answer"] == "4 words"
    made = await http.post("/runs", json=run)
    assert made.headers["content-location"] == f"/runs/{made.json()['run_id']}"
    async with http.stream("POST", "/runs/stream", json=run) as streamed:
        where = streamed.headers["location"]
        assert where == streamed.headers["content-location"] + "/stream"
        assert where.startswith("/runs/")
    assert (await http.get(where.removesuffix("/stream"))).json()["status"] in (
        "pending",
        "running",
        "success",
    )


async def test_a_run_that_stops_at_a_human_step_reads_as_langgraphs(sdk: Any) -> None:
    """langgraph-api: the interrupt goes out in ``updates`` as ``{"__interrupt__": [...]}``
    and, to a reader of ``values``, as a ``values`` event holding ``__interrupt__``; the
    thread reads ``interrupted`` with ``interrupts`` by task id; ``wait`` answers the values
    with ``__interrupt__``."""
    thread = (await sdk.threads.create())["thread_id"]
    parts = [
        p
        async for p in sdk.runs.stream(
            thread, "approval", input={"input": "plan"}, stream_mode=["values", "updates"]
        )
    ]
    asked = [p.data for p in parts if p.event == "updates" and "__interrupt__" in p.data]
    assert asked[0]["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
    assert set(asked[0]["__interrupt__"][0]) == {"value", "id", "response_schema"}  # as LangGraph's
    assert "__interrupt__" in [p.data for p in parts if p.event == "values"][-1]
    got = await sdk.threads.get(thread)
    state = await sdk.threads.get_state(thread)
    assert got["status"] == "interrupted" and state["next"] == ["approval"]
    [(task_id, found)] = got["interrupts"].items()
    assert task_id == state["tasks"][0]["id"] and found[0]["value"]["prompt"] == "Approve the plan?"
    again = (await sdk.threads.create())["thread_id"]
    waited = await sdk.runs.wait(again, "approval", input={"input": "plan"})
    assert waited["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"


# -- run options -----------------------------------------------------------------------------


def _said(done: dict[str, Any]) -> str:
    return str(done["answer"])


async def test_a_run_from_a_checkpoint_edits_or_regenerates_a_turn(sdk: Any) -> None:
    """The chat UIs' edit (new input from the checkpoint before a turn) and regenerate (input
    null from the checkpoint before the answer). langgraph-api puts ``checkpoint_id`` into
    the run's ``configurable``: the graph runs from that checkpoint, a new branch."""
    thread = (await sdk.threads.create())["thread_id"]
    await sdk.runs.wait(thread, "chat", input={"input": "hello"})
    before = (await sdk.threads.get_state(thread))["checkpoint"]["checkpoint_id"]
    second = await sdk.runs.wait(thread, "chat", input={"input": "again"})
    assert _said(second) == "turn 2: hello / again"
    edited = await sdk.runs.wait(thread, "chat", input={"input": "edited"}, checkpoint_id=before)
    assert _said(edited) == "turn 2: hello / edited"
    parent = (await sdk.threads.get_state(thread))["parent_checkpoint"]
    regenerated = await sdk.runs.wait(thread, "chat", input=None, checkpoint=parent)
    assert _said(regenerated) == "turn 2: hello / edited"
    state = await sdk.threads.get_state(thread)
    said = [m["content"] for m in state["values"]["messages"] if m["role"] == "user"]
    assert said == ["hello", "edited"]  # the first branch's turn is not on this one
    runs = await sdk.runs.list(thread)
    assert runs[0]["kwargs"]["checkpoint_id"] == parent["checkpoint_id"]
    with pytest.raises(NotFoundError, match="no checkpoint"):
        await sdk.runs.create(thread, "chat", input=None, checkpoint_id="nope")
    with pytest.raises(UnprocessableEntityError, match="checkpoint_id"):
        await sdk.runs.create(None, "chat", input={"input": "x"}, checkpoint_id=before)


async def test_after_seconds_delays_the_start(sdk: Any) -> None:
    """langgraph-api stores the run ``pending`` with ``created_at`` moved ``after_seconds``
    on; its queue takes it then."""
    thread = (await sdk.threads.create())["thread_id"]
    run = await sdk.runs.create(thread, "counter", input=USER, after_seconds=1.5)
    assert run["status"] == "pending" and run["kwargs"]["after_seconds"] == 1.5
    assert (await sdk.runs.get(thread, run["run_id"]))["status"] == "pending"
    assert (await sdk.runs.join(thread, run["run_id"]))["answer"] == "4 words"
    with pytest.raises(UnprocessableEntityError, match="after_seconds"):
        await sdk.runs.create(thread, "counter", input=USER, after_seconds=-1)


async def test_on_completion_delete_removes_a_stateless_runs_thread(sdk: Any) -> None:
    """langgraph-api: a run without a thread with ``on_completion="delete"`` runs on a
    temporary thread, deleted when the run ends (its default for ``/runs``; here a stateless
    run's thread is kept unless asked, as the durable store's runs are read back)."""
    http = sdk.http.client
    run = {"assistant_id": "counter", "input": USER, "on_completion": "delete"}
    done = await http.post("/runs/wait", json=run)
    assert done.json()["answer"] == "4 words"
    thread = done.headers["content-location"].split("/")[2]
    assert (await http.get(f"/threads/{thread}")).status_code == 404
    kept = await http.post("/runs/wait", json={**run, "on_completion": "keep"})
    thread = kept.headers["content-location"].split("/")[2]
    assert (await sdk.threads.get(thread))["values"]["answer"] == "4 words"
    with pytest.raises(UnprocessableEntityError, match="on_completion"):
        await sdk.runs.create(thread, "counter", input=USER, on_completion="delete")


# -- history select and before, a 500's traceback ------------------------------------------------


async def test_history_and_state_select_and_a_bad_before(sdk: Any) -> None:
    """langgraph-sdk sends ``select`` (fields of ``ThreadState``, or ``values.KEY``) to
    ``get_state`` and ``get_history``; the answer holds only those."""
    thread = (await sdk.threads.create())["thread_id"]
    await sdk.runs.wait(thread, "counter", input=USER)
    history = await sdk.threads.get_history(thread, limit=3, select=["values.answer", "next"])
    assert [set(h) for h in history] == [{"values", "next"}] * 3
    assert history[0] == {"values": {"answer": "4 words"}, "next": []}
    state = await sdk.threads.get_state(thread, select=["checkpoint", "values.steps"])
    assert set(state) == {"checkpoint", "values"} and state["values"] == {"steps": 3}
    at = await sdk.threads.get_state(thread, checkpoint=state["checkpoint"], select=["metadata"])
    assert set(at) == {"metadata"} and at["metadata"]["step"] == 3
    with pytest.raises(UnprocessableEntityError, match="select: 'nope' is not a field"):
        await sdk.threads.get_history(thread, select=["nope"])
    http = sdk.http.client
    for before in ({"thread_id": thread}, {"checkpoint_id": None}, 5):
        bad = await http.post(f"/threads/{thread}/history", json={"before": before})
        assert bad.status_code == 422 and bad.json()["message"].startswith("before: ")
    ok = await http.post(f"/threads/{thread}/history", json={"before": state["checkpoint"]})
    assert [h["metadata"]["step"] for h in ok.json()] == [2, 1, 0, -1]
    # LangGraph's server takes a checkpoint config too
    config = {"before": {"configurable": state["checkpoint"]}, "limit": 2}
    ok = await http.post(f"/threads/{thread}/history", json=config)
    assert [h["metadata"]["step"] for h in ok.json()] == [2, 1]


def test_a_500_leaves_its_traceback_in_the_servers_log(
    serve: Callable[..., LiveServer], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/server.md: an unexpected failure is a 500 with one line, and its traceback goes to
    the server's log. A store broken under the server (its runs table dropped) is one."""
    server = serve()
    with httpx.Client(base_url=server.url) as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        with sqlite3.connect(tmp_path / "server.db") as db:
            db.execute("DROP TABLE runs")
        with caplog.at_level(logging.ERROR, logger="aworld_graph.server"):
            failed = http.get(f"/threads/{thread}/runs")
    assert failed.status_code == 500 and failed.json()["code"] == "internal"
    assert "Traceback" not in failed.text and "runs" not in failed.json()["message"]
    [record] = [r for r in caplog.records if r.name == "aworld_graph.server"]
    assert record.getMessage() == f"GET /threads/{thread}/runs failed"
    assert record.exc_info is not None and "no such table: runs" in str(record.exc_info[1])
    assert "Traceback (most recent call last)" in caplog.text


# -- batches, bulk cancel, the thread's stream, a waiting client that goes -------------------------


async def test_runs_batch_starts_several_stateless_runs(sdk: Any) -> None:
    """langgraph-api ``create_stateless_run_batch``: a list of run bodies, each a run on a new
    thread; the answer is the list of their ``Run`` objects."""
    runs = await sdk.runs.create_batch(
        [
            {"assistant_id": "counter", "input": {"input": "one two"}},
            {"assistant_id": "chat", "input": {"input": "hi"}},
        ]
    )
    assert [r["assistant_id"] for r in runs] == ["counter", "chat"]
    assert len({r["thread_id"] for r in runs}) == 2
    done = [await sdk.runs.join(r["thread_id"], r["run_id"]) for r in runs]
    assert [d["answer"] for d in done] == ["2 words", "turn 1: hi"]
    with pytest.raises(UnprocessableEntityError, match=r"run \[1\]: .*stream_mode"):
        await sdk.runs.create_batch(
            [
                {"assistant_id": "counter", "input": USER},
                {"assistant_id": "counter", "stream_mode": 5},
            ]
        )


async def test_cancel_many_by_ids_and_by_status(sdk: Any) -> None:
    """langgraph-api ``POST /runs/cancel``: ``thread_id`` with ``run_ids``, or ``status``
    (``pending``, ``running``, ``all``) alone; 404 when it finds no run."""
    thread = (await sdk.threads.create())["thread_id"]
    first = await _going(sdk, thread)
    queued = await sdk.runs.create(thread, "gated", input=None)
    await sdk.runs.cancel_many(thread_id=thread, run_ids=[queued["run_id"]])
    assert (await sdk.runs.get(thread, queued["run_id"]))["status"] == "interrupted"
    assert (await sdk.runs.get(thread, first))["status"] == "running"
    other = (await sdk.threads.create())["thread_id"]
    second = await sdk.runs.create(other, "gated", input=USER)
    await sdk.runs.cancel_many(status="all")
    for t, r in ((thread, first), (other, second["run_id"])):
        assert (await sdk.runs.get(t, r))["status"] == "interrupted"
    with pytest.raises(NotFoundError, match="no runs found"):
        await sdk.runs.cancel_many(status="running")
    with pytest.raises(UnprocessableEntityError, match="leave out thread_id"):
        await sdk.runs.cancel_many(thread_id=thread, run_ids=[first], status="all")


async def test_the_threads_stream_follows_each_run_on_it(sdk: Any) -> None:
    """langgraph-sdk ``threads.join_stream`` (``GET /threads/{id}/stream``): the events of the
    thread's runs as they go, each run opened and closed by a ``metadata`` event, until the
    client leaves."""
    thread = (await sdk.threads.create())["thread_id"]
    going = await _going(sdk, thread)
    parts = await sdk.threads.join_stream(thread)  # a coroutine giving the stream
    got = [await anext(parts)]  # joined: the run going is streamed from its start
    assert got[0].event == "metadata" and got[0].data["run_id"] == going
    apps.GATE.set()
    second = (await sdk.runs.create(thread, "gated", input={"input": "two more"}))["run_id"]
    async for part in parts:
        got.append(part)
        if part.event == "metadata" and part.data == {"status": "run_done", "run_id": second}:
            break
    await parts.aclose()
    opened = [p.data["run_id"] for p in got if p.event == "metadata" and "attempt" in p.data]
    closed = [p.data["run_id"] for p in got if p.event == "metadata" and "status" in p.data]
    assert opened == closed == [going, second]
    answers = [p.data.get("answer") for p in got if p.event == "values"]
    assert answers[-1] == "2 words" and "4 words" in answers
    with pytest.raises(UnprocessableEntityError, match="state_update"):  # names those served
        async for _ in await sdk.threads.join_stream(thread, stream_mode="nonsense"):  # type: ignore[arg-type]
            pass


async def test_a_waited_run_with_on_disconnect_cancel_stops_when_the_client_goes(
    sdk: Any,
) -> None:
    """langgraph-api ``wait_run``: ``on_disconnect="cancel"`` cancels the run when the
    waiting client disconnects (default ``continue``: it goes on)."""
    thread = (await sdk.threads.create())["thread_id"]
    body = {"assistant_id": "gated", "input": USER, "on_disconnect": "cancel"}
    waiting = asyncio.ensure_future(sdk.http.client.post(f"/threads/{thread}/runs/wait", json=body))
    run_id = None
    while run_id is None:  # its run is stored as it is acknowledged
        runs = await sdk.runs.list(thread)
        run_id = runs[0]["run_id"] if runs else None
        await asyncio.sleep(0.01)
    waiting.cancel()  # the client goes away
    with pytest.raises(asyncio.CancelledError):
        await waiting
    joined = await sdk.runs.join(thread, run_id)
    assert joined["__error__"]["error"] == "Cancelled"


async def test_interrupt_before_and_after_stop_the_run_there(sdk: Any) -> None:
    """langgraph-api passes ``interrupt_before`` / ``interrupt_after`` (node names or ``"*"``)
    to the graph's ``astream``: the run stops there, the thread reads ``interrupted`` with
    those nodes next, and a run with input ``null`` goes on."""
    thread = (await sdk.threads.create())["thread_id"]
    await sdk.runs.wait(thread, "counter", input=USER, interrupt_before=["counter__tools"])
    state = await sdk.threads.get_state(thread)
    assert state["next"] == ["counter__tools"] and state["values"]["answer"] is None
    assert (await sdk.threads.get(thread))["status"] == "interrupted"
    await sdk.runs.wait(thread, "counter", input=None, interrupt_after="*")
    assert (await sdk.threads.get_state(thread))["next"] == ["counter"]  # the tools ran
    done = await sdk.runs.wait(thread, "counter", input=None)
    assert done["answer"] == "4 words"
    runs = await sdk.runs.list(thread)
    assert runs[-1]["kwargs"]["interrupt_before"] == ["counter__tools"]


def test_a_browser_client_may_read_where_a_run_goes_on(serve: Callable[..., LiveServer]) -> None:
    """With ``--cors-origin``, a chat UI in a browser reads ``Location`` and
    ``Content-Location`` (CORS exposes them), as the JS SDK rejoins a stream from them."""
    server = serve(cors_origins=["http://ui.test"])
    origin = {"Origin": "http://ui.test"}
    with httpx.Client(base_url=server.url, headers=origin) as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        run = {"assistant_id": "counter", "input": USER}
        done = http.post(f"/threads/{thread}/runs/wait", json=run)
    exposed = {h.strip() for h in done.headers["access-control-expose-headers"].split(",")}
    assert {"location", "content-location"} <= {h.lower() for h in exposed}
    assert done.headers["location"].endswith("/join")
