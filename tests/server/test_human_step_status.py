"""A run that stops at a human step ends ``success``, as in LangGraph's server: the *thread*
reads ``interrupted`` and holds the interrupts, and whoever needs to know that a person is
asked reads them (``wait``/``join`` under ``__interrupt__``, the webhook's ``values``, the
thread). ``interrupted`` is a run stopped mid-run (cancelled, or its server died)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from langgraph_sdk import get_client

from aworld_graph import Runners, Task
from aworld_graph.checkpoint import TrajectorySaver
from tests.server import apps
from tests.server.conftest import LiveServer
from tests.server.test_webhooks import Receiver

PLAN = {"input": "plan the offsite"}


async def _posted(receiver: Receiver, count: int) -> None:
    for _ in range(600):  # bounded: 30 s
        if len(receiver.got) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{len(receiver.got)} webhooks came, not {count}")


async def test_the_run_ends_success_and_its_webhook_says_what_is_asked(
    server: LiveServer,
) -> None:
    receiver = Receiver()
    with LiveServer(receiver.app) as hooked:
        sdk = get_client(url=server.url, api_key=None)
        try:
            thread = (await sdk.threads.create())["thread_id"]
            hook = f"{hooked.url}/hook"
            run = await sdk.runs.create(thread, "approval", input=PLAN, webhook=hook)
            joined = await sdk.runs.join(thread, run["run_id"])
            assert joined["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
            assert (await sdk.runs.get(thread, run["run_id"]))["status"] == "success"
            waiting = await sdk.threads.get(thread)
            assert waiting["status"] == "interrupted" and waiting["interrupts"]
            asked = await receiver.first()
            answer = await sdk.runs.create(
                thread, "approval", command={"resume": "approve"}, webhook=hook
            )
            done = await sdk.runs.join(thread, answer["run_id"])
            assert done["answer"] == "published the plan" and "__interrupt__" not in done
            assert (await sdk.threads.get(thread))["status"] == "idle"
            await _posted(receiver, 2)
        finally:
            await sdk.aclose()
    assert asked["run_id"] == run["run_id"] and asked["status"] == "success"
    assert asked["values"]["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
    answered = receiver.got[1]
    assert answered["status"] == "success" and "__interrupt__" not in answered["values"]


async def test_a_run_read_back_from_the_store_still_says_what_is_asked(
    serve: Callable[..., LiveServer],
) -> None:
    """A server that does not hold the run (a new one on the same store) reads it
    ``success`` and ``join`` answers the thread's pending interrupts with it."""
    first = serve()
    sdk = get_client(url=first.url, api_key=None)
    thread = (await sdk.threads.create())["thread_id"]
    run = await sdk.runs.wait(thread, "approval", input=PLAN)
    assert run["__interrupt__"]
    run_id = (await sdk.runs.list(thread))[0]["run_id"]
    await sdk.aclose()
    first.__exit__(None, None, None)

    second = serve()
    sdk = get_client(url=second.url, api_key=None)
    try:
        assert (await sdk.runs.get(thread, run_id))["status"] == "success"
        joined = await sdk.runs.join(thread, run_id)
        assert joined["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
        done = await sdk.runs.wait(thread, "approval", command={"resume": "approve"})
        assert done["answer"] == "published the plan"
        assert "__interrupt__" not in await sdk.runs.join(thread, run_id)  # answered since
    finally:
        await sdk.aclose()


async def test_a_library_run_at_a_human_step_reads_success(
    server: LiveServer, store: TrajectorySaver
) -> None:
    """A run the library made (no row in the runs table: read back from its checkpoints) that
    stopped at a human step reads ``success``, its thread ``interrupted``."""
    task = Task(
        input="plan the offsite",
        swarm=apps.approval,
        id="lib-asks",
        # what a run records of itself (the server's runs stamp the same keys)
        metadata={"target": "tests.server.apps:approval", "run_id": "lib-run"},
    )
    paused = (await Runners.run_task(task, checkpointer=store))["lib-asks"]
    assert paused.status == "interrupted"  # the library's own word for a run that asks
    sdk = get_client(url=server.url, api_key=None)
    try:
        runs: list[dict[str, Any]] = await sdk.runs.list("lib-asks")
        assert [(r["run_id"], r["status"]) for r in runs] == [("lib-run", "success")]
        assert (await sdk.threads.get("lib-asks"))["status"] == "interrupted"
    finally:
        await sdk.aclose()


async def test_goto_end_alone_resolves_a_waiting_workflow(server: LiveServer) -> None:
    """A chat UI's "mark as resolved" (``command={"goto": "__end__"}``) on a workflow that
    waits for a person: the human step is dropped unanswered and the thread is idle, with
    every checkpoint kept; its next input is a new turn. ``goto`` to a node, or with a
    ``resume``, is still refused for a workflow."""
    sdk = get_client(url=server.url, api_key=None)
    try:
        thread = (await sdk.threads.create())["thread_id"]
        asked = await sdk.runs.wait(thread, "approval", input=PLAN)
        assert asked["__interrupt__"]
        before = len(await sdk.threads.get_history(thread, limit=100))
        done = await sdk.runs.wait(thread, "approval", command={"goto": "__end__"})
        assert "__interrupt__" not in done
        state = await sdk.threads.get_state(thread)
        assert (state["next"], state["interrupts"]) == ([], [])
        assert (await sdk.threads.get(thread))["status"] == "idle"
        assert len(await sdk.threads.get_history(thread, limit=100)) == before + 1
        runs = await sdk.runs.list(thread)
        assert [r["status"] for r in runs] == ["success", "success"]
        for command in ({"goto": "approval"}, {"goto": "__end__", "resume": "approve"}):
            refused = await sdk.http.client.post(
                f"/threads/{thread}/runs/wait",
                json={"assistant_id": "approval", "command": command},
            )
            assert refused.status_code == 422, refused.text
            assert "{'goto': '__end__'} alone" in refused.json()["message"]
        again = await sdk.runs.wait(thread, "approval", input={"input": "plan the party"})
        assert again["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
    finally:
        await sdk.aclose()
