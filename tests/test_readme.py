"""The README's Python examples run as written (the model is a loopback fake server)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.fake_openai import FakeOpenAI, text

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_examples_and_two_quick_start_commands() -> None:
    quick = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", quick, re.S)
    assert [c.strip().count("\n") for c in commands] == [0, 0]
    ci = (README.parent / ".ci" / "run").read_text()
    assert commands[1].strip() in ci
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAI() as server:
        server.default = text("a fine answer")
        monkeypatch.setenv("LLM_BASE_URL", server.url)
        monkeypatch.setenv("LLM_MODEL_NAME", "fake-model")
        exec(compile(BLOCKS[index], f"README.md example {index + 1}", "exec"), {"__name__": "readme_example"})
    assert capsys.readouterr().out.strip()


def test_every_cli_command_the_readme_names_exists() -> None:
    from click.testing import CliRunner

    from aworld_graph.cli import main

    named = set(re.findall(r"aworld-graph ([a-z]+)", README.read_text()))
    assert {"run", "resume", "fork", "viz", "export", "validate", "schema", "env", "model"} <= named
    for command in named:
        result = CliRunner().invoke(main, [command, "--help"])
        assert result.exit_code == 0, (command, result.output)
