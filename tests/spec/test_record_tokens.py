"""``record_tokens`` in a card's ``model`` settings: off unless set, read into the agent's
``AgentConfig``, written back, in the JSON Schema, and a non-boolean names the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from aworld_graph import Agent, AgentConfig, Swarm
from aworld_graph.spec import SpecError, json_schema, load_workflow, swarm_to_yaml

CARD = """name: tokens
defaults: {llm_model_name: m}
nodes:
  - {kind: agent, name: a, model: {record_tokens: true}}
  - {kind: agent, name: b}
  - {kind: critic, name: c, judges: a, system_prompt: Judge., model: {record_tokens: "${SPEC_RT}"}}
"""


def test_a_card_with_record_tokens_true_records_and_round_trips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPEC_RT", "true")  # what a ${VAR} gives is text: true/false read as such
    path = tmp_path / "wf.yaml"
    path.write_text(CARD)
    swarm = load_workflow(path)
    a, b, c = (swarm.nodes[n] for n in "abc")
    assert a.conf.record_tokens is True and c.conf.record_tokens is True
    assert b.conf.record_tokens is False  # off unless the card sets it
    text = swarm_to_yaml(swarm)
    again_path = tmp_path / "again.yaml"
    again_path.write_text(text)
    again = load_workflow(again_path)
    assert [again.nodes[n].conf.record_tokens for n in "abc"] == [True, False, True]
    assert swarm_to_yaml(again) == text
    assert text.count("record_tokens: true") == 2 and "record_tokens: false" not in text


def test_a_python_agent_with_record_tokens_is_written_with_it(tmp_path: Path) -> None:
    swarm = Swarm(Agent(name="p", conf=AgentConfig(record_tokens=True)), name="py")
    path = tmp_path / "py.yaml"
    path.write_text(swarm_to_yaml(swarm))
    assert load_workflow(path).nodes["p"].conf.record_tokens is True


@pytest.mark.parametrize("value", ['"maybe"', "2", "[true]"])
def test_a_non_boolean_record_tokens_is_an_error_naming_the_field(
    value: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        f"name: bad\nnodes:\n  - {{kind: agent, name: a, model: {{record_tokens: {value}}}}}\n"
    )
    with pytest.raises(SpecError) as info:
        load_workflow(path)
    [problem] = [str(p) for p in info.value.problems]
    assert problem.startswith(f"{path}:3: nodes[0].model.record_tokens: expected true or false")
    assert "fix: give true or false" in problem


@pytest.mark.parametrize("kind", ["workflow", "node"])
def test_the_schema_has_record_tokens_as_a_boolean_off_by_default(kind: str) -> None:
    settings = json_schema(kind)["$defs"]["ModelSettings"]["properties"]  # type: ignore[arg-type]
    assert settings["record_tokens"]["type"] == "boolean"
    assert settings["record_tokens"]["default"] is False


def test_record_tokens_in_the_defaults_is_every_agents_unless_its_card_says_false(
    tmp_path: Path,
) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(
        "name: d\ndefaults: {record_tokens: true}\nnodes:\n  - {kind: agent, name: a}\n"
        "  - {kind: agent, name: b, model: {record_tokens: false}}\n"
    )
    swarm = load_workflow(path)
    assert (swarm.nodes["a"].conf.record_tokens, swarm.nodes["b"].conf.record_tokens) == (
        True,
        False,
    )
