"""Each broken workflow in ``broken/`` yields its own clear message: file, line, field and fix;
all problems of a file at once; and the CLI prints them without a traceback, exit code 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import aworld_graph.cli.spec  # noqa: F401  (registers validate / schema)
from aworld_graph.cli import main
from aworld_graph.errors import DefinitionError
from aworld_graph.spec import SpecError, load_workflow, validate_file

BROKEN = Path(__file__).parent / "broken"
ROOT = Path(__file__).resolve().parents[2]

# file -> (line, field, words in the message, words in the fix)
EXPECTED: dict[str, tuple[int, str, str, str]] = {
    "yaml_syntax": (5, "", "invalid YAML: while scanning a quoted scalar", "fix the syntax"),
    "empty": (1, "", "the file is empty", "name: my_workflow"),
    "not_a_mapping": (1, "", "a workflow file is a mapping", "name: my_workflow"),
    "unknown_key": (
        5,
        "nodes[0].sytem_prompt",
        "unknown key 'sytem_prompt' (did you mean 'system_prompt'?)",
        "allowed keys: name,",
    ),
    "unknown_top_key": (
        4,
        "topolgy",
        "unknown key 'topolgy' (did you mean 'topology'?)",
        "remove it or fix its spelling",
    ),
    "bad_build_type": (
        2,
        "build_type",
        "'workflw' is not allowed (did you mean 'workflow'?)",
        "workflow, handoff, team, hybrid",
    ),
    "unknown_node": (
        7,
        "topology[1]",
        "unknown node 'serchr' (did you mean 'searcher'?)",
        "searcher, triage",
    ),
    "duplicate_name": (
        5,
        "nodes[2]",
        "node name 'a' is used twice (first at line 3)",
        "its own name",
    ),
    "cycle": (6, "edges[0]", "workflow cycle a -> b -> a", "max_rounds: N"),
    "unreachable": (
        5,
        "nodes[2]",
        "node 'island' is unreachable from a",
        "reach it from the topology or an edge",
    ),
    "bad_condition": (
        7,
        "edges[0].when",
        "unknown name 'scor' (did you mean 'score'?)",
        "a condition reads answer",
    ),
    "condition_syntax": (
        7,
        "edges[0].when",
        "cannot parse condition 'score >>= 1'",
        "score >= 0.8",
    ),
    "missing_card": (
        4,
        "nodes[1]",
        "no node card named 'nonexistent_card' in tests/spec/broken/nodes",
        "cards found: broken_card",
    ),
    "missing_card_path": (
        4,
        "nodes[1].card",
        "card file 'cards/nope.yaml' not found",
        "relative to the workflow file",
    ),
    "wrong_type": (2, "max_steps", "expected an integer, got 'many'", "give an integer"),
    "missing_field": (
        4,
        "nodes[1].judges",
        "required field 'judges' is missing",
        "add `judges: ...`",
    ),
    "critic_both": (4, "nodes[1]", "exactly one of `scorer` or `system_prompt`", "LLM judge"),
    "unknown_tool": (
        5,
        "nodes[0].tools[0]",
        "unknown tool 'calculater' (did you mean 'calculator'?)",
        "built-in tool (calculator)",
    ),
    "bad_import": (7, "nodes[1].scorer", "module 'no_such_module_xyz'", "importable"),
    "missing_env": (
        2,
        "description",
        "environment variable SPEC_UNSET_VAR_XYZ is not set",
        "${SPEC_UNSET_VAR_XYZ:-default}",
    ),
    "inline_secret": (
        7,
        "nodes[0].model.llm_api_key",
        "an API key is never written",
        "llm_api_key_env: OPENAI_API_KEY",
    ),
    "missing_key_env": (
        6,
        "nodes[0].model.llm_api_key_env",
        "SPEC_UNSET_KEY_XYZ (named for the API key) is not set",
        "export SPEC_UNSET_KEY_XYZ",
    ),
    "pair_in_workflow": (
        6,
        "topology[0]",
        "'a -> b' is a pair, but a workflow topology lists steps",
        "build_type: handoff",
    ),
    "name_in_handoff": (
        8,
        "topology[1]",
        "'b' is not a pair; handoff topology entries are pairs",
        "'a -> b' or [a, b]",
    ),
    "small_parallel": (
        7,
        "topology[1].parallel",
        "needs at least 2 item(s)",
        "add the missing items",
    ),
    "unknown_mcp_server": (
        8,
        "nodes[0].mcp_servers[0]",
        "unknown MCP server 'envv' (did you mean 'env'?)",
        "servers in mcp_config: env",
    ),
    "no_mcp_config": (
        5,
        "nodes[0].mcp_servers",
        "lists MCP servers but no mcp_config applies",
        "add mcp_config",
    ),
    "bad_mcp_config": (
        2,
        "mcp_config",
        "mcpServers.env: neither 'command' nor 'url' is given",
        '"command"',
    ),
    "team_handoff": (
        11,
        "topology[2]",
        "members of a TEAM cannot hand off to each other",
        "build_type: hybrid",
    ),
    "unknown_root": (
        3,
        "root_agent",
        "unknown node 'triag' (did you mean 'triage'?)",
        "triage, writer",
    ),
    "bad_kind": (
        3,
        "nodes[0].kind",
        "kind 'agnet' is unknown (did you mean 'agent'?)",
        "agent, critic, human",
    ),
    "duplicate_key": (4, "name", "key 'name' appears twice (lines 1 and 4)", "keep one"),
    "bad_threshold": (4, "nodes[1].threshold", "1.5 is out of range", "less than or equal to 1"),
    "reserved_name": (3, "nodes[0].name", "'a:b' uses a reserved form", "rename"),
    "human_in_handoff": (
        5,
        "nodes[1]",
        "a handoff swarm holds agents only, since control passes between them in one conversation and a Human cannot take a turn in it",
        "build_type: team or hybrid",
    ),
    "unknown_judged": (4, "nodes[1].judges", "unknown judged node 'ghost'", "a, check"),
    "self_include": (
        4,
        "nodes[1].workflow",
        "'self_include.yaml' includes itself",
        "remove this reference",
    ),
    "not_a_node": (4, "nodes[1]", "5 is not a node", "kind: agent | critic"),
    "missing_nodes": (1, "nodes", "a workflow needs at least one node", "card names"),
}


@pytest.fixture(autouse=True)
def _in_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def test_every_broken_file_is_listed() -> None:
    files = {p.stem for p in BROKEN.glob("*.yaml")} - {"broken_card", "many_problems"}
    assert files == set(EXPECTED)
    assert len(EXPECTED) >= 20


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_file_has_its_own_clear_message(name: str) -> None:
    line, field, message, fix = EXPECTED[name]
    path = BROKEN / f"{name}.yaml"
    with pytest.raises(SpecError) as info:
        load_workflow(path)
    problems = info.value.problems
    assert len(problems) == 1, "\n".join(map(str, problems))
    problem = problems[0]
    assert (problem.file, problem.line, problem.field) == (
        f"tests/spec/broken/{name}.yaml",
        line,
        field,
    )
    assert message in problem.message and fix in problem.fix
    assert isinstance(info.value, DefinitionError) and str(problem) in str(info.value)


def test_a_broken_card_is_reported_in_the_card_file() -> None:
    problems = validate_file(BROKEN / "broken_card.yaml")
    assert [str(p) for p in problems] == [
        "tests/spec/broken/nodes/broken_card.yaml:4: max_stepz: unknown key 'max_stepz' (did you "
        "mean 'max_steps'?); fix: remove it or fix its spelling; allowed keys: name, description, "
        "version, parent, score, operator, kind, system_prompt, tools, mcp_servers, mcp_config, "
        "model, max_steps, tool_choice, demos"
    ]


def test_every_problem_is_reported_at_once() -> None:
    problems = validate_file(BROKEN / "many_problems.yaml")
    assert [(p.line, p.field) for p in problems] == [
        (6, "nodes[0].max_step"),
        (9, "nodes[1].tools[0]"),
        (11, "topology[2]"),
        (13, "edges[0].when"),
        (13, "edges[0]"),  # b -> a closes a cycle with the topology's a -> b
    ]
    assert "did you mean 'max_steps'" in problems[0].message
    assert "only len(x), lower(x), number(x) may be called" in problems[3].message


def test_cli_prints_every_problem_without_a_traceback() -> None:
    runner = CliRunner()
    for name in sorted(EXPECTED):
        result = runner.invoke(main, ["validate", str(BROKEN / f"{name}.yaml")])
        assert result.exit_code == 1, (name, result.output)
        assert (
            "Traceback" not in result.output
            and result.exception is None
            or isinstance(result.exception, SystemExit)
        )
        assert EXPECTED[name][2] in result.output
        assert "1 problem(s); 1 of 1 file(s) failed" in result.output


def test_cli_validates_a_directory_and_says_ok_per_file() -> None:
    result = CliRunner().invoke(main, ["validate", "workflows", "nodes"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "OK workflows/math.yaml" in lines and "OK nodes/solver.yaml" in lines
    assert all(line.startswith("OK ") for line in lines)
    mixed = CliRunner().invoke(
        main, ["validate", "workflows/math.yaml", str(BROKEN / "cycle.yaml")]
    )
    assert mixed.exit_code == 1 and "OK workflows/math.yaml" in mixed.output


def test_run_of_a_broken_workflow_is_a_one_line_cli_error() -> None:
    result = CliRunner().invoke(main, ["run", str(BROKEN / "cycle.yaml"), "--input", "x"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "workflow cycle a -> b -> a" in result.output


def test_one_pass_reports_problems_a_broken_header_or_card_used_to_hide(tmp_path: Path) -> None:
    """A bad build_type used to hide the topology's names; a bad key hid the same card's tools."""
    path = tmp_path / "multi.yaml"
    path.write_text(
        "name: multi\n"
        "build_type: workflw\n"
        "nodes:\n"
        "  - kind: agent\n"
        "    name: solver\n"
        "    sytem_prompt: Solve it.\n"
        "    tools: [calculater]\n"
        "topology: [solver, helpr]\n"
    )
    problems = validate_file(path)
    assert [(p.line, p.field) for p in problems] == [
        (2, "build_type"),
        (6, "nodes[0].sytem_prompt"),
        (7, "nodes[0].tools[0]"),
        (8, "topology[1]"),
    ]
    assert "unknown tool 'calculater'" in problems[2].message
    assert "unknown node 'helpr'" in problems[3].message


def test_a_team_without_root_agent_is_a_warning_naming_its_leader(tmp_path: Path) -> None:
    path = tmp_path / "crew.yaml"
    body = "nodes: [{kind: agent, name: boss}, {kind: agent, name: helper}]\n"
    path.write_text("name: crew\nbuild_type: team\n" + body)
    (warning,) = validate_file(path)
    assert warning.warning and (warning.line, warning.field) == (2, "build_type")
    assert "no root_agent: 'boss' leads the team because it comes first" in str(warning)
    assert "fix: name the leader with `root_agent: boss`" in str(warning)
    assert load_workflow(path).root == "boss"  # a warning does not stop the load
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "warning: no root_agent" in result.output and "(1 warning(s))" in result.output
    path.write_text("name: crew\nbuild_type: team\nroot_agent: boss\n" + body)
    assert validate_file(path) == []
