"""Any LangGraph application served as LangGraph's server serves it, through the real
``langgraph-sdk`` client and ``RemoteGraph``: a plain ``StateGraph`` with a messages reducer
(values, updates, messages and custom streams; its own state schema), an interrupt answered
with ``Command(resume=...)``, a graph factory called with the run's config, a subgraph, a
``langgraph.json`` project (graphs, env, dependencies) served by ``aworld-graph serve``, the
server's store given to a graph's nodes (the items of the store API), and bad projects refused with one line naming the file, the field and the fix.

Where LangGraph's semantics are the graph's own (its values after a run, an interrupt, a
resume, a state edit), each is compared with the same graph run in this process on LangGraph's
own ``InMemorySaver``.
"""

# ruff: noqa: F811 (app_server's fixtures, imported here, are the tests' parameters)

from __future__ import annotations

import asyncio
import json
import operator
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
from click.testing import CliRunner
from langchain_core.messages import messages_from_dict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.pregel import Pregel
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk import get_client, get_sync_client
from typing_extensions import TypedDict

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.cli import main
from aworld_graph.run import LangGraphApp
from aworld_graph.server import Assistant, create_app, load_graph, read_project, source_of
from tests.server import langgraph_apps as apps
from tests.server.app_server import ServeProcess, app_sdk, app_server  # noqa: F401 (fixtures)
from tests.server.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]
USER = {"messages": [{"role": "user", "content": "hi there"}]}


def _local(graph: Any) -> Any:
    """The same graph on LangGraph's own in-memory checkpointer: what LangGraph does."""
    return graph.copy(update={"checkpointer": InMemorySaver()})


def _plain(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(m["type"], m["content"]) for m in messages]


async def test_a_state_graph_streams_its_own_state_messages_and_writes(
    app_sdk: Any, store: TrajectorySaver
) -> None:
    thread = (await app_sdk.threads.create())["thread_id"]
    modes = ["values", "updates", "messages-tuple", "custom"]
    parts = [p async for p in app_sdk.runs.stream(thread, "chat", input=USER, stream_mode=modes)]
    events = [p.event for p in parts]
    assert events[0] == "metadata" and "error" not in events
    values = [p.data for p in parts if p.event == "values"]
    assert _plain(values[0]["messages"]) == [("human", "hi there")]  # as LangGraph: after input
    assert values[-1]["turns"] == 1 and set(values[-1]) == {"messages", "turns"}  # its own state
    assert _plain(values[-1]["messages"]) == [("human", "hi there"), ("ai", "you said: hi there")]
    tokens = [p.data for p in parts if p.event == "messages"]
    assert "".join(chunk["content"] for chunk, _ in tokens) == "you said: hi there"
    assert {chunk["type"] for chunk, _ in tokens} == {"AIMessageChunk"}
    assert {meta["langgraph_node"] for _, meta in tokens} == {"reply"}
    assert [p.data for p in parts if p.event == "custom"] == [{"progress": "replying"}]
    assert [list(p.data) for p in parts if p.event == "updates"] == [["reply"]]

    # the thread is the graph's own state, in the server's store (not the graph's own saver)
    state = await app_sdk.threads.get_state(thread)
    assert state["values"]["turns"] == 1 and state["next"] == []
    assert messages_from_dict(
        [{"type": m["type"], "data": m} for m in state["values"]["messages"]]
    )[1].content == ("you said: hi there")
    assert thread in {t.thread_id for t in store.threads()}
    assert list(apps.chat.checkpointer.list(None)) == []  # type: ignore[union-attr]
    # a second turn goes on from the thread, as the graph's reducer says
    again = await app_sdk.runs.wait(
        thread, "chat", input={"messages": [{"role": "user", "content": "again"}]}
    )
    local = _local(apps.chat)
    conf = {"configurable": {"thread_id": "t"}}
    local.invoke(USER, conf)
    expected = local.invoke({"messages": [{"role": "user", "content": "again"}]}, conf)
    assert again["turns"] == expected["turns"] == 2
    assert _plain(again["messages"]) == [(m.type, m.content) for m in expected["messages"]]
    history = await app_sdk.threads.get_history(thread, limit=20)
    assert [h["metadata"]["step"] for h in history][:3] == [4, 3, 2]
    assert all(h["metadata"]["graph_id"] == "chat" for h in history)
    thread_row = await app_sdk.threads.get(thread)
    assert thread_row["status"] == "idle" and thread_row["metadata"]["assistant_id"] == "chat"


