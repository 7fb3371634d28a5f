"""Topologies: workflow chains, parallel joins, conditional edges, critics, handoffs, teams,
hybrid teams, nested swarms and human interrupts – routed on the real compiled graph."""

from __future__ import annotations

from typing import Any

import pytest

from aworld_graph import (
    Agent,
    Critic,
    DefinitionError,
    GraphBuildType,
    HandoffSwarm,
    Human,
    HybridSwarm,
    Node,
    Runners,
    Swarm,
    TeamSwarm,
    edge,
)
from aworld_graph.testing import FunctionModel, ScriptedModel, tool_call


def echo(name: str, reply: str | None = None) -> Agent:
    """An agent whose model answers '<name>: <last user message first line>' (or ``reply``)."""

    def fn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return (
            reply if reply is not None else f"{name} saw: {messages[-1]['content'].splitlines()[0]}"
        )

    return Agent(name=name, model=FunctionModel(fn))


def order(response: Any) -> list[str]:
    return [r["node"] for r in response.state["trace"] if not r.get("thread_id")]


async def test_serial_workflow_passes_outputs_forward(saver: Any) -> None:
    a, b = (
        echo("a", "alpha"),
        Agent(
            name="b",
            model=FunctionModel(lambda m, t: "b got " + m[-1]["content"].split("[a]\n")[1]),
        ),
    )
    response = await Runners.run("start", swarm=Swarm(a, b), checkpointer=saver)
    assert order(response) == ["a", "b"]
    assert response.answer == "b got alpha" and response.success
    assert response.state["outputs"] == {"a": "alpha", "b": "b got alpha"}


async def test_parallel_group_fans_out_and_joins_once(saver: Any) -> None:
    summarizer = Agent(
        name="sum",
        model=FunctionModel(
            lambda m, t: (
                "summary of "
                + ",".join(
                    line[1:-1] for line in m[-1]["content"].splitlines() if line.startswith("[")
                )
            )
        ),
    )
    swarm = Swarm(
        topology=[echo("plan", "p"), [echo("x", "X"), echo("y", "Y"), echo("z", "Z")], summarizer]
    )
    response = await Runners.run("go", swarm=swarm, checkpointer=saver)
    nodes = order(response)
    assert nodes[0] == "plan" and nodes[-1] == "sum" and nodes.count("sum") == 1
    assert sorted(nodes[1:4]) == ["x", "y", "z"]
    assert response.answer == "summary of plan,x,y,z"


async def test_join_waits_for_a_branch_that_uses_tools(saver: Any) -> None:
    def lookup(q: str) -> str:
        """Look something up."""
        return "found " + q

    slow = Agent(
        name="slow",
        tools=[lookup],
        model=ScriptedModel([tool_call("lookup", {"q": "k"}), "slow done"]),
    )
    swarm = Swarm(topology=[[slow, echo("fast", "fast done")], echo("join", "joined")])
    response = await Runners.run("go", swarm=swarm, checkpointer=saver)
    nodes = order(response)
    assert nodes.count("join") == 1 and nodes.index("join") > nodes.index("slow__tools")


async def test_conditional_edges_are_evaluated_both_ways(saver: Any) -> None:
    def build() -> Swarm:
        triage = Agent(
            name="triage",
            model=FunctionModel(lambda m, t: "math" if "+" in m[-1]["content"] else "chat"),
        )
        return Swarm(
            triage,
            echo("mathematician", "42"),
            echo("chatter", "hello"),
            topology=[triage],
            edges=[
                edge("triage", "mathematician", 'answer == "math"'),
                edge("triage", "chatter", lambda s: s["answer"] == "chat"),
            ],
        )

    math = await Runners.run("2+2", swarm=build(), checkpointer=saver)
    chat = await Runners.run("hi", swarm=build(), checkpointer=saver)
    assert order(math) == ["triage", "mathematician"] and math.answer == "42"
    assert order(chat) == ["triage", "chatter"] and chat.answer == "hello"


