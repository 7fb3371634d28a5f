"""Loading: card lookup, ${VAR} substitution, model overrides, run metadata, plugins by path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aworld_graph import Agent, Critic, DefinitionError, Human, Node, Runners, Swarm
from aworld_graph.spec import SpecError, load_card, load_workflow, validate_file
from aworld_graph.testing import FunctionModel, ScriptedModel, tool_call
from tests.spec import helpers

ROOT = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_shipped_workflows_build_the_intended_topologies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    math = load_workflow("workflows/math.yaml")
    assert isinstance(math.nodes["answer_checker"], Critic) and math.nodes["solver"].tools[0].name == "calculator"
    assert math.info == {
        "workflow": "workflows/math.yaml",
        "workflow_version": 1,
        "cards": {
            name: {"version": 1, "parent": None, "score": None, "operator": None, "card": f"nodes/{name}.yaml"}
            for name in ("solver", "answer_checker")
        },
    }
    research = load_workflow(ROOT / "workflows" / "research.yaml")
    assert research.info["workflow"] == "workflows/research.yaml"  # relative to the cwd
    assert research.nodes["searcher"].mcp_servers == ["env"]
    assert research.nodes["searcher"].mcp_config["mcpServers"]["env"]["args"][-1] == "${AWORLD_ENV_ROOT:-.}"
    assert research.nodes["triage"].mcp_config is None
    assert load_workflow("workflows/analysis.yaml").joins == {
        "summarizer": ["market_analyst", "risk_analyst", "tech_analyst"]}
    assert load_workflow("workflows/team.yaml").root == "lead"
    assert isinstance(load_workflow("workflows/approval.yaml").nodes["approval"], Human)


def test_env_vars_fill_values_and_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEC_MODEL", "my-model")
    monkeypatch.setenv("SPEC_PROMPT", "Be brief.")
    path = write(tmp_path / "wf.yaml", """
name: vars
defaults: {llm_model_name: "${SPEC_MODEL}", llm_base_url: "${SPEC_URL:-http://127.0.0.1:9/v1}", llm_temperature: "0.5"}
nodes:
  - {kind: agent, name: a, system_prompt: "You help. ${SPEC_PROMPT}"}
  - {kind: agent, name: b, model: {llm_model_name: own-model}}
""")
    swarm = load_workflow(path)
    a, b = swarm.nodes["a"], swarm.nodes["b"]
    assert a.system_prompt == "You help. Be brief."
    assert (a.conf.llm_model_name, a.conf.llm_base_url, a.conf.llm_temperature) == ("my-model", "http://127.0.0.1:9/v1", 0.5)
    assert (b.conf.llm_model_name, b.conf.llm_base_url) == ("own-model", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("SPEC_MODEL")
    with pytest.raises(SpecError) as info:
        load_workflow(path)
    assert [str(p) for p in info.value.problems] == [
        f"{path}:3: defaults.llm_model_name: environment variable SPEC_MODEL is not set; fix: "
        "export SPEC_MODEL, or write ${SPEC_MODEL:-default} to give a default"
    ]


def test_api_key_comes_from_the_named_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEC_KEY", "sk-123456")
    path = write(tmp_path / "wf.yaml", "name: k\nnodes:\n  - {kind: agent, name: a, model: {llm_api_key_env: SPEC_KEY}}\n")
    agent = load_workflow(path).nodes["a"]
    assert agent.conf.llm_api_key == "sk-123456" and "sk-123456" not in repr(agent)


async def test_models_override_by_name_or_for_all(saver: Any) -> None:
    swarm = load_workflow(ROOT / "workflows" / "analysis.yaml", model=FunctionModel(lambda m, t: "same"),
                          models={"summarizer": FunctionModel(lambda m, t: "summary")})
    response = await Runners.run("x", swarm=swarm, checkpointer=saver)
    assert response.answer == "summary" and response.state["outputs"]["risk_analyst"] == "same"
    with pytest.raises(DefinitionError, match="'sumarizer', which is not an agent or critic"):
        load_workflow(ROOT / "workflows" / "analysis.yaml", models={"sumarizer": ScriptedModel([])})


def test_cards_by_name_scan_path_and_nested_workflow_file(tmp_path: Path) -> None:
    write(tmp_path / "nodes" / "first.yaml", "kind: agent\nname: First Agent\nversion: 3\nparent: first@2\nscore: 0.8\noperator: rewrite_prompt\n")
    write(tmp_path / "cards" / "second.yaml", "kind: human\nname: second\nprompt: OK?\n")
    write(tmp_path / "workflows" / "inner.yaml", "name: inner\nnodes:\n  - {kind: agent, name: deep}\n")
    path = write(tmp_path / "workflows" / "outer.yaml", """
