"""A LangGraph application's runs steered as LangGraph's server steers them, through the real
``langgraph-sdk`` client: ``command`` with ``update`` and ``goto`` (a node, a list, a
``Send``), ``stream_subgraphs`` (a subgraph's parts under ``MODE|NAMESPACE``), graph factories of every kind LangGraph's server takes (async, a context manager
held open for the run, given the run's config and/or a ``ServerRuntime``), and a subgraph's
schemas. Each result is compared with the same graph run in this process on LangGraph's own
``InMemorySaver``; bad commands and factories are refused naming the field and the fix."""

# ruff: noqa: F811 (app_server's fixtures, imported here, are the tests' parameters)

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Send

from aworld_graph.errors import ConfigError, DefinitionError
from aworld_graph.run import LangGraphApp
from aworld_graph.server import Assistant, source_of
from tests.server import apps
from tests.server import langgraph_apps as chats
from tests.server import langgraph_more_apps as more
from tests.server.app_server import app_sdk, app_server  # noqa: F401 (fixtures)
from tests.server.conftest import LiveServer


def served() -> list[Assistant]:
    """What ``app_server`` serves here."""
    return [
        Assistant.of(more.steps, assistant_id="steps"),
        Assistant.of(more.parent, assistant_id="parent"),
        Assistant.of(chats.nested, assistant_id="nested"),
        Assistant.of(LangGraphApp(more.make_async, name="async_factory")),
        Assistant.of(LangGraphApp(more.make_managed, name="managed_factory")),
        Assistant.of(LangGraphApp(more.make_for_runtime, name="runtime_factory")),
        Assistant.of(LangGraphApp(more.make_in_context, name="context_factory")),
        Assistant.of(apps.counter, target="tests.server.apps:counter"),
    ]


def _task(name: str) -> str:
    """An event name with its task ids as ``<task>`` (each run makes its own)."""
    return re.sub(r":[0-9a-f-]{36}", ":<task>", name)


def _local() -> tuple[Any, Any]:
    """``steps`` on LangGraph's own in-memory checkpointer, and a thread's config."""
    graph = more.steps.copy(update={"checkpointer": InMemorySaver()})
    return graph, {"configurable": {"thread_id": "t"}}


async def test_update_and_goto_steer_a_thread_as_in_langgraph(app_sdk: Any) -> None:
    local, conf = _local()
    thread = (await app_sdk.threads.create())["thread_id"]
    asked = await app_sdk.runs.wait(thread, "steps", input={"log": ["in"]})
    expected = local.invoke({"log": ["in"]}, conf)
    assert asked["log"] == expected["log"] == ["in", "a"]
    assert (await app_sdk.threads.get_state(thread))["next"] == ["ask"]

    # a resume with an update: both at once
    done = await app_sdk.runs.wait(
        thread, "steps", command={"resume": "yes", "update": {"note": "z"}}
    )
    expected = local.invoke(Command(resume="yes", update={"note": "z"}), conf)
    assert done == expected and done["log"] == ["in", "a", "ask:yes", "b"] and done["note"] == "z"

    # goto a node with an update, on the finished thread
    steered = await app_sdk.runs.wait(
        thread, "steps", command={"update": {"note": "x"}, "goto": "side"}
    )
    expected = local.invoke(Command(update={"note": "x"}, goto="side"), conf)
    assert steered == expected and steered["log"][-1] == "side:x"
    state = await app_sdk.threads.get_state(thread)
    assert state["values"] == local.get_state(conf).values and state["next"] == []

    # update pairs and a list of nodes, on the finished thread
    pairs = {"update": [["note", "pairs"]], "goto": ["side"]}
    again = await app_sdk.runs.wait(thread, "steps", command=pairs)
    expected = local.invoke(Command(update=[("note", "pairs")], goto=["side"]), conf)
    assert again["log"] == expected["log"] and again["log"][-1] == "side:pairs"


