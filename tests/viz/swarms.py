"""Swarms of every topology, for the topology snapshots and the page tests.

Each builder makes fresh agents whose fakes answer deterministically, so the same swarm can
be drawn, run and drawn again. Module attributes hold one instance each for the CLI tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aworld_graph import (
    Agent,
    Critic,
    HandoffSwarm,
    Human,
    HybridSwarm,
    Node,
    Swarm,
    TeamSwarm,
    edge,
)
from aworld_graph.testing import FunctionModel, ScriptedModel, tool_call


def say(name: str, reply: str = "ok", **kwargs: Any) -> Agent:
    """An agent whose model always answers ``reply``."""
    return Agent(name=name, model=FunctionModel(lambda m, t: reply), **kwargs)


def lookup(q: str) -> str:
    """Look something up."""
    return "found " + q


def broken(q: str) -> str:
    """A tool that always fails."""
    raise ValueError(f"the index is offline (asked {q!r})")


def single() -> Agent:
    return say("solo", system_prompt="Answer briefly.", tools=[lookup])


def chain() -> Swarm:
    return Swarm(say("draft"), say("edit"), say("publish"), name="chain")


def parallel() -> Swarm:
    return Swarm(
        topology=[say("plan"), [say("x"), (say("y1"), say("y2")), say("z")], say("merge")],
        name="parallel",
    )


def conditional() -> Swarm:
    triage = say("triage", "math")
    return Swarm(
        triage,
        say("mathematician"),
        say("chatter"),
        topology=[triage],
        edges=[
            edge("triage", "mathematician", 'answer == "math"'),
            edge("triage", "chatter", lambda s: s["answer"] == "chat"),
        ],
        name="conditional",
    )


def critic_loop() -> Swarm:
    writer = say("writer")
    critic = Critic(
        name="reviewer", judges=writer, scorer=lambda out, state: 1.0, max_rounds=2, threshold=0.8
    )
    judge = Critic(
        name="judge",
        judges="editor",
        system_prompt="Grade it.",
        model=FunctionModel(lambda m, t: "{}"),
    )
    return Swarm(writer, critic, say("editor"), judge, name="critic_loop")


def declared_loop() -> Swarm:
    a, b = say("ask"), say("check")
    return Swarm(a, b, edges=[edge(b, a, "score < 0.5", max_rounds=3)], name="declared_loop")


def handoff() -> Swarm:
    triage = say("triage", tools=[lookup], system_prompt="Route the user.")
    return HandoffSwarm(
        triage,
        say("writer"),
        say("searcher"),
        topology=[(triage, "writer"), (triage, "searcher"), ("writer", triage)],
        name="support",
    )


def team() -> Swarm:
    return TeamSwarm(
        say("lead"), say("researcher", description="finds facts"), say("coder"), name="team"
    )


def hybrid() -> Swarm:
    return HybridSwarm(
        say("lead"),
        say("a"),
        say("b"),
        topology=[("lead", "a"), ("lead", "b"), ("a", "b")],
        name="hybrid",
    )


def nested() -> Swarm:
    inner = Swarm(say("i1"), say("i2"), name="inner")
    deep = Swarm(say("d1"), Swarm(say("d2a"), say("d2b"), name="deeper"), name="deep")
    return Swarm(topology=[say("first"), [inner, deep], say("last")], name="nested")


def team_of_swarms() -> Swarm:
    crew = Swarm(say("scout"), say("reporter"), name="crew")
    return TeamSwarm(say("boss"), crew, say("helper"), name="team_of_swarms")


def human_and_function() -> Swarm:
    drafter, approval = say("drafter", "a plan"), Human(name="approval", prompt="Approve? (yes/no)")
    count = Node(
        name="count", fn=lambda state: {"output": len(state["input"])}, description="counts"
    )
    return Swarm(
        drafter,
        approval,
        say("doer"),
        say("rework"),
        count,
        topology=[count, drafter, approval],
        edges=[
            edge(approval, "doer", 'lower(context.approval) == "yes"'),
            edge(approval, "rework", 'lower(context.approval) != "yes"'),
        ],
        name="human_and_function",
    )


def escaping() -> Swarm:
    """Names and conditions full of characters that Mermaid, DOT and HTML treat specially."""
    odd = say('say "hi" <b>#1</b> & {more}; [x] (y) `z` \\ end')
    other = say("end")
    return Swarm(
        odd,
        other,
        edges=[
            edge(
                odd,
                other,
                'answer == "a|b" or "<\\"quote\\">" in answer and "#x;" != last',
                max_rounds=1,
            )
        ],
        topology=[odd],
        name='odd "names" <&>',
    )


def report() -> Swarm:
    """The page-test swarm: a parallel group with a nested swarm and a tool-using branch, a join,
    and a critic that sends the first draft back."""
    plan = say("planner", "plan", system_prompt="Plan the work. </script><!-- not the end -->")
    search = Agent(
        name="searcher",
        tools=[lookup],
        model=ScriptedModel([tool_call("lookup", {"q": "k"}), "results"]),
    )
    inner = Swarm(say("i1", "one"), say("i2", "two"), name="research")
    drafts = iter(["draft", "final draft"])
    writer = Agent(name="writer", model=FunctionModel(lambda m, t: next(drafts)))
    critic = Critic(
        name="reviewer",
        judges=writer,
        scorer=lambda out, s: (1.0, "good") if "final" in out else (0.3, "more detail"),
    )
    return Swarm(topology=[plan, [search, inner], writer, critic], name="report")


def failing_handoff() -> Swarm:
    """A handoff run whose tool fails and whose second agent's model raises."""
    triage = Agent(
        name="triage",
        tools=[broken],
        model=ScriptedModel([tool_call("broken", {"q": "x"}), tool_call("transfer_to_expert", {})]),
    )
    expert = Agent(name="expert", model=ScriptedModel([RuntimeError("model endpoint down")]))
    return HandoffSwarm(triage, expert, topology=[(triage, expert)], name="failing")


CASES: dict[str, Callable[[], Any]] = {
    "single": single,
    "chain": chain,
    "parallel": parallel,
    "conditional": conditional,
    "critic_loop": critic_loop,
    "declared_loop": declared_loop,
    "handoff": handoff,
    "team": team,
    "hybrid": hybrid,
    "nested": nested,
    "team_of_swarms": team_of_swarms,
    "human_and_function": human_and_function,
    "escaping": escaping,
    "report": report,
}
"""Snapshot cases: name → builder."""

report_swarm = report()
handoff_swarm = handoff()
solo_agent = single()
