"""The same promises on both back ends: SQLite files and PostgreSQL (a real throw-away
server): retention, many processes, a killed writer, one writer per thread, crafted rows,
secrets, and the trajectory view."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_POS_ARGS

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.errors import ThreadBusy, UnsafeCheckpointValue

from .conftest import ask, chat_graph, execute

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _contents(saver: TrajectorySaver, thread: str) -> list[str]:
    tup = saver.get_tuple({"configurable": {"thread_id": thread}})
    assert tup is not None
    return [m["content"] for m in tup.checkpoint["channel_values"]["messages"]]


def test_deltas_retention_and_copies_read_back_whole(target: str) -> None:
    with TrajectorySaver(target) as saver:
        app = chat_graph(saver)
        for turn in range(70):  # past one full snapshot of the message list
            app.invoke(
                {"messages": [{"role": "user", "content": f"q{turn}"}], "turn": 0},
                {"configurable": {"thread_id": "a"}, "metadata": {"run_id": f"run-{turn}"}},
            )
        assert execute(target, "SELECT count(*) FROM checkpoint_blobs WHERE kind = 2")[0][0] > 60
        want = _contents(saver, "a")
        assert len(want) == 140
        saver.copy_thread("a", "b")
        assert _contents(saver, "b") == want
        assert saver.prune_keep_last(5, ["a"]) == 3 * 70 - 5
        assert _contents(saver, "a") == want  # its delta bases were kept
        assert len(list(saver.list({"configurable": {"thread_id": "a"}}))) == 5
        run_ids = {
            t.metadata.get("run_id") for t in saver.list({"configurable": {"thread_id": "b"}})
        }
        last = next(iter(saver.list({"configurable": {"thread_id": "b"}}))).metadata["run_id"]
        saver.delete_for_runs(sorted(r for r in run_ids if r and r != last))
        assert _contents(saver, "b") == want
        saver.delete_thread("a")
        assert saver.get_tuple({"configurable": {"thread_id": "a"}}) is None
        assert execute(target, "SELECT count(*) FROM checkpoint_blobs WHERE thread_id = 'a'") == [
            (0,)
        ]
        ask(app, "b", "after pruning")
        assert _contents(saver, "b")[-2:] == ["after pruning", "answer #141"]
        saver.vacuum()


WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from tests.checkpoint.conftest import chat_graph
    from aworld_graph.checkpoint import TrajectorySaver

    target, worker, threads, turns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    async def chat(app, thread_id):
        for turn in range(turns):
            await app.ainvoke(
                {"messages": [{"role": "user", "content": f"{thread_id} q{turn}"}], "turn": 0},
                {"configurable": {"thread_id": thread_id}},
            )

    async def main():
        async with TrajectorySaver(target) as saver:
            app = chat_graph(saver)
            await asyncio.gather(*(chat(app, f"w{worker}-t{i}") for i in range(threads)))
            for turn in range(turns):  # and every worker writes on one shared checkpoint
                await saver.aput_writes(
                    {"configurable": {"thread_id": "shared", "checkpoint_ns": "",
                                      "checkpoint_id": "root"}},
                    [("log", f"{worker}-{turn}")], f"task-{worker}-{turn}",
                )

    asyncio.run(main())
    """
)


@pytest.mark.slow
def test_four_processes_and_many_runs_lose_nothing(target: str) -> None:
    TrajectorySaver(target).get_tuple({"configurable": {"thread_id": "warm"}})  # schema made
    workers, threads, turns = 4, 6, 4
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, target, str(w), str(threads), str(turns)],
            cwd=REPO,
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for w in range(workers)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err.decode()[-3000:]
        assert b"locked" not in err and b"deadlock" not in err
    with TrajectorySaver(target) as saver:
        for w in range(workers):
            for i in range(threads):
                thread = f"w{w}-t{i}"
                assert _contents(saver, thread)[::2] == [f"{thread} q{t}" for t in range(turns)]
                assert len(list(saver.list({"configurable": {"thread_id": thread}}))) == 3 * turns
    rows = execute(target, "SELECT count(*) FROM checkpoint_writes WHERE thread_id = 'shared'")
    assert rows == [(workers * turns,)]


KILLED = textwrap.dedent(
    """
    import sys
    from tests.checkpoint.conftest import ask, chat_graph
    from aworld_graph.checkpoint import TrajectorySaver

    app = chat_graph(TrajectorySaver(sys.argv[1]))
    for turn in range(100000):
        ask(app, "victim", f"q{turn}")
        if turn == 20:
            print("ready", flush=True)
    """
)


