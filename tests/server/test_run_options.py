"""The run options of ``runs.create``/``stream``/``wait``, ``runs.create_batch`` and the crons
that a server could take and silently drop, each driven through the real ``langgraph-sdk``
client: ``durability`` and its older name ``checkpoint_during`` (a LangGraph application's
steps saved as its ``astream`` takes it; a workflow saves each step and refuses ``exit``),
``strict_resume``, ``langsmith_tracing`` (read and checked; no LangSmith here),
``feedback_keys`` (a 422: LangSmith's), ``runs.list(select=…)``, and a field no run reads (a
422 naming it). docs/server.md, "Every SDK call", says each."""

# ruff: noqa: F811 (app_server's fixtures, imported here, are the tests' parameters)

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langgraph_sdk.errors import ConflictError, UnprocessableEntityError

from tests.server.app_server import app_sdk, app_server  # noqa: F401 (fixtures)

USER = {"messages": [{"role": "user", "content": "hi there"}]}


async def _steps(sdk: Any, **options: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The checkpoints a run of ``chat`` on a new thread saved, and the thread's values."""
    tid = (await sdk.threads.create())["thread_id"]
    values = await sdk.runs.wait(tid, "chat", input=USER, **options)
    return await sdk.threads.get_history(tid, limit=50), values


async def test_durability_is_a_langgraph_apps_as_astream_takes_it(app_sdk: Any) -> None:
    saved, values = await _steps(app_sdk)  # this server's own: sync, every step
    synced, _ = await _steps(app_sdk, durability="sync")
    in_turn, _ = await _steps(app_sdk, durability="async")
    at_exit, exit_values = await _steps(app_sdk, durability="exit")
    assert len(saved) == len(synced) == len(in_turn) >= 3  # the input, start, reply
    assert len(at_exit) == 1  # only where the run ended
    said = [m["content"] for m in values["messages"]]
    assert [m["content"] for m in exit_values["messages"]] == said
    assert [m["content"] for m in at_exit[0]["values"]["messages"]] == said
    assert not at_exit[0]["next"]


async def test_a_run_saved_at_exit_stops_at_a_person_and_resumes(app_sdk: Any) -> None:
    tid = (await app_sdk.threads.create())["thread_id"]
    asked = await app_sdk.runs.wait(tid, "review", input=USER, durability="exit")
    assert asked["__interrupt__"][0]["value"]["question"] == "Approve the draft?"
    assert len(await app_sdk.threads.get_history(tid)) == 1  # saved where it stopped
    done = await app_sdk.runs.wait(tid, "review", command={"resume": "ok"}, durability="exit")
    assert done["verdict"] == "ok"
    assert (await app_sdk.threads.get(tid))["status"] == "idle"
    run = (await app_sdk.runs.list(tid))[0]
    assert run["status"] == "success" and run["kwargs"]["durability"] == "exit"


async def test_checkpoint_during_false_is_durability_exit(app_sdk: Any) -> None:
    with warnings.catch_warnings():  # the SDK warns that checkpoint_during is deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        at_exit, _ = await _steps(app_sdk, checkpoint_during=False)
        during, _ = await _steps(app_sdk, checkpoint_during=True)
    assert len(at_exit) == 1
    assert len(during) >= 3
    tid = (await app_sdk.threads.create())["thread_id"]
    run = await app_sdk.runs.create(tid, "chat", input=USER, durability="exit")
    assert run["kwargs"]["durability"] == "exit"  # the run says how it saves
    await app_sdk.runs.join(tid, run["run_id"])
    run = await app_sdk.runs.create(tid, "chat", input=USER)
    assert run["kwargs"]["durability"] == "sync"  # this server's own
    await app_sdk.runs.join(tid, run["run_id"])


async def test_a_workflow_saves_each_step_and_refuses_durability_exit(app_sdk: Any) -> None:
    tid = (await app_sdk.threads.create())["thread_id"]
    with pytest.raises(UnprocessableEntityError, match="durability: durability='exit'"):
        await app_sdk.runs.create(tid, "counter", input=USER, durability="exit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(UnprocessableEntityError, match="checkpoint_during: checkpoint_"):
            await app_sdk.runs.create(tid, "counter", input=USER, checkpoint_during=False)
    assert await app_sdk.runs.list(tid) == []  # nothing started
    run = await app_sdk.runs.create(tid, "counter", input=USER, durability="async")
    assert run["kwargs"]["durability"] == "sync"  # saved before the next step: sooner
    await app_sdk.runs.join(tid, run["run_id"])
    assert (await app_sdk.runs.get(tid, run["run_id"]))["status"] == "success"
    with pytest.raises(UnprocessableEntityError, match="durability"):
        await app_sdk.runs.create(tid, "counter", input=USER, durability="later")  # type: ignore[arg-type]


async def test_strict_resume_refuses_an_answer_to_an_interrupt_not_waiting(app_sdk: Any) -> None:
    tid = (await app_sdk.threads.create())["thread_id"]
    await app_sdk.runs.wait(tid, "review", input=USER)
    waiting = (await app_sdk.threads.get_state(tid))["interrupts"]
    assert len(waiting) == 1
    stale = "0" * 32
    with pytest.raises(ConflictError, match=f"strict_resume: interrupt {stale} is not waiting"):
        await app_sdk.runs.create(
            tid, "review", command={"resume": {stale: "yes"}}, strict_resume=True
        )
    with pytest.raises(ConflictError, match="names no interrupt"):
        await app_sdk.runs.create(tid, "review", command={"resume": {}}, strict_resume=True)
    assert (await app_sdk.threads.get_state(tid))["interrupts"] == waiting  # as it was
    done = await app_sdk.runs.wait(
        tid, "review", command={"resume": {waiting[0]["id"]: "yes"}}, strict_resume=True
    )
    assert done["verdict"] == "yes"
    with pytest.raises(ConflictError, match="nothing to resume"):  # strict or not
        await app_sdk.runs.create(tid, "review", command={"resume": "again"}, strict_resume=True)


async def test_langsmith_tracing_is_read_and_checked(app_sdk: Any) -> None:
    tracing = {"project_name": "mine", "example_id": "e-1"}
    values = await app_sdk.runs.wait(None, "chat", input=USER, langsmith_tracing=tracing)
    assert values["messages"][-1]["content"]
    with pytest.raises(UnprocessableEntityError, match="langsmith_tracer: Extra inputs"):
        await app_sdk.runs.create(None, "chat", input=USER, langsmith_tracing={"project": "p"})


async def test_feedback_keys_are_a_422_naming_them(app_sdk: Any) -> None:
    tid = (await app_sdk.threads.create())["thread_id"]
    with pytest.raises(UnprocessableEntityError, match="feedback_keys: feedback URLs"):
        async for _ in app_sdk.runs.stream(tid, "chat", input=USER, feedback_keys=["helpful"]):
            pass
    assert await app_sdk.runs.list(tid) == []


async def test_a_run_field_no_run_reads_is_a_422_naming_it(app_sdk: Any) -> None:
    tid = (await app_sdk.threads.create())["thread_id"]
    body = {"assistant_id": "chat", "input": USER, "stream_modes": ["values"]}
    for path in (f"/threads/{tid}/runs", f"/threads/{tid}/runs/wait", "/runs/wait"):
        with pytest.raises(UnprocessableEntityError, match="stream_modes: Extra inputs"):
            await app_sdk.http.post(path, json=body)
    with pytest.raises(UnprocessableEntityError, match=r"run \[1\]: reason: Extra inputs"):
        await app_sdk.runs.create_batch(
            [{"assistant_id": "chat", "input": USER}, {"assistant_id": "chat", "reason": 1}]
        )
    assert await app_sdk.runs.list(tid) == []
    assert await app_sdk.threads.count() == 1  # no run made a thread
    # the JavaScript SDK's createBatch sends assistantId beside assistant_id
    js = {"assistantId": "chat", "assistant_id": "chat", "input": USER}
    made = await app_sdk.http.post("/runs/batch", json=[js])
    assert made[0]["assistant_id"] == "chat"


async def test_runs_list_select_returns_only_those_fields(app_sdk: Any) -> None:
    tid = (await app_sdk.threads.create())["thread_id"]
    await app_sdk.runs.wait(tid, "chat", input=USER)
    run = (await app_sdk.runs.list(tid))[0]
    assert {"run_id", "status", "kwargs", "created_at"} <= set(run)
    picked = await app_sdk.runs.list(tid, select=["run_id", "status"])
    assert picked == [{"run_id": run["run_id"], "status": "success"}]
    with pytest.raises(UnprocessableEntityError, match="select: 'values' is not a field"):
        await app_sdk.runs.list(tid, select=["run_id", "values"])  # type: ignore[list-item]


async def test_a_crons_durability_is_checked_when_it_is_made(app_sdk: Any) -> None:
    with pytest.raises(UnprocessableEntityError, match="durability: durability='exit'"):
        await app_sdk.crons.create("counter", schedule="0 0 * * *", input=USER, durability="exit")
    with pytest.raises(UnprocessableEntityError, match="strict_resum: Extra inputs"):
        await app_sdk.http.post(
            "/runs/crons",
            json={"assistant_id": "chat", "schedule": "0 0 * * *", "strict_resum": True},
        )
    assert await app_sdk.crons.count() == 0
    cron = await app_sdk.crons.create("chat", schedule="0 0 * * *", input=USER, durability="exit")
    assert cron["payload"]["durability"] == "exit"
    changed = await app_sdk.crons.update(cron["cron_id"], durability="async")
    assert changed["payload"]["durability"] == "async"
    other = await app_sdk.crons.create("counter", schedule="0 0 * * *", input=USER)
    with pytest.raises(UnprocessableEntityError, match="durability='exit'"):
        await app_sdk.crons.update(other["cron_id"], durability="exit")
    with pytest.raises(UnprocessableEntityError, match="tags: Extra inputs"):
        await app_sdk.http.patch(f"/runs/crons/{cron['cron_id']}", json={"tags": ["a"]})
    with pytest.raises(UnprocessableEntityError, match="a cron's assistant does not change"):
        await app_sdk.http.patch(f"/runs/crons/{other['cron_id']}", json={"assistant_id": "chat"})
    same = {"assistant_id": "counter", "enabled": False}  # its own: read as it is
    assert (await app_sdk.http.patch(f"/runs/crons/{other['cron_id']}", json=same))[
        "enabled"
    ] is False