async def test_the_messages_mode_sends_metadata_then_the_message_so_far(app_sdk: Any) -> None:
    parts = [p async for p in app_sdk.runs.stream(None, "chat", input=USER, stream_mode="messages")]
    events = [p.event for p in parts if p.event != "metadata"]
    assert events[0] == "messages/metadata" and set(events[1:]) == {"messages/partial"}
    growing = [p.data[0]["content"] for p in parts if p.event == "messages/partial"]
    assert growing[-1] == "you said: hi there" and growing == sorted(growing, key=len)


async def test_an_interrupt_waits_and_a_resume_goes_on_as_in_langgraph(app_sdk: Any) -> None:
    thread = (await app_sdk.threads.create())["thread_id"]
    asked = await app_sdk.runs.wait(thread, "review", input=USER)
    local = _local(apps.review_graph)
    conf = {"configurable": {"thread_id": "t"}}
    expected = local.invoke(USER, conf)
    assert asked["draft"] == expected["draft"] == "draft of hi there"
    assert [i["value"] for i in asked["__interrupt__"]] == [
        i.value for i in expected["__interrupt__"]
    ]
    state = await app_sdk.threads.get_state(thread)
    assert state["next"] == ["review"] and state["interrupts"][0]["value"]["draft"]
    assert (await app_sdk.threads.get(thread))["status"] == "interrupted"
    done = await app_sdk.runs.wait(thread, "review", command={"resume": "approved"})
    finished = local.invoke(Command(resume="approved"), conf)
    assert done["verdict"] == finished["verdict"] == "approved"
    assert _plain(done["messages"])[-1] == ("ai", "verdict: approved")
    assert (await app_sdk.threads.get(thread))["status"] == "idle"


async def test_a_factory_is_called_with_the_runs_config(app_sdk: Any) -> None:
    default = await app_sdk.runs.wait(None, "greeter", input=USER)
    assert default["messages"][-1]["content"] == "hello, hi there"
    config = {"configurable": {"greeting": "ahoy"}}
    told = await app_sdk.runs.wait(None, "greeter", input=USER, config=config)
    assert told["messages"][-1]["content"] == "ahoy, hi there"


async def test_schemas_graph_and_subgraphs_are_the_graphs_own(app_sdk: Any) -> None:
    schemas = await app_sdk.assistants.get_schemas("chat")
    assert set(schemas["input_schema"]["properties"]) == {"messages", "turns"}
    assert set(schemas["state_schema"]["properties"]) == {"messages", "turns"}
    assert schemas["graph_id"] == "chat"
    context = (await app_sdk.assistants.get_schemas("persona"))["context_schema"]
    assert context["properties"]["tone"]["default"] == "plain"
    graph = await app_sdk.assistants.get_graph("review")
    assert {n["id"] for n in graph["nodes"]} == {"__start__", "draft", "review", "__end__"}
    assert all("id" not in (n.get("data") or {}) for n in graph["nodes"])
    subgraphs = await app_sdk.assistants.get_subgraphs("nested")
    assert list(subgraphs) == ["inner"]
    assert set(subgraphs["inner"]["state_schema"]["properties"]) == {"messages", "turns"}
    assert await app_sdk.assistants.get_subgraphs("chat") == {}
    described = await app_sdk.assistants.get("chat")
    assert described["metadata"]["kind"] == "langgraph"
    assert described["metadata"]["created_by"] == "system"