@pytest.mark.slow
def test_a_writer_killed_mid_run_leaves_every_commit_readable_and_the_thread_goes_on(
    target: str,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, target], cwd=REPO, env=ENV, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    with proc.stdout:
        assert proc.stdout.readline().strip() == b"ready"
        proc.kill()  # SIGKILL, mid-write
        proc.wait(timeout=30)
    if not target.startswith("postgresql://"):
        assert execute(target, "PRAGMA integrity_check") == [("ok",)]
    with TrajectorySaver(target) as saver:
        history = list(saver.list({"configurable": {"thread_id": "victim"}}))
        assert len(history) >= 3 * 21
        for tup in history:  # every committed checkpoint reads back whole
            messages = tup.checkpoint["channel_values"].get("messages", [])
            assert all(m["content"] for m in messages)
        before = len(_contents(saver, "victim"))
        state = ask(chat_graph(saver), "victim", "after the crash")
        assert len(state["messages"]) >= before + 2


HOLDER = textwrap.dedent(
    """
    import sys, time
    from aworld_graph.checkpoint import TrajectorySaver

    saver = TrajectorySaver(sys.argv[1])
    with saver.hold("busy"):
        print("held", flush=True)
        time.sleep(600)
    """
)


def test_one_writer_per_thread(target: str) -> None:
    first, second = TrajectorySaver(target), TrajectorySaver(target)
    with first.hold("t"):
        app = chat_graph(first)
        ask(app, "t", "mine")
        with pytest.raises(ThreadBusy, match=r"thread 't' is being run by .*pid") as err:
            ask(chat_graph(second), "t", "a second run at the same time")
        assert err.value.thread_id == "t" and str(os.getpid()) in str(err.value)
        with pytest.raises(ThreadBusy):
            with second.hold("t"):
                pass
        with pytest.raises(ThreadBusy, match="already being run by this process"):
            with first.hold("t"):
                pass
        ask(chat_graph(second), "other", "other threads are free")
    ask(chat_graph(second), "t", "after the first run let go")
    assert _contents(second, "t")[::2] == ["mine", "after the first run let go"]
    # a holder SIGKILLed on this host blocks nobody
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, target], cwd=REPO, env=ENV, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    with proc.stdout:
        assert proc.stdout.readline().strip() == b"held"
        with pytest.raises(ThreadBusy):
            ask(chat_graph(second), "busy", "while it lives")
        proc.kill()
        proc.wait(timeout=30)
    ask(chat_graph(second), "busy", "after it died")
    # a lease that expired blocks nobody either
    execute(
        target,
        "UPDATE checkpoint_leases SET host = 'elsewhere', expires_at = ?",
        (time.time() - 1,),
    )
    with second.hold("busy"):
        pass
    first.close()
    second.close()


def _constructor(module: str, name: str, *args: Any) -> bytes:
    payload = ormsgpack.packb([module, name, list(args)])
    return ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, payload))


@pytest.mark.parametrize(
    ("module", "name"),
    [("os", "system"), ("subprocess", "Popen"), ("builtins", "eval")],
)
def test_crafted_rows_are_refused_never_run(
    target: str, tmp_path: Path, module: str, name: str
) -> None:
    marker = tmp_path / "ran"
    with TrajectorySaver(target) as saver:
        ask(chat_graph(saver), "t", "hi")
        head = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert head is not None
        cid = head.config["configurable"]["checkpoint_id"]
        version = str(head.checkpoint["channel_versions"]["messages"])
        execute(  # the latest value row of the chat, made a whole value naming a callable
            target,
            "UPDATE checkpoint_blobs SET kind = 1, type = 'msgpack', value = ? "
            "WHERE thread_id = 't' AND channel = 'messages' AND version = ?",
            (_constructor(module, name, f"touch {marker}"), version),
        )
        with pytest.raises(
            UnsafeCheckpointValue, match=rf"thread 't', checkpoint {cid}.*{module}\.{name}"
        ):
            saver.get_tuple({"configurable": {"thread_id": "t"}})
        execute(
            target,
            "UPDATE checkpoint_blobs SET type = 'pickle' WHERE thread_id = 't' "
            "AND channel = 'messages' AND version = ?",
            (version,),
        )
        with pytest.raises(UnsafeCheckpointValue, match="pickle"):
            saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert not marker.exists()


SECRETS = ["sk-live-0123456789abcdefABCDEF", "Bearer abcdefghijklmnop0123", "hunter2-SECRET"]