name: outer
nodes:
  - First Agent
  - {card: ../cards/second.yaml}
  - {workflow: inner.yaml}
  - kind: workflow
    name: inline
    build_type: team
    nodes: [{kind: agent, name: boss}, {kind: agent, name: helper}]
""")
    swarm = load_workflow(path)
    assert list(swarm.nodes) == ["First Agent", "second", "inner", "inline"]
    assert isinstance(swarm.nodes["inner"], Swarm) and list(swarm.nodes["inner"].nodes) == ["deep"]
    assert swarm.nodes["inline"].build_type.value == "team" and swarm.nodes["inline"].root == "boss"
    meta = swarm.info["cards"]["First Agent"]
    assert (meta["version"], meta["parent"], meta["score"], meta["operator"]) == (3, "first@2", 0.8, "rewrite_prompt")


async def test_plugins_by_import_path(tmp_path: Path, saver: Any) -> None:
    path = write(tmp_path / "wf.yaml", """
name: plugins
nodes:
  - {kind: function, name: count, function: "tests.spec.helpers:count_words"}
  - {kind: agent, name: math, tools: ["tests.spec.helpers:shout", calculator]}
  - {kind: agent, name: chat}
  - {kind: critic, name: check, judges: chat, scorer: "tests.spec.helpers:long_enough"}
topology: [count]
edges:
  - {from: count, to: math, when: "tests.spec.helpers:is_math"}
  - {from: count, to: chat, when: "not number(outputs.count) > 5 and input != '1 + 1'"}
""")
    swarm = load_workflow(path, models={
        "math": ScriptedModel([tool_call("shout", {"text": "two"}), "TWO"]),
        "chat": FunctionModel(lambda m, t: "a fine reply here"),
    })
    assert isinstance(swarm.nodes["count"], Node) and swarm.nodes["count"].fn is helpers.count_words
    assert swarm.nodes["math"].tools[0] is helpers.shout and isinstance(swarm.nodes["check"], Critic)
    math = await Runners.run("1 + 1", swarm=swarm, checkpointer=saver)
    assert math.answer == "TWO"
    chat = await Runners.run("hello there", swarm=swarm, checkpointer=saver)
    assert chat.answer == "a fine reply here" and chat.state["rewards"][-1]["status"] == "pass"


def test_load_card_and_validate_a_card_file(tmp_path: Path) -> None:
    card = write(tmp_path / "solver.yaml", "kind: agent\nname: s\ntools: [calculator]\nmcp_servers: [env]\n")
    agent = load_card(card)
    assert isinstance(agent, Agent) and agent.mcp_servers == ["env"]  # its workflow gives mcp_config
    assert validate_file(card) == []
    bad = write(tmp_path / "nodes" / "bad.yaml", "name: s\n")
    assert [p.message for p in validate_file(bad)] == ["the card has no `kind`"]
    assert "add `kind: agent`" in validate_file(bad)[0].fix


def test_mcp_config_file_is_found_beside_the_workflow_and_written_back_relative(tmp_path: Path) -> None:
    from aworld_graph.spec import dump_workflow, swarm_to_yaml

    write(tmp_path / "project" / "mcp.yaml", "mcpServers:\n  env: {command: python, args: [-V]}\n")
    path = write(tmp_path / "project" / "workflows" / "wf.yaml", """
name: mcp_file
mcp_config: ../mcp.yaml
nodes:
  - {kind: agent, name: a, mcp_servers: [env]}
""")
    swarm = load_workflow(path)
    assert swarm.nodes["a"].mcp_config == str(tmp_path / "project" / "mcp.yaml")
    assert f"mcp_config: {tmp_path / 'project' / 'mcp.yaml'}" in swarm_to_yaml(swarm)
    out = dump_workflow(swarm, tmp_path / "project" / "copy")
    assert "mcp_config: ../../mcp.yaml" in out[0].read_text()
    assert load_workflow(out[0]).nodes["a"].mcp_config == swarm.nodes["a"].mcp_config


def test_an_unset_api_key_variable_in_defaults_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path / "wf.yaml", "name: d\ndefaults:\n  llm_api_key_env: SPEC_UNSET_KEY_XYZ\nnodes: [{kind: agent, name: a}]\n")
    assert [(p.line, p.field) for p in validate_file(path)] == [(3, "defaults.llm_api_key_env")]