async def test_context_reaches_the_graphs_runtime(app_sdk: Any) -> None:
    said = await app_sdk.runs.wait(None, "persona", input=USER, context={"tone": "gruff"})
    assert said["messages"][-1]["content"] == "[gruff] hi there"
    plain = await app_sdk.runs.wait(None, "persona", input=USER)
    assert plain["messages"][-1]["content"] == "[plain] hi there"


async def test_a_state_edit_is_langgraphs_own(app_sdk: Any) -> None:
    thread = (await app_sdk.threads.create())["thread_id"]
    await app_sdk.runs.wait(thread, "chat", input=USER)
    await app_sdk.threads.update_state(thread, {"turns": 10})
    state = await app_sdk.threads.get_state(thread)
    local = _local(apps.chat)
    conf = {"configurable": {"thread_id": "t"}}
    local.invoke(USER, conf)
    local.update_state(conf, {"turns": 10})
    assert state["values"]["turns"] == local.get_state(conf).values["turns"] == 10
    assert state["metadata"]["source"] == "update"
    after = await app_sdk.runs.wait(
        thread, "chat", input={"messages": [{"role": "user", "content": "x"}]}
    )
    assert after["turns"] == 11


def test_remote_graph_invokes_streams_interrupts_and_reads_state(app_server: LiveServer) -> None:
    sync_client = get_sync_client(url=app_server.url, api_key=None)
    try:
        _remote_graph(sync_client)
    finally:
        sync_client.close()


def _remote_graph(sync_client: Any) -> None:
    remote = RemoteGraph("review", sync_client=sync_client)
    local = _local(apps.review_graph)
    conf = {"configurable": {"thread_id": "remote-1"}}
    asked = remote.invoke(USER, conf)
    expected = local.invoke(USER, conf)
    assert asked["draft"] == expected["draft"]
    assert [i["value"] for i in asked["__interrupt__"]] == [
        i.value for i in expected["__interrupt__"]
    ]
    snapshot = remote.get_state(conf)
    assert snapshot.next == ("review",) and snapshot.values["draft"] == "draft of hi there"
    done = remote.invoke(Command(resume="fine"), conf)
    assert done["verdict"] == local.invoke(Command(resume="fine"), conf)["verdict"] == "fine"
    history = list(remote.get_state_history(conf))
    assert history[0].values["verdict"] == "fine" and len(history) >= 4

    chat = RemoteGraph("chat", sync_client=sync_client)
    chat_conf = {"configurable": {"thread_id": "remote-2"}}
    parts = chat.stream(USER, chat_conf, stream_mode=["updates", "messages"])
    streamed = [(part[0], part[1]) for part in parts]
    assert {mode for mode, _ in streamed} == {"updates", "messages"}
    text = "".join(m[0]["content"] for mode, m in streamed if mode == "messages")
    assert text == "you said: hi there"
    chat.update_state(chat_conf, {"turns": 5})
    assert chat.get_state(chat_conf).values["turns"] == 5


# -- langgraph.json ------------------------------------------------------------------------

GRAPH_FILE = """
from typing import Annotated
import os

from typing_extensions import TypedDict
from langchain_core.messages import AIMessage
from langgraph.graph import StateGraph, START, END
from langgraph.graph.message import add_messages

from helpers import shout  # from the project's "dependencies"


class State(TypedDict):
    messages: Annotated[list, add_messages]


def answer(state: State) -> dict:
    said = state["messages"][-1].content
    return {"messages": [AIMessage(content=shout(said) + os.environ["GREETING_SUFFIX"])]}


builder = StateGraph(State)
builder.add_node("answer", answer)
builder.add_edge(START, "answer")
builder.add_edge("answer", END)
graph = builder.compile()
"""


