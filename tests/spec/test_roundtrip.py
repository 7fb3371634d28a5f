"""Swarm -> YAML -> Swarm is lossless: for every shipped workflow and for Python-built swarms."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import (
    Agent,
    AgentConfig,
    Critic,
    DefinitionError,
    Human,
    HybridSwarm,
    Node,
    Swarm,
    Tool,
    edge,
)
from aworld_graph.examples import contains_number
from aworld_graph.spec import dump_workflow, load_workflow, swarm_to_yaml
from tests.spec import helpers

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "workflows").glob("*.yaml"))


def _plain(value: Any) -> Any:
    if isinstance(value, Tool):
        return ("tool", value.name, value.fn.__module__, value.fn.__qualname__)
    if isinstance(value, AgentConfig):
        return dataclasses.asdict(value)
    if isinstance(value, Swarm):
        return describe(value)
    if isinstance(value, Agent | Critic | Human | Node):
        return {
            "type": type(value).__name__,
            **{
                f.name: _plain(value.judged_name if f.name == "judges" else getattr(value, f.name))
                for f in dataclasses.fields(value)
                if f.name not in ("model", "tool_provider", "agent")
            },
        }
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if callable(value):
        return ("callable", value.__module__, value.__qualname__)
    return value


def describe(swarm: Swarm) -> dict[str, Any]:
    """Everything that makes a swarm what it is, as plain data."""

    def edges(items: list[Any]) -> list[Any]:
        return [
            (e.source, e.target, e.kind, e.condition.text if e.condition else None, e.max_rounds)
            for e in items
        ]

    known = swarm.info.get("cards", {})
    cards = {  # a node without card fields is version 1 with no lineage
        name: {key: known.get(name, {}).get(key, 1 if key == "version" else None)
               for key in ("version", "parent", "score", "operator", "llm_api_key_env")}
        for name, node in swarm.nodes.items()
        if not isinstance(node, Swarm)
    }
    return {
        "name": swarm.name,
        "description": swarm.description,
        "build_type": swarm.build_type.value,
        "root": swarm.root,
        "entries": swarm.entries,
        "max_steps": swarm.max_steps,
        "joins": swarm.joins,
        "edges": edges(swarm.edges),
        "declared": edges(swarm.declared_edges),
        "nodes": {name: _plain(node) for name, node in swarm.nodes.items()},
        "version": swarm.info.get("workflow_version", 1),
        "cards": cards,
    }


def roundtrip(swarm: Swarm, tmp_path: Path) -> Swarm:
    text = swarm_to_yaml(swarm)
    path = tmp_path / "again.yaml"
    path.write_text(text)
    again = load_workflow(path)
    assert swarm_to_yaml(again) == text  # a fixed point: writing it again changes nothing
    return again


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_workflow_round_trips(path: Path, tmp_path: Path) -> None:
    swarm = load_workflow(path)
    assert describe(roundtrip(swarm, tmp_path)) == describe(swarm)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_dump_to_a_directory_writes_cards_and_round_trips(path: Path, tmp_path: Path) -> None:
    swarm = load_workflow(path)
    files = dump_workflow(swarm, tmp_path / "out")
    workflow = files[0]
    assert workflow == tmp_path / "out" / "workflows" / f"{swarm.name}.yaml"
    assert {f.name for f in files[1:]} == {f"{n}.yaml" for n in swarm.nodes}
    assert workflow.read_text().startswith("# yaml-language-server: $schema=")
    assert describe(load_workflow(workflow)) == describe(swarm)


def test_python_swarm_with_every_kind_of_node_round_trips(tmp_path: Path) -> None:
    writer = Agent(
        name="writer",
        system_prompt="Write.\nBriefly.",
        description="writes",
        tools=[helpers.shout, helpers.word_count],
        conf=AgentConfig(llm_base_url="http://127.0.0.1:9/v1", llm_model_name="m", llm_temperature=0.3,
                         max_retries=1, timeout=5.0, params={"max_tokens": 64}),
        max_steps=3,
        demos=[{"input": "hi", "output": "HI"}],
    )
    critic = Critic(name="critic", judges=writer, scorer=contains_number, threshold=0.5, max_rounds=2)
    judge = Critic(name="judge", judges="critic_target", system_prompt="Grade it.", threshold=0.9)
    inner = Swarm(Agent(name="critic_target"), judge, name="inner", description="nested")
    counter = Node(name="count", fn=helpers.count_words, description="counts")
    human = Human(name="review", prompt="OK?")
    done, redo = Agent(name="done"), Agent(name="redo")
    swarm = Swarm(
        writer, critic, counter, inner, human, done, redo,
        topology=[writer, critic, [counter, (inner,)], human],
        edges=[
            edge(human, done, 'lower(context.review) == "yes"'),
            edge(human, redo, helpers.is_math),
            edge(redo, human, max_rounds=2),
        ],
        max_steps=30,
        name="everything",
        description="all node kinds",
    )
    again = roundtrip(swarm, tmp_path)
    assert describe(again) == describe(swarm)
    assert again.nodes["writer"].tools[0] is helpers.shout


def test_handoff_and_hybrid_pairs_round_trip(tmp_path: Path) -> None:
    lead, a, b = Agent(name="lead"), Agent(name="a"), Agent(name="b")
    swarm = HybridSwarm(lead, a, b, topology=[(lead, a), (lead, b), (a, b)], root_agent=lead)
    assert describe(roundtrip(swarm, tmp_path)) == describe(swarm)
    assert "- lead -> a" in swarm_to_yaml(swarm) or "lead -> a" in swarm_to_yaml(swarm)


def test_secrets_are_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEC_TEST_KEY", "sk-secret-value-123")
    path = tmp_path / "keyed.yaml"
    path.write_text(
        "name: keyed\nnodes:\n  - kind: agent\n    name: a\n"
        "    model: {llm_model_name: gpt-x, llm_api_key_env: SPEC_TEST_KEY}\n    mcp_servers: [s]\n"
        "mcp_config:\n  mcpServers:\n    s:\n      command: python\n"
        "      env: {TOKEN: '${SPEC_TEST_KEY}'}\n"
    )
    swarm = load_workflow(path)
    assert swarm.nodes["a"].conf.llm_api_key == "sk-secret-value-123"
    text = swarm_to_yaml(swarm)
    assert "sk-secret" not in text
    assert "llm_api_key_env: SPEC_TEST_KEY" in text and "${SPEC_TEST_KEY}" in text
    python_made = Agent(name="b", conf=AgentConfig(llm_api_key="sk-typed-in-code"))
    assert "sk-typed" not in swarm_to_yaml(Swarm(python_made))


def test_a_lambda_cannot_be_written() -> None:
    swarm = Swarm(Agent(name="a"), Agent(name="b"), topology=["a"], edges=[edge("a", "b", lambda s: True)])
    with pytest.raises(DefinitionError, match="lambda or local function"):
        swarm_to_yaml(swarm)
