"""Turn a :class:`~aworld_graph.swarm.Swarm` into a LangGraph ``StateGraph``.

Every routing decision is a LangGraph conditional edge with an explicit path map, so
LangGraph's own drawing and our topology views agree, and conditions are evaluated on the
real state at run time. A condition that fails on the state (a type error in the expression,
a predicate that raises) does not fail the node that just finished – LangGraph would keep
that node's writes and, on resume, treat it as done with nowhere to go – but routes to the
node's ``NODE__route`` step, which evaluates the conditions again and raises the error
naming the edge. That step is what fails, is recorded, and runs again on resume: once the
workflow file is fixed, the run goes on from there.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from ..agent import Agent
from ..agent.runtime import AgentRuntime, GraphTool, turn_input
from ..errors import DefinitionError
from ..records import TraceRecord
from ..state import SwarmState
from ..tools import ToolSpec
from . import Edge, GraphBuildType, Swarm
from .graph import BuiltGraph, GraphSource, as_source, build_agent_nodes
from .nodes import Critic, Human, Node

__all__ = ["SubRun", "compile_agent", "compile_swarm"]

SubRun = Callable[[GraphSource, str, RunnableConfig, str], Awaitable[dict[str, Any]]]
"""Runs a delegated member or nested swarm as its own thread: ``(source, request, config, key)``."""

_FINISH_KINDS = ("node", "human", "swarm")


def _finished_at(state: SwarmState, node: str) -> int:
    """Superstep at which ``node`` last produced its output (-1 if never)."""
    best = -1
    for r in state.get("trace", []):
        if r.get("node") != node or r.get("thread_id"):
            continue
        done = (
            (r.get("kind") == "llm" and not r.get("tool_calls"))
            or r.get("kind") in _FINISH_KINDS
            or (r.get("kind") == "critic" and r.get("status") != "retry")
        )
        if done:
            best = max(best, int(r.get("step", -1)))
    return best


def _ran_at(state: SwarmState, node: str) -> int:
    steps = [
        int(r.get("step", -1))
        for r in state.get("trace", [])
        if r.get("node") == node and not r.get("thread_id")
    ]
    return max(steps, default=-1)


def _runs(state: SwarmState, node: str) -> int:
    return sum(
        1
        for r in state.get("trace", [])
        if r.get("node") == node
        and r.get("kind") in ("llm", "node", "human", "swarm", "critic")
        and not r.get("tool_calls")
        and not r.get("thread_id")
    )


def _gate(join: str) -> str:
    return f"{join}__join"


def _recheck(name: str) -> str:
    return f"{name}__route"


def _recheck_node(route: Callable[[SwarmState], Any]) -> Callable[..., Any]:
    """The step a failed condition routes to: evaluate again (raising the error), then go on."""

    async def node(state: SwarmState, config: RunnableConfig) -> Command[Any]:
        return Command(goto=route(state))

    return node


def _onwards(
    swarm: Swarm, name: str
) -> tuple[Callable[[SwarmState], Any], list[str], Callable[[SwarmState], Any] | None]:
    """The router after ``name`` finishes, every target it may return, and (when an out-edge
    has a condition) the strict router its ``NODE__route`` step runs."""
    out = [e for e in swarm.edges if e.source == name and e.kind in ("flow", "loop")]

    def target(e: Edge) -> str:
        return _gate(e.target) if name in swarm.joins.get(e.target, []) else e.target

    def strict(state: SwarmState) -> Any:
        chosen: list[str] = []
        for e in out:
            if e.condition is not None and not e.condition(state):
                continue
            if (
                e.kind == "loop"
                and e.max_rounds is not None
                and _runs(state, e.target) > e.max_rounds
            ):
                continue
            t = target(e)
            if t not in chosen:
                chosen.append(t)
        return chosen or END

    targets = sorted({target(e) for e in out} | {END})
    if not any(e.condition is not None for e in out):
        return strict, targets, None

    def route(state: SwarmState) -> Any:
        try:
            return strict(state)
        except DefinitionError:
            return _recheck(name)

    return route, sorted([*targets, _recheck(name)]), strict


def _join_gate(swarm: Swarm, join: str) -> tuple[Callable[..., Any], Callable[[SwarmState], Any]]:
    preds = swarm.joins[join]

    async def gate(state: SwarmState, config: RunnableConfig) -> dict[str, Any]:
        return {}

    def ready(state: SwarmState) -> Any:
        since = _ran_at(state, join)
        return join if all(_finished_at(state, p) > since for p in preds) else END

    return gate, ready


def _sub_runner(
    source: GraphSource, node: str, sub_run: SubRun
) -> Callable[[str, RunnableConfig, str], Any]:
    async def run(request: str, config: RunnableConfig, key: str) -> dict[str, Any]:
        return await sub_run(source, request, config, f"{node}.{key}")

    return run


def _nested_node(swarm_node: Swarm, sub_run: SubRun) -> Callable[..., Any]:
    run = _sub_runner(swarm_node, swarm_node.name, sub_run)

    async def node(state: SwarmState, config: RunnableConfig) -> dict[str, Any]:
        request = turn_input(swarm_node.name, state)
        n = 1 + sum(
            1
            for r in state.get("trace", [])
            if r.get("node") == swarm_node.name and r.get("kind") == "swarm"
        )
        sub = await run(request, config, str(n))
        step = int((config.get("metadata") or {}).get("langgraph_step", 0))
        record: TraceRecord = {
            "kind": "swarm",
            "at": time.time(),
            "node": swarm_node.name,
            "agent": swarm_node.name,
            "step": step,
            "content": sub.get("answer"),
            "tool_calls": [],
            "sub_thread": sub.get("thread_id"),
            "success": sub.get("success"),
        }
        update: dict[str, Any] = {
            "trace": [record, *sub.get("trace", [])],
            "steps": 1,
            "outputs": {swarm_node.name: sub.get("answer")},
        }
        if sub.get("answer") is not None:
            update["answer"] = sub["answer"]
        if not sub.get("success"):
            update["status"] = "error"
            update["error"] = f"nested swarm {swarm_node.name!r} failed: {sub.get('msg')}"
        return update

    return node


def _delegate_tool(
    leader: str, member: str, source: GraphSource, description: str, sub_run: SubRun
) -> GraphTool:
    spec = ToolSpec(
        name=f"ask_{member}".replace(" ", "_"),
        description=f"Delegate a task to {member}"
        + (f" ({description})" if description else "")
        + "; returns its answer.",
        parameters={
            "type": "object",
            "properties": {
                "request": {"type": "string", "description": "What to do, with all needed context."}
            },
            "required": ["request"],
        },
    )
    return GraphTool(
        spec=spec, target=member, kind="delegate", run=_sub_runner(source, member, sub_run)
    )


def _handoff_tool(target: Agent) -> GraphTool:
    spec = ToolSpec(
        name=f"transfer_to_{target.name}".replace(" ", "_"),
        description=f"Hand the conversation over to {target.name}"
        + (f": {target.description}" if target.description else "")
        + ".",
        parameters={"type": "object", "properties": {}},
    )
    return GraphTool(spec=spec, target=target.name, kind="handoff")


def compile_agent(agent: Agent) -> BuiltGraph:
    """A lone agent as a graph: ``START → agent ⇄ agent__tools → END``."""
    graph: StateGraph[Any] = StateGraph(SwarmState)
    runtime = AgentRuntime(agent)
    build_agent_nodes(graph, agent, runtime)
    graph.add_edge(START, agent.name)
    return BuiltGraph(
        graph=graph,
        entry=agent.name,
        runtimes={agent.name: runtime},
        info={"name": agent.name, "kind": "agent"},
    )


def compile_swarm(swarm: Swarm, sub_run: SubRun) -> BuiltGraph:
    """``swarm``'s topology as a ``StateGraph``; nested swarms and delegated members run
    through ``sub_run`` (the run loop's, passed in so this module does not import it)."""
    graph: StateGraph[Any] = StateGraph(SwarmState)
    runtimes: dict[str, AgentRuntime] = {}
    info = {"name": swarm.name, "kind": swarm.build_type.value, **swarm.info}
    if swarm.max_steps:
        info["max_steps"] = swarm.max_steps
    if swarm.build_type is GraphBuildType.WORKFLOW:
        for name, node in swarm.nodes.items():
            route, targets, strict = _onwards(swarm, name)
            if strict is not None:
                graph.add_node(
                    _recheck(name),
                    _recheck_node(strict),
                    metadata={"kind": "route", "node": name},
                    destinations=tuple(t for t in targets if t != _recheck(name)),
                )
            if isinstance(node, Agent):
                runtime = AgentRuntime(node, private=True)
                runtimes[name] = runtime
                graph.add_node(name, runtime.llm_node, metadata={"kind": "agent"})
                graph.add_node(
                    runtime.tools_node,
                    runtime.tools_node_fn,
                    metadata={"kind": "tools", "agent": name},
                )
                graph.add_conditional_edges(
                    name,
                    runtime.route_after_llm(route),
                    sorted(set(targets) | {runtime.tools_node}),
                )
                graph.add_edge(runtime.tools_node, name)
                continue
            if isinstance(node, Critic):
                graph.add_node(name, node.node, metadata={"kind": "critic"})
                graph.add_conditional_edges(
                    name, node.route(route), sorted(set(targets) | {node.judged_name})
                )
                continue
            if isinstance(node, (Human, Node)):
                graph.add_node(
                    name,
                    node.node,
                    metadata={"kind": "human" if isinstance(node, Human) else "function"},
                )
            else:
                graph.add_node(name, _nested_node(node, sub_run), metadata={"kind": "swarm"})
            graph.add_conditional_edges(name, route, targets)
        for join in swarm.joins:
            gate, ready = _join_gate(swarm, join)
            graph.add_node(_gate(join), gate, metadata={"kind": "join"})
            graph.add_conditional_edges(_gate(join), ready, [join, END])
        for entry in swarm.entries:
            graph.add_edge(START, entry)
    elif swarm.build_type is GraphBuildType.HANDOFF:
        agents = {n: a for n, a in swarm.nodes.items() if isinstance(a, Agent)}
        for name, agent in agents.items():
            tools = [
                _handoff_tool(agents[e.target])
                for e in swarm.edges
                if e.source == name and e.kind == "handoff"
            ]
            runtime = AgentRuntime(agent, graph_tools=tools)
            runtimes[name] = runtime
            graph.add_node(name, runtime.llm_node, metadata={"kind": "agent"})
            graph.add_node(
                runtime.tools_node, runtime.tools_node_fn, metadata={"kind": "tools", "agent": name}
            )
            graph.add_conditional_edges(
                name, runtime.route_after_llm(END), [runtime.tools_node, END]
            )
            graph.add_conditional_edges(
                runtime.tools_node,
                runtime.route_after_tools,
                sorted({name} | runtime.handoff_targets),
            )
        root = swarm.root

        def start(state: SwarmState) -> str:
            active = state.get("active_agent")
            return active if active in agents else str(root)

        graph.add_conditional_edges(START, start, sorted(agents))
    else:  # TEAM / HYBRID: members are delegate tools of the leader
        leader = swarm.nodes[str(swarm.root)]
        assert isinstance(leader, Agent)
        members = [n for n in swarm.nodes if n != swarm.root]
        handoffs = [e for e in swarm.edges if e.kind == "handoff"]
        tools = []
        for member in members:
            node = swarm.nodes[member]
            if isinstance(node, Agent) and swarm.build_type is GraphBuildType.HYBRID and handoffs:
                reach, frontier = {member}, [member]
                while frontier:
                    current = frontier.pop()
                    for e in handoffs:
                        if e.source == current and e.target not in reach:
                            reach.add(e.target)
                            frontier.append(e.target)
                group = [
                    swarm.nodes[m]
                    for m in members
                    if m in reach and isinstance(swarm.nodes[m], Agent)
                ]
                handoffs_here = [e for e in handoffs if e.source in reach]
                source: GraphSource = Swarm(
                    *group,
                    topology=[(e.source, e.target) for e in handoffs_here],
                    root_agent=member,
                    build_type=GraphBuildType.HANDOFF,
                    name=f"{member}_group",
                )
            else:
                source = as_source(node)
            tools.append(
                _delegate_tool(
                    leader.name, member, source, getattr(node, "description", ""), sub_run
                )
            )
        runtime = AgentRuntime(leader, graph_tools=tools)
        runtimes[leader.name] = runtime
        build_agent_nodes(graph, leader, runtime)
        graph.add_edge(START, leader.name)
    return BuiltGraph(graph=graph, entry=str(swarm.root), runtimes=runtimes, info=info)