def _project(root: Path, env: Any = ".env", graphs: Any = None) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "lib").mkdir(exist_ok=True)
    (root / "src" / "agent.py").write_text(GRAPH_FILE)
    (root / "lib" / "helpers.py").write_text("def shout(text):\n    return text.upper()\n")
    (root / ".env").write_text(
        "# the project's settings\nGREETING_SUFFIX='!!'\nexport SERVICE_API_KEY=sk-test-1234567890abcdef\n"
    )
    config = {
        "graphs": graphs or {"agent": "./src/agent.py:graph"},
        "env": env,
        "dependencies": ["./lib"],
    }
    path = root / "langgraph.json"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize("how", ["--config", "in its folder"])
async def test_a_langgraph_json_project_is_served_with_env_and_dependencies(
    tmp_path: Path, how: str
) -> None:
    config = _project(tmp_path / "project")
    args = ["--config", str(config)] if how == "--config" else []
    cwd = config.parent if args == [] else tmp_path
    served = ServeProcess(args, cwd=cwd, db=cwd / "served.db", env={"GREETING_SUFFIX": None})
    try:
        client = get_client(url=served.url, api_key=None)
        try:
            found = await client.assistants.search()
            assert [a["graph_id"] for a in found] == ["agent"]
            done = await client.runs.wait(None, "agent", input=USER)
            assert done["messages"][-1]["content"] == "HI THERE!!"  # helpers.shout + .env
            schemas = await client.assistants.get_schemas("agent")
            assert set(schemas["state_schema"]["properties"]) == {"messages"}
            every = json.dumps(found) + json.dumps(schemas)
            assert "sk-test-1234567890abcdef" not in every
        finally:
            await client.aclose()
    finally:
        output = served.stop()
    assert "serving agent from" in output and "env: 2 variables set" in output
    assert "sk-test" not in output and "!!" not in output  # values are never echoed


def test_a_project_env_may_be_an_object_and_paths_are_relative_to_the_file(
    tmp_path: Path,
) -> None:
    config = _project(tmp_path, env={"GREETING_SUFFIX": "?", "DEBUG": True})
    project = read_project(config)
    assert project.env == {"GREETING_SUFFIX": "?", "DEBUG": "true"}
    assert project.dependencies == [(tmp_path / "lib").resolve()]
    assert project.graphs == {"agent": "./src/agent.py:graph"}
    assert read_project(tmp_path).path == config.resolve()  # a folder: its langgraph.json


def _refused(args: list[str], monkeypatch: pytest.MonkeyPatch, cwd: Path) -> str:
    """The CLI's one error line for ``serve ARGS`` (it never starts a server)."""
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", list(sys.path))  # what a project adds goes with the test
    for name in ("GREETING_SUFFIX", "SERVICE_API_KEY"):  # and so does what its .env sets
        monkeypatch.setenv(name, "")
    result = CliRunner().invoke(main, ["serve", *args, "--db", str(cwd / "x.db")])
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


def test_bad_projects_are_one_line_naming_the_file_the_field_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = _refused(["--config", str(tmp_path / "nope.json")], monkeypatch, tmp_path)
    assert "nope.json" in missing and "no such file" in missing and "--config" in missing

    broken = tmp_path / "broken.json"
    broken.write_text('{"graphs": {"agent": "./a.py:graph",}}')
    line = _refused(["--config", str(broken)], monkeypatch, tmp_path)
    assert "broken.json" in line and "not valid JSON" in line and "line 1" in line

    cases = {
        "no graphs": ({"env": {}}, '"graphs" must be an object', "./agent.py:graph"),
        "no attr": ({"graphs": {"agent": "./src/agent.py"}}, "graphs.agent", "file.py:graph"),
        "bad value": ({"graphs": {"agent": 3}}, "graphs.agent", '"path"'),
        "bad env": ({"graphs": {"a": "m:g"}, "env": 3}, '"env"', ".env file"),
        "bad deps": ({"graphs": {"a": "m:g"}, "dependencies": "."}, "dependencies", "list"),
        "env file": ({"graphs": {"a": "m:g"}, "env": "missing.env"}, "env", "missing.env"),
    }
    for name, (config, field, fix) in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.json"
        path.write_text(json.dumps(config))
        line = _refused(["--config", str(path)], monkeypatch, tmp_path)
        assert path.name in line and field in line and fix in line, (name, line)

    project = tmp_path / "project"
    _project(project)
    (project / "src" / "bad.py").write_text("import no_such_package_here\n")
    graphs = {
        "missing file": ("./src/gone.py:graph", "no file", "fix the path"),
        "bad import": ("./src/bad.py:graph", "No module named 'no_such_package_here'", "install"),
        "no module": ("no_such_module_x:graph", "cannot import module", "PYTHONPATH"),
        "no attr": ("./src/agent.py:grpah", "no attribute 'grpah'", "graphs there: builder, graph"),
        "not a graph": ("tests.server.langgraph_apps:not_a_graph", "of type int", "compiled graph"),
    }
    for name, (spec, said, fix) in graphs.items():
        config = _project(project, graphs={"agent": spec})
        line = _refused(["--config", str(config)], monkeypatch, project)
        assert "langgraph.json" in line and "graphs.agent" in line, (name, line)
        assert said in line and fix in line, (name, line)