def _stored_text(target: str, request: pytest.FixtureRequest) -> bytes:
    if target.startswith("postgresql://"):
        server = request.getfixturevalue("postgres_server")
        return str(server.dump(target.rsplit("/", 1)[1])).encode()
    path = Path(target)
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def test_secrets_never_reach_the_store(target: str, request: pytest.FixtureRequest) -> None:
    with TrajectorySaver(target) as saver:
        app = chat_graph(saver)
        config = {
            "configurable": {"thread_id": "s", "api_key": SECRETS[0], "note": SECRETS[1]},
            "metadata": {"db_password": SECRETS[2], "team": "blue"},
        }
        app.invoke({"messages": [{"role": "user", "content": "hi"}], "turn": 0}, config)
        saver.put_writes(
            next(iter(saver.list({"configurable": {"thread_id": "s"}}))).config,
            [("__error__", f"401 Incorrect API key provided: {SECRETS[1]}")],
            "failed-task",
        )
        head = saver.get_tuple({"configurable": {"thread_id": "s"}})
        assert head is not None and head.metadata["team"] == "blue"
    raw = _stored_text(target, request)
    assert b"blue" in raw
    for secret in SECRETS:
        assert secret.encode() not in raw, secret


def test_a_failed_step_is_a_row_of_the_trajectory_view(target: str) -> None:
    """The error of a node is a row a SQL user finds (``source = 'error'``), after the
    checkpoint the step started from; the run can go on from there."""
    with TrajectorySaver(target) as saver:
        app = chat_graph(saver)
        ask(app, "t", "fine")
        config = next(iter(saver.list({"configurable": {"thread_id": "t"}}))).config
        saver.put_writes(
            config, [("__error__", "ValueError('boom')")], "task", "~__pregel_pull, reply"
        )
        rows = execute(
            target,
            "SELECT parent_checkpoint_id, nodes, error FROM trajectory WHERE source = 'error'",
        )
        assert len(rows) == 1 and rows[0][0] == config["configurable"]["checkpoint_id"]
        assert rows[0][2] == "ValueError('boom')" and "reply" in str(rows[0][1])
        last = saver.transitions("t")[-1]
        assert last.source == "error" and last.checkpoint_id is None and last.nodes == ["reply"]


def test_thread_of_names_the_thread_holding_a_checkpoint(target: str) -> None:
    """``thread_of`` finds a checkpoint's thread by its id alone (what ``fork CHECKPOINT``
    needs); an id no thread holds is ``None``; a copy keeps the ids, the first thread by
    name is given."""
    with TrajectorySaver(target) as saver:
        app = chat_graph(saver)
        ask(app, "b", "one")
        ask(app, "c", "two")
        for thread in ("b", "c"):
            for tup in saver.list({"configurable": {"thread_id": thread}}):
                assert saver.thread_of(tup.config["configurable"]["checkpoint_id"]) == thread
        assert saver.thread_of("no-such-checkpoint") is None
        saver.copy_thread("b", "a")
        latest = saver.get_tuple({"configurable": {"thread_id": "b"}})
        assert latest is not None
        assert saver.thread_of(latest.config["configurable"]["checkpoint_id"]) == "a"


def test_runners_answer_a_busy_thread_with_a_failed_response(target: str) -> None:
    from aworld_graph import Agent, Runners
    from aworld_graph.testing import FunctionModel

    agent = Agent(name="helper", model=FunctionModel(lambda messages, tools: "hello"))
    other = TrajectorySaver(target)
    with TrajectorySaver(target) as saver, other.hold("job-1"):
        busy = Runners.sync_run(input="hi", agent=agent, task_id="job-1", checkpointer=saver)
        assert busy.success is False and busy.status == "busy"
        assert busy.msg is not None and "thread 'job-1' is being run by" in busy.msg
        assert saver.get_tuple({"configurable": {"thread_id": "job-1"}}) is None
    with TrajectorySaver(target) as saver:
        done = Runners.sync_run(input="hi", agent=agent, task_id="job-1", checkpointer=saver)
        assert done.success and done.answer == "hello"
    other.close()


def test_the_cli_reads_and_prunes_either_store(target: str) -> None:
    from click.testing import CliRunner

    from aworld_graph.cli import main

    with TrajectorySaver(target) as saver:
        app = chat_graph(saver)
        for turn in range(3):
            ask(app, "cli-thread", f"q{turn}")
    runner = CliRunner()
    threads = runner.invoke(main, ["threads", "--db", target])
    assert threads.exit_code == 0 and "cli-thread" in threads.output, threads.output
    history = runner.invoke(main, ["history", "cli-thread", "--db", target])
    assert history.exit_code == 0 and "reply" in history.output, history.output
    pruned = runner.invoke(main, ["prune", "cli-thread", "--keep", "2", "--db", target])
    assert pruned.exit_code == 0 and "deleted 7 checkpoints" in pruned.output, pruned.output
    assert runner.invoke(main, ["vacuum", "--db", target]).exit_code == 0
    assert runner.invoke(main, ["migrate", target]).output.strip().endswith("already at schema 4")


