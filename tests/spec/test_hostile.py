"""Hostile workflow files (issue 22): alias bombs, deep nesting, huge files and thousands of
unknown names are clear problems; ``validate`` on a directory without YAML says so; and
validating never runs the code a ``module:function`` reference names."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aworld_graph.cli import main
from aworld_graph.errors import ConfigError
from aworld_graph.spec import SpecError, load_workflow, validate_file

HEADER = "name: w\nbuild_type: workflow\n"


def _bomb(levels: int = 6) -> str:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


HOSTILE = {
    "alias_bomb": (HEADER + "nodes: [a]\n" + _bomb(), "alias bomb is refused"),
    "alias_bomb_in_a_value": (
        HEADER + "nodes:\n  - kind: agent\n    name: a\n    demos: " + "[" * 3 + "]" * 3 + "\n"
        "extra:\n" + "".join("  " + line + "\n" for line in _bomb(7).splitlines()),
        "alias bomb is refused",
    ),
    "deep_flow": (HEADER + "nodes: " + "[" * 5000 + "]" * 5000 + "\n", "nests more than 64"),
    "deep_mapping": (HEADER + "nodes: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", "nests more"),
    "deep_block": (
        HEADER + "".join("  " * i + f"k{i}:\n" for i in range(100)) + "  " * 100 + "v\n",
        "nests more than 64",
    ),
    "self_alias": (HEADER + "nodes: &n [a, *n]\n", "refers to a value that contains it"),
    "huge": (HEADER + "description: '" + "x" * (2 << 20) + "'\nnodes: [a]\n", "at most 1,048,576"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_file_is_one_clear_problem(tmp_path: Path, name: str) -> None:
    text, says = HOSTILE[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    problems = validate_file(path)
    assert len(problems) == 1 and says in problems[0].message, problems
    assert problems[0].fix
    with pytest.raises(SpecError, match=says):
        load_workflow(path)


def test_a_hostile_card_file_is_a_problem_of_the_card(tmp_path: Path) -> None:
    (tmp_path / "nodes").mkdir()
    (tmp_path / "nodes" / "bomb.yaml").write_text("kind: agent\nname: bomb\n" + _bomb())
    (tmp_path / "wf.yaml").write_text(HEADER + "nodes: [bomb]\n")
    problems = validate_file(tmp_path / "wf.yaml")
    assert [p.file.endswith("bomb.yaml") for p in problems] == [True]
    assert "alias bomb" in problems[0].message


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_a_hostile_mcp_config_file_is_a_config_error(tmp_path: Path, suffix: str) -> None:
    from aworld_graph.environment import load_mcp_config

    path = tmp_path / f"mcp{suffix}"
    path.write_text("mcpServers: {}\n" + _bomb())
    with pytest.raises(ConfigError, match="is refused: .*alias bomb"):
        load_mcp_config(path)


def test_thousands_of_unknown_names_read_each_card_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nodes").mkdir()
    for i in range(20):
        (tmp_path / "nodes" / f"c{i}.yaml").write_text(f"kind: agent\nname: card{i}\n")
    names = ", ".join(f"ghost{i}" for i in range(2000))
    (tmp_path / "wf.yaml").write_text(HEADER + f"nodes: [{names}]\n")
    parsed: list[int] = []  # reads of a card file
    real = Path.read_text

    def counting(self: Path, *args: Any, **kwargs: Any) -> str:
        if self.parent.name == "nodes":
            parsed.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counting)
    problems = validate_file(tmp_path / "wf.yaml")
    assert len(problems) == 2000
    assert problems[-1].message.startswith("no node card named 'ghost1999'")
    assert len(parsed) == 20  # each card once, not once per unknown name


@pytest.mark.parametrize("layout", ["named_like_a_file", "empty", "only_text", "nested_dirs"])
def test_validate_on_a_directory_without_yaml_fails_clearly(tmp_path: Path, layout: str) -> None:
    target = tmp_path / ("wf.yaml" if layout == "named_like_a_file" else "dir")
    target.mkdir()
    if layout == "only_text":
        (target / "notes.txt").write_text("hi")
    if layout == "nested_dirs":
        (target / "inner.yaml").mkdir()
    result = CliRunner().invoke(main, ["validate", str(target)])
    assert result.exit_code == 1, result.output
    assert "a directory with no .yaml or .yml file in it" in result.output
    assert "1 problem(s); 1 of 1 file(s) failed" in result.output


def test_validate_on_a_directory_checks_only_its_files(tmp_path: Path) -> None:
    (tmp_path / "sub.yaml").mkdir()
    (tmp_path / "ok.yaml").write_text(HEADER + "nodes:\n  - {kind: agent, name: a}\n")
    result = CliRunner().invoke(main, ["validate", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.count("OK ") == 1


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package whose import leaves a marker file (its __init__ and its module both do)."""
    pkg = tmp_path / "plugpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("open(__file__ + '.ran', 'w').close()\n")
    (pkg / "mod.py").write_text(
        "open(__file__ + '.ran', 'w').close()\n"
        "def pred(state):\n    return True\n"
        "def score(output, state):\n    return 1.0\n"
        "def step(state):\n    return {}\n"
        "def shout(text: str) -> str:\n    '''Shout.'''\n    return text.upper()\n"
        "if True:\n    def late(state):\n        return False\n"
        "from os.path import join as joined\n"
    )
    (pkg / "star.py").write_text("open(__file__ + '.ran', 'w').close()\nfrom os.path import *\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield pkg
    for name in [m for m in sys.modules if m == "plugpkg" or m.startswith("plugpkg.")]:
        del sys.modules[name]


def _plugin_workflow(tmp_path: Path, when: str, **refs: str) -> Path:
    tool = refs.get("tool", "calculator")
    scorer = refs.get("scorer", "contains_number")
    function = refs.get("function", "plugpkg.mod:step")
    nodes = [
        f"  - {{kind: agent, name: a, tools: [{tool}]}}",
        f"  - {{kind: critic, name: c, judges: a, scorer: {scorer}}}",
        f"  - {{kind: function, name: f, function: {function}}}",
    ]
    path = tmp_path / "wf.yaml"
    path.write_text(
        HEADER + "nodes:\n" + "\n".join(nodes) + "\ntopology: [a, c]\n"
        f"edges:\n  - {{from: c, to: f, when: '{when}'}}\n"
    )
    return path


def _ran(pkg: Path) -> list[str]:
    return sorted(p.name for p in pkg.glob("*.ran"))


@pytest.mark.parametrize(
    "refs",
    [
        {"when": "plugpkg.mod:pred"},
        {"when": "plugpkg.mod:late", "tool": "plugpkg.mod:shout"},
        {"when": "plugpkg.mod:joined", "scorer": "plugpkg.mod:score"},
    ],
)
def test_validate_checks_references_without_running_them(
    plugin: Path, tmp_path: Path, refs: dict[str, str]
) -> None:
    path = _plugin_workflow(tmp_path, **refs)
    assert validate_file(path) == []
    assert _ran(plugin) == []  # neither the package nor the module was imported
    load_workflow(path)  # loading imports them, as loading a plugin does
    assert _ran(plugin) == ["__init__.py.ran", "mod.py.ran"]


@pytest.mark.parametrize(
    ("refs", "says"),
    [
        ({"when": "plugpkg.mod:nope"}, "module 'plugpkg.mod' has no attribute 'nope'"),
        ({"when": "plugpkg.gone:pred"}, "cannot find module 'plugpkg.gone'"),
        ({"when": "plugpkg.mod:pred", "tool": "plugpkg.mod:whisper"}, "no attribute 'whisper'"),
        ({"when": "plugpkg.mod:pred", "function": "nosuchpkg.x:y"}, "cannot find module 'nosuch"),
    ],
)
def test_validate_reports_a_missing_name_without_running_anything(
    plugin: Path, tmp_path: Path, refs: dict[str, str], says: str
) -> None:
    problems = validate_file(_plugin_workflow(tmp_path, **refs))
    assert [says in p.message for p in problems] == [True], problems
    assert not problems[0].warning
    assert _ran(plugin) == []


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ("plugpkg.star:anything", "defines names dynamically (from ... import *)"),
        ("nspkg:anything", "is not Python source"),  # a namespace package: no source to read
    ],
)
def test_validate_says_when_a_name_can_only_be_checked_by_importing(
    plugin: Path, tmp_path: Path, when: str, says: str
) -> None:
    (tmp_path / "nspkg").mkdir()
    problems = validate_file(_plugin_workflow(tmp_path, when))
    assert [p.warning for p in problems] == [True] and says in problems[0].message
    assert "checked only when the workflow is loaded" in problems[0].message
    assert _ran(plugin) == []
    sys.modules.pop("nspkg", None)


@pytest.mark.parametrize(("when", "problems"), [("json:loads", 0), ("json:nope", 1)])
def test_an_imported_module_is_looked_at_as_it_is(
    plugin: Path, tmp_path: Path, when: str, problems: int
) -> None:
    assert "json" in sys.modules
    found = validate_file(_plugin_workflow(tmp_path, when))
    assert len(found) == problems and all("no attribute 'nope'" in p.message for p in found)