async def test_a_send_goes_to_a_node_with_its_own_input(app_sdk: Any) -> None:
    local, conf = _local()
    thread = (await app_sdk.threads.create())["thread_id"]
    sent = {"goto": {"node": "side", "input": {"note": "sent"}}}
    got = await app_sdk.runs.wait(thread, "steps", command=sent)  # a fresh thread, no input
    expected = local.invoke(Command(goto=[Send("side", {"note": "sent"})]), conf)
    assert got["log"] == expected["log"] and "side:sent" in got["log"]
    history = await app_sdk.threads.get_history(thread)
    assert all(h["metadata"]["graph_id"] == "steps" for h in history)


async def test_bad_commands_are_a_422_naming_the_field(app_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=app_server.url) as http:
        thread = (await http.post("/threads", json={})).json()["thread_id"]

        async def refused(assistant: str, body: dict[str, Any], *said: str) -> None:
            got = await http.post(
                f"/threads/{thread}/runs/wait", json={"assistant_id": assistant, **body}
            )
            assert got.status_code == 422, (body, got.text)
            message = got.json()["message"]
            assert all(s in message for s in said), (body, message)

        await refused("steps", {"command": 3}, "command must be an object")
        await refused("steps", {"command": {"jump": "a"}}, "command.'jump'", "goto")
        await refused("steps", {"command": {"goto": 5}}, "command.goto must be", '"node"')
        bad_send = {"command": {"goto": ["a", {"node": "side"}]}}
        await refused("steps", bad_send, "command.goto[1] must be", '"input"')
        await refused("steps", {"command": {"update": "x"}}, "command.update must be", "pairs")
        await refused("steps", {"command": {"update": [["note"]]}}, "command.update")
        await refused(
            "steps", {"command": {"goto": "nope"}}, "command.goto", "'nope'", "a, ask, b, side"
        )
        await refused("steps", {"command": {"update": {"zzz": 1}}}, "command.update", "'zzz'")
        both = {"input": {"log": []}, "command": {"goto": "a"}}
        await refused("steps", both, "either input or command")
        # a workflow of this library takes resume only: said, never ignored
        await refused(
            "counter", {"command": {"goto": "counter"}}, "command.goto", "LangGraph applications"
        )
        await refused("counter", {"command": {"update": {"x": 1}}}, "command.update", "resume")
        assert (await http.get(f"/threads/{thread}/state")).json()["values"] == {}


@pytest.mark.parametrize(
    ("graph", "config", "log"),
    [
        ("async_factory", {"configurable": {"greeting": "ahoy"}}, ["ahoy"]),
        (
            "managed_factory",
            None,
            ["hello (threads.create_run, store True)", "open while running: True"],
        ),
        ("runtime_factory", None, ["runtime threads.create_run"]),
        ("context_factory", None, ["from a context manager"]),
    ],
)
async def test_each_kind_of_factory_is_made_for_its_run(
    app_sdk: Any, graph: str, config: Any, log: list[str]
) -> None:
    thread = (await app_sdk.threads.create())["thread_id"]
    done = await app_sdk.runs.wait(thread, graph, input={"log": []}, config=config)
    assert done["log"] == log
    assert more.OPEN["managed"] == 0  # a context manager's graph is closed once the run ends
    state = await app_sdk.threads.get_state(thread)  # read with the graph made without a run
    assert state["values"]["log"] == log and state["next"] == []
    schemas = await app_sdk.assistants.get_schemas(graph)
    assert set(schemas["state_schema"]["properties"]) == {"log", "note"}


def test_a_factory_of_another_shape_is_refused_naming_it() -> None:
    def three(config: Any, runtime: Any, extra: Any) -> Any:
        raise AssertionError("never called")

    def two_configs(config: Any, other: Any) -> Any:
        raise AssertionError("never called")

    def star(*args: Any) -> Any:
        raise AssertionError("never called")

    where = 'langgraph.json: field "graphs.agent"'
    for factory, said in [
        (three, "takes (config: 'Any', runtime: 'Any', extra: 'Any')"),
        (two_configs, "annotate exactly one of them ServerRuntime"),
        (star, "takes (*args: 'Any')"),
    ]:
        with pytest.raises(ConfigError) as caught:
            source_of(factory, name="agent", where=where)
        line = str(caught.value)
        assert line.startswith(where) and factory.__name__ in line and said in line, line

    def returns_text() -> str:
        return "not a graph"

    with pytest.raises(DefinitionError, match="'returns_text' returned str, not a graph; return"):
        LangGraphApp(returns_text).make()