def test_a_graph_target_on_the_command_line_is_checked_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = "tests.server.langgraph_apps:not_a_graph"
    result = CliRunner().invoke(main, ["serve", target, "--db", str(tmp_path / "x.db")])
    assert result.exit_code != 0 and "Traceback" not in result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"not served: {target}: the value there is of type int")
    assert lines[-1].lower().startswith("error: none of the workflows could be loaded")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["serve", "--db", str(tmp_path / "x.db")])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "langgraph.json" in result.output and "workflows/*.yaml" in result.output


def test_a_graph_loads_by_file_or_module_and_the_cli_runs_it(tmp_path: Path) -> None:
    by_file = load_graph("./tests/server/langgraph_apps.py:review_graph", where="t", base=ROOT)
    assert isinstance(by_file, Pregel) and set(by_file.nodes) >= {"draft", "review"}
    by_module = load_graph("tests.server.langgraph_apps:chat_builder", where="t")
    app = source_of(by_module, name="chat", where="t")
    assert isinstance(app, LangGraphApp) and not app.factory and app.name == "chat"
    assert source_of(apps.make_graph, name="greeter", where="t").factory  # type: ignore[union-attr]
    db = str(tmp_path / "cli.db")
    result = CliRunner().invoke(
        main, ["run", "tests.server.langgraph_apps:chat", "-i", "hello app", "--db", db]
    )
    assert result.exit_code == 0, result.output
    assert "answer: you said: hello app" in result.output


class _Slow(TypedDict, total=False):
    said: Annotated[list[str], operator.add]


async def _slow_step(state: _Slow) -> dict[str, Any]:
    if state["said"][-1] == "slow":
        await asyncio.sleep(60)  # cancelled long before
    return {"said": ["done"]}


async def test_a_cancelled_app_run_keeps_its_steps_and_takes_new_input_on_top(
    store: TrajectorySaver,
) -> None:
    """LangGraph's server: ``runs.cancel`` (action ``interrupt``) of an application's run in
    the middle of a node keeps what the run saved: the run reads ``interrupted``, the thread
    ``interrupted`` where it stopped, and new input goes on top (the pending task dropped)."""
    graph = StateGraph(_Slow).add_node("step", _slow_step).add_edge(START, "step").compile()
    with LiveServer(create_app([Assistant.of(graph, assistant_id="slow")], store=store)) as live:
        sdk = get_client(url=live.url, api_key=None)
        try:
            thread = (await sdk.threads.create())["thread_id"]
            await sdk.runs.wait(thread, "slow", input={"said": ["before"]})
            run = await sdk.runs.create(thread, "slow", input={"said": ["slow"]})
            # acknowledged once its input checkpoint is saved; its node waits
            assert (await sdk.threads.get_state(thread))["values"]["said"][-1] == "slow"
            await sdk.runs.cancel(thread, run["run_id"], wait=True)
            assert (await sdk.runs.get(thread, run["run_id"]))["status"] == "interrupted"
            assert (await sdk.threads.get(thread))["status"] == "interrupted"
            state = await sdk.threads.get_state(thread)
            assert state["values"]["said"] == ["before", "done", "slow"] and state["next"]
            after = await sdk.runs.wait(thread, "slow", input={"said": ["after"]})
            assert after["said"] == ["before", "done", "slow", "after", "done"]
            assert (await sdk.threads.get(thread))["status"] == "idle"
        finally:
            await sdk.aclose()