async def test_critic_loop_retries_with_feedback_until_it_passes(saver: Any) -> None:
    drafts = iter(["draft one", "draft two", "final draft"])
    seen: list[str] = []

    def write(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        seen.append(messages[-1]["content"])
        return next(drafts)

    writer = Agent(name="writer", model=FunctionModel(write))
    critic = Critic(
        name="critic",
        judges=writer,
        scorer=lambda out, state: (1.0, "good") if "final" in out else (0.2, "more detail"),
        threshold=0.8,
    )
    response = await Runners.run("write", swarm=Swarm(writer, critic), checkpointer=saver)
    assert order(response) == ["writer", "critic"] * 3
    assert response.answer == "final draft"
    assert [r["status"] for r in response.state["rewards"]] == ["retry", "retry", "pass"]
    assert "Feedback from critic (score 0.2): more detail" in seen[1]
    assert [
        item["reward"]["score"] for item in response.trajectory if item["meta"]["kind"] == "critic"
    ] == [0.2, 0.2, 1.0]


async def test_critic_stops_at_max_rounds(saver: Any) -> None:
    writer = echo("writer", "meh")
    critic = Critic(name="critic", judges=writer, scorer=lambda out, state: 0.1, max_rounds=2)
    response = await Runners.run(
        "write", swarm=Swarm(writer, critic, echo("publisher", "published")), checkpointer=saver
    )
    assert order(response) == ["writer", "critic", "writer", "critic", "publisher"]
    assert [r["status"] for r in response.state["rewards"]] == ["retry", "max_rounds"]


async def test_llm_critic_parses_its_judges_json(saver: Any) -> None:
    judge = FunctionModel(lambda m, t: '{"score": 0.9, "feedback": "fine"}')
    critic = Critic(name="judge", judges="writer", system_prompt="Grade it.", model=judge)
    response = await Runners.run(
        "x", swarm=Swarm(echo("writer", "text"), critic), checkpointer=saver
    )
    assert (
        response.state["rewards"][-1]["score"] == 0.9
        and response.state["rewards"][-1]["status"] == "pass"
    )


async def test_handoff_cycle_and_mixed_tool_calls_leave_no_dangling_call(saver: Any) -> None:
    def note(text: str) -> str:
        """Take a note."""
        return "noted"

    triage = Agent(
        name="triage",
        tools=[note],
        model=ScriptedModel(
            [
                [
                    tool_call("note", {"text": "x"}, id="n1"),
                    tool_call("transfer_to_writer", {}, id="h1"),
                    tool_call("transfer_to_searcher", {}, id="h2"),
                ],
                "back at triage: done",
            ]
        ),
    )
    writer = Agent(
        name="writer", model=ScriptedModel([tool_call("transfer_to_triage", {}, id="h3")])
    )
    searcher = echo("searcher")
    swarm = HandoffSwarm(
        triage, writer, searcher, topology=[(triage, writer), (triage, searcher), (writer, triage)]
    )
    response = await Runners.run("help", swarm=swarm, checkpointer=saver)
    assert order(response) == ["triage", "triage__tools", "writer", "writer__tools", "triage"]
    called = {tc["id"] for m in response.state["messages"] for tc in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in response.state["messages"] if m["role"] == "tool"}
    assert called == answered == {"n1", "h1", "h2", "h3"}
    ignored = next(m for m in response.state["messages"] if m.get("tool_call_id") == "h2")
    assert "Ignored" in ignored["content"]
    assert response.answer == "back at triage: done"


async def test_handoff_remembers_the_active_agent_across_a_session(saver: Any) -> None:
    triage = Agent(name="triage", model=ScriptedModel([tool_call("transfer_to_expert", {})]))
    expert = Agent(name="expert", model=ScriptedModel(["first answer", "second answer"]))
    swarm = HandoffSwarm(triage, expert, topology=[(triage, expert)])
    first = await Runners.run("q1", swarm=swarm, session_id="s1", checkpointer=saver)
    second = await Runners.run("q2", swarm=swarm, session_id="s1", checkpointer=saver)
    assert first.answer == "first answer" and second.answer == "second answer"
    assert order(second) == ["expert"]
    assert [m["content"] for m in second.state["messages"] if m["role"] == "user"] == ["q1", "q2"]


async def test_team_leader_delegates_and_composes(saver: Any) -> None:
    leader = Agent(
        name="leader",
        model=ScriptedModel(
            [
                [
                    tool_call("ask_researcher", {"request": "find facts"}),
                    tool_call("ask_writer", {"request": "draft"}),
                ],
                lambda m, t: (
                    "composed: " + " | ".join(x["content"] for x in m if x["role"] == "tool")
                ),
            ]
        ),
    )
    researcher = Agent(
        name="researcher", model=FunctionModel(lambda m, t: "facts for " + m[-1]["content"])
    )
    writer = Agent(name="writer", model=FunctionModel(lambda m, t: "draft for " + m[-1]["content"]))
    response = await Runners.run(
        "report", swarm=TeamSwarm(leader, researcher, writer), checkpointer=saver
    )
    assert response.answer == "composed: facts for find facts | draft for draft"
    sub_agents = {r["agent"] for r in response.state["trace"] if r.get("thread_id")}
    assert sub_agents == {"researcher", "writer"}
    assert response.llm_calls == 4


async def test_hybrid_members_hand_off_between_themselves(saver: Any) -> None:
    leader = Agent(
        name="leader", model=ScriptedModel([tool_call("ask_a", {"request": "go"}), "leader done"])
    )
    a = Agent(name="a", model=ScriptedModel([tool_call("transfer_to_b", {})]))
    b = echo("b", "b answered")
    swarm = HybridSwarm(leader, a, b, topology=[(leader, a), (leader, b), (a, b)])
    response = await Runners.run("x", swarm=swarm, checkpointer=saver)
    tool_msg = next(m for m in response.state["messages"] if m["role"] == "tool")
    assert tool_msg["content"] == "b answered" and response.answer == "leader done"


async def test_nested_swarm_steps_stay_visible(saver: Any) -> None:
    inner = Swarm(echo("i1", "inner one"), echo("i2", "inner two"), name="inner")
    outer = Swarm(echo("first", "f"), inner, echo("last", "l"), name="outer")
    response = await Runners.run("x", swarm=outer, checkpointer=saver)
    assert order(response) == ["first", "inner", "last"]
    assert [r["node"] for r in response.state["trace"] if r.get("thread_id")] == ["i1", "i2"]
    assert response.state["outputs"]["inner"] == "inner two"
    assert any(item["meta"]["agent_id"] == "i2" for item in response.trajectory)


async def test_human_interrupt_and_resume(saver: Any) -> None:
    drafter, approval, doer, rework = (
        echo("drafter", "a plan"),
        Human(name="approval"),
        echo("doer", "did it"),
        echo("rework", "reworked"),
    )
    swarm = Swarm(
        drafter,
        approval,
        doer,
        rework,
        topology=[drafter, approval],
        edges=[
            edge(approval, doer, 'lower(context.approval) == "yes"'),
            edge(approval, rework, 'lower(context.approval) != "yes"'),
        ],
    )
    paused = await Runners.run("plan it", swarm=swarm, task_id="human-1", checkpointer=saver)
    assert paused.status == "interrupted" and paused.interrupts[0]["value"]["answer"] == "a plan"
    done = await Runners.resume("human-1", swarm=swarm, value="yes", checkpointer=saver)
    assert done.answer == "did it" and order(done) == ["drafter", "approval", "doer"]


async def test_function_node(saver: Any) -> None:
    counter = Node(
        name="count", fn=lambda state: {"output": len(state["input"]), "context": {"counted": True}}
    )
    response = await Runners.run("four", swarm=Swarm(counter), checkpointer=saver)
    assert response.state["outputs"]["count"] == 4 and response.state["context"]["counted"] is True


def test_build_errors_are_reported_all_at_once() -> None:
    a, b = echo("a"), echo("b")
    with pytest.raises(DefinitionError) as info:
        Swarm(a, b, echo("a"), topology=[a, "ghost", [b]], edges=[("b", "nowhere")])
    text = str(info.value)
    assert "two different nodes are named 'a'" in text
    assert "unknown node 'ghost'" in text and "known: a, b" in text
    assert "parallel group needs at least two branches" in text


def test_workflow_cycle_needs_a_declared_loop() -> None:
    a, b = echo("a"), echo("b")
    with pytest.raises(DefinitionError, match="workflow cycle a -> b -> a"):
        Swarm(a, b, edges=[("b", "a")])
    Swarm(a, b, edges=[edge("b", "a", "steps < 3", max_rounds=2)])


def test_the_cycle_error_names_the_back_edge() -> None:
    a, b, c = echo("a"), echo("b"), echo("c")
    with pytest.raises(DefinitionError) as info:
        Swarm(a, b, c, edges=[("c", "b")])  # the chain a -> b -> c, and c -> b back
    assert "workflow cycle b -> c -> b" in str(info.value)
    assert "edge('c', 'b', max_rounds=N)" in str(info.value)


async def test_declared_loop_is_bounded_by_max_rounds(saver: Any) -> None:
    a, b = echo("a", "A"), echo("b", "B")
    response = await Runners.run(
        "x", swarm=Swarm(a, b, edges=[edge(b, a, max_rounds=2)]), checkpointer=saver
    )
    assert order(response) == ["a", "b", "a", "b", "a", "b"]


def test_unreachable_node_and_bad_condition_and_handoff_shape() -> None:
    with pytest.raises(DefinitionError) as info:
        Swarm(echo("a"), echo("b"), echo("island"), topology=[echo("a"), echo("b")])
    assert "two different nodes" in str(info.value)
    a, b, island = echo("a"), echo("b"), echo("island")
    with pytest.raises(DefinitionError, match="'island' is unreachable"):
        Swarm(a, b, island, topology=[a, b])
    with pytest.raises(DefinitionError, match="unknown name 'bogus'"):
        edge(a, b, "bogus > 1")
    with pytest.raises(DefinitionError, match="pairs"):
        Swarm(a, b, topology=[a], build_type=GraphBuildType.HANDOFF)
    with pytest.raises(DefinitionError, match="use build_type=HYBRID"):
        TeamSwarm(a, b, island, topology=[(a, b), (a, island), (b, island)])


def test_a_nested_swarm_in_a_handoff_swarm_says_why_and_what_to_use() -> None:
    triage, inner = Agent(name="triage", model=ScriptedModel([])), Swarm(echo("b"), name="inner")
    with pytest.raises(DefinitionError) as info:
        HandoffSwarm(triage, inner, topology=[(triage, inner)])
    text = str(info.value)
    assert "node 'inner': a handoff swarm holds agents only" in text
    assert "a nested swarm cannot take a turn in it" in text
    assert "TeamSwarm or HybridSwarm" in text
    TeamSwarm(triage, inner, root_agent=triage)  # what it says to use instead works


def _judged_with_a_branch() -> tuple[Swarm, Agent]:
    """s is judged by crit, which rejects the first draft; s has a conditional edge to p."""
    s = Agent(name="s", model=ScriptedModel(["draft 1", "draft 2"]))
    p = Agent(name="p", model=FunctionModel(lambda m, t: "published"))
    verdicts = iter([(0.0, "again"), (1.0, "good")])
    crit = Critic(name="crit", judges=s, threshold=0.5, scorer=lambda a, st: next(verdicts))
    return Swarm(s, crit, p, topology=[s], edges=[edge(s, p, "len(answer) > 0")]), p


async def test_a_judged_nodes_conditional_edge_leaves_through_its_critic(saver: Any) -> None:
    swarm, p = _judged_with_a_branch()
    response = await Runners.run("x", swarm=swarm, checkpointer=saver)
    assert order(response) == ["s", "crit", "s", "crit", "p"]
    (call,) = p.model.calls  # type: ignore[union-attr]  # p ran once, on the passed draft
    assert "[s]\ndraft 2" in call.messages[-1]["content"]
    assert {(e.source, e.target, e.kind) for e in swarm.edges} == {
        ("s", "crit", "flow"),
        ("crit", "s", "critic"),
        ("crit", "p", "flow"),
    }
    assert [(e.source, e.target) for e in swarm.declared_edges] == [("s", "p")]  # as written