async def test_subgraphs_are_the_graphs_own(app_sdk: Any) -> None:
    found = await app_sdk.assistants.get_subgraphs("parent")
    assert list(found) == [ns for ns, _ in more.parent.get_subgraphs()] == ["child"]
    assert set(found["child"]["state_schema"]["properties"]) == {"log", "note"}
    assert list(await app_sdk.assistants.get_subgraphs("parent", namespace="child")) == ["child"]
    assert await app_sdk.assistants.get_subgraphs("parent", namespace="nope") == {}
    assert await app_sdk.assistants.get_subgraphs("steps", recurse=True) == {}


async def test_stream_subgraphs_sends_a_subgraphs_parts_under_its_namespace(app_sdk: Any) -> None:
    modes = ["values", "updates", "custom"]
    thread = (await app_sdk.threads.create())["thread_id"]
    parts = [
        (p.event, p.data)
        async for p in app_sdk.runs.stream(
            thread, "parent", input={"log": []}, stream_mode=modes, stream_subgraphs=True
        )
    ]
    local = more.parent.copy(update={"checkpointer": InMemorySaver()})
    conf = {"configurable": {"thread_id": "t"}}
    expected = [
        ("|".join((mode, *ns)), chunk)
        async for ns, mode, chunk in local.astream(
            {"log": []}, conf, stream_mode=modes, subgraphs=True
        )
    ]
    assert parts[0][0] == "metadata"
    # the same parts, named as LangGraph's server names them: MODE|NODE:TASK_ID
    assert [(_task(n), d) for n, d in parts[1:]] == [(_task(n), d) for n, d in expected]
    child = [name for name, _ in parts if "|" in name]
    assert [name.split("|")[0] for name in child] == [
        *("values", "updates", "values", "updates", "values")
    ]
    history = await app_sdk.threads.get_history(thread)
    ran = [t["id"] for h in history for t in h["tasks"] if t["name"] == "child"]
    assert {name.split("|")[1] for name in child} == {f"child:{ran[0]}"}  # the subgraph's task
    # without it, the parent's parts alone; a join without modes: the run's own
    plain = [p.event async for p in app_sdk.runs.stream(None, "parent", input={"log": []})]
    assert plain and not any("|" in name for name in plain)


async def test_stream_subgraphs_must_be_a_boolean(app_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=app_server.url) as http:
        body = {"assistant_id": "parent", "input": {"log": []}, "stream_subgraphs": "yes"}
        got = await http.post("/runs/wait", json=body)
    assert got.status_code == 422 and "stream_subgraphs" in got.json()["message"]


async def test_a_subgraphs_chat_model_streams_under_its_namespace(app_sdk: Any) -> None:
    """``nested`` runs ``chat`` as its subgraph ``inner``: its chat model's tokens go out as
    ``messages|inner:TASK`` tuples when ``messages-tuple`` is asked for, and as the unnamed
    ``messages/partial`` of the ``messages`` mode otherwise, as LangGraph's server sends them."""
    user = {"messages": [{"role": "user", "content": "hi"}]}
    tuples = [
        (p.event, p.data)
        async for p in app_sdk.runs.stream(
            None, "nested", input=user, stream_mode="messages-tuple", stream_subgraphs=True
        )
    ]
    named = [(_task(name), data) for name, data in tuples if name.startswith("messages")]
    assert {name for name, _ in named} == {"messages|inner:<task>"}
    assert "".join(chunk["content"] for _, (chunk, _meta) in named) == "you said: hi"
    partial = [
        p.event
        async for p in app_sdk.runs.stream(
            None, "nested", input=user, stream_mode="messages", stream_subgraphs=True
        )
    ]
    assert "messages/partial" in partial and not any("|" in name for name in partial)