async def test_many_savers_opening_a_new_store_at_once(target: str) -> None:
    """The first use of a new store by many coroutines and savers at once creates its
    tables once (PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe to race)."""
    import asyncio

    savers = [TrajectorySaver(target) for _ in range(4)]
    try:

        async def chat(saver: TrajectorySaver, i: int) -> None:
            await chat_graph(saver).ainvoke(
                {"messages": [{"role": "user", "content": f"q{i}"}], "turn": 0},
                {"configurable": {"thread_id": f"first-{i}"}},
            )

        await asyncio.gather(*(chat(savers[i % 4], i) for i in range(16)))
        assert len(savers[0].threads()) == 16
    finally:
        for saver in savers:
            saver.close()


def test_a_send_task_named_through_a_delta_of_the_task_list(target: str) -> None:
    """A Send task's node comes from its packet in the checkpoint's task list, also when
    that list is stored as a delta of the one before."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.types import Send

    with TrajectorySaver(target) as saver:
        config: Any = {"configurable": {"thread_id": "sends", "checkpoint_ns": ""}}
        tasks: list[Any] = []
        version: str | None = None
        for node in ("a", "b"):
            tasks = [*tasks, Send(node, len(tasks))]
            checkpoint = empty_checkpoint()
            version = saver.get_next_version(version, None)
            checkpoint["channel_versions"] = {"__pregel_tasks": version}
            checkpoint["channel_values"] = {"__pregel_tasks": tasks}
            config = saver.put(
                config, checkpoint, {"step": len(tasks)}, {"__pregel_tasks": version}
            )
        kinds = execute(
            target,
            "SELECT kind FROM checkpoint_blobs WHERE channel = '__pregel_tasks' ORDER BY version",
        )
        assert [k for (k,) in kinds] == [1, 2]  # the second list is a delta
        saver.put_writes(config, [("out", 1)], "task-b", "~__pregel_push, 1, False")
        saver.put_writes(config, [("out", 0)], "task-a", "~__pregel_push, 0, False")
        nodes = execute(target, "SELECT task_id, node FROM checkpoint_writes ORDER BY task_id")
        assert nodes == [("task-a", "a"), ("task-b", "b")]


def test_metadata_filters_match_the_same_on_both_back_ends(target: str) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    metadata: list[dict[str, Any]] = [
        {"tags": ["a", "b"], "n": 1, "who": {"name": "ada", "team": "x"}, "gone": None},
        {"tags": ["a"], "n": 2, "who": {"name": "ada"}},
    ]
    with TrajectorySaver(target) as saver:
        for i, meta in enumerate(metadata):
            saver.put(
                {"configurable": {"thread_id": f"m{i}", "checkpoint_ns": ""}},
                empty_checkpoint(),
                meta,
                {},
            )

        def found(**flt: Any) -> list[str]:
            return sorted(
                t.config["configurable"]["thread_id"] for t in saver.list(None, filter=flt)
            )

        assert found(tags=["a"]) == ["m1"]  # exact, not containment
        assert found(who={"name": "ada"}) == ["m1"]
        assert found(n=1) == ["m0"] and found(n=1.0) == ["m0"]
        assert found(gone=None) == ["m0", "m1"]  # null, or no such key
        assert found(n=1, tags=["a", "b"]) == ["m0"]


async def test_runs_of_one_thread_in_one_process_queue(target: str) -> None:
    """Two concurrent ``Runners.run`` of one task id with one saver: the second waits for
    the first and reads its finished run back (another process would get ThreadBusy)."""
    import asyncio

    from aworld_graph import Agent, Runners
    from aworld_graph.testing import FunctionModel

    calls: list[int] = []

    async def slow(messages: Any, tools: Any) -> str:
        calls.append(1)
        await asyncio.sleep(0.2)
        return "done"

    agent = Agent(name="solo", model=FunctionModel(slow))
    with TrajectorySaver(target) as saver:
        first, second = await asyncio.gather(
            Runners.run(input="go", agent=agent, task_id="same", checkpointer=saver),
            Runners.run(input="go", agent=agent, task_id="same", checkpointer=saver),
        )
        assert first.answer == second.answer == "done" and first.success and second.success
        assert len(calls) == 1
        # more queued runs than the default executor has threads (6 on 2 cores): those that
        # waited in a thread each took them all, and the running one could read nothing
        many = await asyncio.wait_for(
            asyncio.gather(
                *(
                    Runners.run(input="go", agent=agent, task_id="many", checkpointer=saver)
                    for _ in range(12)
                )
            ),
            60,
        )
        assert all(r.success for r in many) and len(calls) == 2