async def test_a_graphs_nodes_use_the_servers_store(store: TrajectorySaver) -> None:
    """LangGraph's server gives a served graph its store: what a node puts (``store`` as a
    parameter, or ``runtime.store``) is an item of ``/store/items``, and an item put over the
    API is what the next run reads. The store the graph was compiled with is replaced."""
    served = Assistant.of(apps.notes, assistant_id="notes")
    with LiveServer(create_app([served], store=store, api_key="")) as live:
        sdk = get_client(url=live.url, api_key=None)
        try:
            first = await sdk.runs.wait(None, "notes", input={"note": "buy milk"})
            assert first["before"] is None and first["after"] == "buy milk"
            item = await sdk.store.get_item(["notes"], "k")
            assert item["value"] == {"text": "buy milk"} and item["namespace"] == ["notes"]

            await sdk.store.put_item(["notes"], "k", {"text": "from the API"})
            second = await sdk.runs.wait(None, "notes", input={"note": "call Bob"})
            assert second["before"] == "from the API" and second["after"] == "call Bob"
            assert (await sdk.store.get_item(["notes"], "k"))["value"] == {"text": "call Bob"}
        finally:
            await sdk.aclose()
    own = apps.notes.store
    assert own is not None and own.get(("notes",), "k") is None  # not the graph's own store


_SEEN: list[tuple[str, int]] = []
"""What :func:`_awaited_factory` was called for, and the event loop it ran on (its id)."""


class _Count(TypedDict, total=False):
    n: int


async def _awaited_factory(config: Any) -> Any:
    """An ``async`` factory that awaits before it makes its graph."""
    await asyncio.sleep(0.01)
    _SEEN.append((str(config["configurable"].get("flavour")), id(asyncio.get_running_loop())))
    graph = StateGraph(_Count)
    graph.add_node("inc", lambda s: {"n": s.get("n", 0) + 1})
    graph.add_edge(START, "inc")
    return graph.compile()


async def test_an_async_factory_makes_the_graph_to_read_on_the_servers_loop(
    store: TrajectorySaver,
) -> None:
    """The graph an assistant's config makes, for its drawing, schemas and subgraphs, is made
    on the server's own event loop, as for a run (not run to its end on a loop of its own
    while the server waits)."""
    app = create_app([Assistant.of(LangGraphApp(_awaited_factory, name="awaited"))], store=store)
    with LiveServer(app) as live:
        sdk = get_client(url=live.url, api_key=None)
        try:
            made = await sdk.assistants.create("awaited", config={"configurable": {"flavour": "x"}})
            thread = (await sdk.threads.create())["thread_id"]
            _SEEN.clear()
            ran = await sdk.runs.wait(thread, made["assistant_id"], input={"n": 1})
            assert ran["n"] == 2
            (flavour, server_loop), *_ = _SEEN  # a run's graph is made on the server's loop
            assert flavour == "x"
            _SEEN.clear()
            graph = await sdk.assistants.get_graph(made["assistant_id"])
            schemas = await sdk.assistants.get_schemas(made["assistant_id"])
            subgraphs = await sdk.assistants.get_subgraphs(made["assistant_id"])
        finally:
            await sdk.aclose()
    assert {n["id"] for n in graph["nodes"]} >= {"inc"}
    assert "n" in json.dumps(schemas["state_schema"]) and subgraphs == {}
    assert _SEEN == [("x", server_loop)] * 3
