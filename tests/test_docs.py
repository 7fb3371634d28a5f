"""Every code block of README.md and docs/*.md runs or is checked here, or says why it cannot.

A block that cannot run as a test (it needs a GPU, a cluster of machines, a trained model)
is marked by an HTML comment on the line before its fence, ``<!-- illustration: REASON -->``;
every other block of a code language is exercised:

* ``python`` blocks of ``docs/`` run as written, each in a fresh interpreter, in a scratch
  directory holding copies of ``workflows/`` and ``nodes/``, with the model at a loopback
  fake OpenAI server (``LLM_BASE_URL``). ``docs/server.md``'s client examples talk to a real
  ``create_app`` server on 127.0.0.1 serving the shipped workflows (the one change to the
  code: its port for 2024). README's ``python`` blocks run in ``tests/test_readme.py``.
* ``bash`` blocks: each command must be one this test can check, and is checked:
  ``aworld-graph …`` parses against the CLI (every subcommand, option and value it names
  exists), ``pip install`` names extras that ``pyproject.toml`` defines, ``ray start``
  parses against Ray's CLI, ``bash FILE`` names a file of the repository, ``python -m M``
  an importable module, and ``sqlite3`` and ``psql`` queries run on a fresh SQLite store
  (whose tables and view have the same columns as on PostgreSQL).
* ``yaml`` blocks load as workflows, ``json`` blocks as task sets, ``sql`` blocks run on a
  fresh store.
* ``text`` is for what is not code: diagrams, prompts, command synopses.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import click
import pytest

from tests.fake_openai import FakeOpenAI, text

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE = {"python", "bash", "yaml", "json", "sql"}
"""Fence languages of blocks that run or are checked (unless marked as illustrations)."""
LANGUAGES = CODE | {"text"}
_ILLUSTRATION = re.compile(r"<!--\s*illustration:(.*?)-->")
_FENCE = re.compile(r"^```(.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: Path
    line: int
    """The line of its opening fence (1-based)."""
    language: str
    code: str
    illustration: str | None
    """The reason given in the ``<!-- illustration: … -->`` comment before it, if any."""

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        start = i
        end = next(j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```")
        before = lines[start - 1].strip() if start > 0 else ""
        marked = _ILLUSTRATION.fullmatch(before)
        found.append(
            Block(
                page=page,
                line=start + 1,
                language=match.group(1).strip(),
                code="\n".join(lines[start + 1 : end]) + "\n",
                illustration=marked.group(1).strip() if marked else None,
            )
        )
        i = end + 1
    return found


BLOCKS = [block for page in PAGES for block in _blocks(page)]
RUN = [b for b in BLOCKS if b.language in CODE and b.illustration is None]


def _of(language: str, *, docs_only: bool = False) -> list[Any]:
    return [
        pytest.param(b, id=b.name)
        for b in RUN
        if b.language == language and not (docs_only and b.page.name == "README.md")
    ]


def test_every_block_names_its_language_and_every_illustration_says_why() -> None:
    problems = []
    for block in BLOCKS:
        if block.language not in LANGUAGES:
            problems.append(
                f"{block.name}: fence language {block.language!r}; use one of "
                f"{sorted(LANGUAGES)} (text for what is not code)"
            )
        if block.illustration is not None:
            if block.language not in CODE:
                problems.append(
                    f"{block.name}: a {block.language} block needs no illustration mark"
                )
            if len(block.illustration.split()) < 3:
                problems.append(f"{block.name}: the illustration mark must say why it cannot run")
    for page in PAGES:  # a mark that is not right before a fence marks nothing
        lines = page.read_text().splitlines()
        for n, line in enumerate(lines[:-1]):
            if _ILLUSTRATION.search(line) and not lines[n + 1].startswith("```"):
                problems.append(
                    f"{page.relative_to(ROOT)}:{n + 1}: illustration mark not before a fence"
                )
    assert problems == []
    assert len(RUN) >= 25  # the pages' code, not a parser that found nothing


# ---------------------------------------------------------------- python blocks of docs/


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A directory to run an example in: the shipped workflows and node cards, no store."""
    for folder in ("workflows", "nodes"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


def _served(scratch: Path) -> Iterator[str]:
    """``http://127.0.0.1:PORT``: a real server of the shipped workflows over a fresh store."""
    import uvicorn

    from aworld_graph import load_workflow
    from aworld_graph.server import Assistants, create_app

    targets = [str(p) for p in sorted((scratch / "workflows").glob("*.yaml"))]
    assistants, problems = Assistants.load(targets, load_workflow)
    assert problems == []
    app = create_app(assistants, store=str(scratch / "served.db"), api_key="")
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive(), "the server did not stop"


def _example_env(model_url: str) -> dict[str, str]:
    drop = ("AWORLD_GRAPH_", "LLM_", "OTEL_", "RAY_ADDRESS")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(LLM_BASE_URL=model_url, LLM_MODEL_NAME="fake-model", PYTHONPATH=str(ROOT))
    env["AWORLD_GRAPH_BLOCK_REMOTE"] = "1"  # a model call anywhere but 127.0.0.1 fails
    return env


@pytest.mark.timeout(240)
@pytest.mark.parametrize("block", _of("python", docs_only=True))
def test_docs_python_block_runs_as_written(
    block: Block, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = block.code
    with FakeOpenAI() as model:
        model.default = text("a fine answer")
        monkeypatch.setenv("LLM_BASE_URL", model.url)  # the served workflows' model
        monkeypatch.setenv("LLM_MODEL_NAME", "fake-model")
        served = _served(scratch) if "127.0.0.1:2024" in code else None
        try:
            if served is not None:
                code = code.replace("http://127.0.0.1:2024", next(served))
            (scratch / "example.py").write_text(code)
            run = subprocess.run(
                [sys.executable, "example.py"],
                cwd=scratch,
                env=_example_env(model.url),
                capture_output=True,
                text=True,
                timeout=200,
            )
        finally:
            if served is not None:
                served.close()
    assert run.returncode == 0, f"{block.name}\n{run.stdout[-3000:]}\n{run.stderr[-5000:]}"
    assert run.stderr == "", f"{block.name} wrote to stderr (a warning?):\n{run.stderr[-5000:]}"
    if "print(" in code:
        assert run.stdout.strip(), f"{block.name} printed nothing"


# ---------------------------------------------------------------- bash blocks


def _commands(code: str) -> list[list[str]]:
    """The commands of a shell block: lines joined at ``\\``, comments dropped, ``&&`` split,
    leading ``NAME=value`` assignments dropped."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            command, words = words[:cut], words[cut + 1 :]
            while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", command[0]):
                command = command[1:]
            if command:
                commands.append(command)
    return commands


def _parse_cli(group: click.Group, prog: str, args: list[str]) -> None:
    """Parses ``args`` as the command line of ``group`` would, without running it."""
    parent = click.Context(group, info_name=prog)
    command: click.Command = group
    name, rest = prog, list(args)
    while isinstance(command, click.Group):
        assert rest, f"{prog}: a subcommand is missing"
        name = rest.pop(0)
        sub = command.get_command(parent, name)
        assert sub is not None, f"{prog} has no command {name!r}"
        if isinstance(sub, click.Group):
            parent = click.Context(sub, info_name=name, parent=parent)
        command = sub
    try:
        command.make_context(name, rest, parent=parent)
    except click.ClickException as exc:
        raise AssertionError(f"{prog} {shlex.join(args)}: {exc.format_message()}") from None


def _extras(spec: str) -> set[str]:
    match = re.fullmatch(r"(?:\.|aworld-graph)\[([a-z,]+)\]", spec)
    assert match, f"pip install {spec}: only the project itself with its extras is checked"
    return set(match.group(1).split(","))


def _run_sql(sql: str, tmp: Path) -> None:
    """Runs ``sql`` on a fresh SQLite store's tables and view (named parameters bound)."""
    from aworld_graph import TrajectorySaver

    db = tmp / "fresh.db"
    with TrajectorySaver(db) as saver:
        saver.get_tuple({"configurable": {"thread_id": "t1", "checkpoint_ns": ""}})
    with sqlite3.connect(db) as conn:
        params = {name: "x" for name in re.findall(r"(?<!:):([a-z_]+)", sql)}
        conn.execute(sql, params).fetchall()


def _check(command: list[str], tmp: Path) -> None:
    program, args = command[0], command[1:]
    if program == "aworld-graph":
        from aworld_graph.cli import main

        _parse_cli(main, program, args)
    elif program == "pip":
        assert args[0] == "install", command
        defined = set(
            tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        )
        named = set().union(*(_extras(a) for a in args[1:] if not a.startswith("-")))
        assert named <= defined, (
            f"pip install names extras {sorted(named - defined)} that pyproject.toml lacks"
        )
    elif program == "ray":
        scripts = pytest.importorskip(
            "ray.scripts.scripts", reason="the ray extra is not installed"
        )
        _parse_cli(scripts.cli, program, args)
    elif program == "export":
        assert all(re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", a) for a in args), command
    elif program == "bash":
        assert (ROOT / args[0]).is_file(), command
    elif program == "python" and args[:1] == ["-m"]:
        assert find_spec(args[1]) is not None, f"no module {args[1]} for {command}"
    elif program == "sqlite3":
        _run_sql(args[1], tmp)
    elif program == "psql":  # the same view and columns as on SQLite
        _run_sql(args[args.index("-c") + 1], tmp)
    else:
        raise AssertionError(
            f"{shlex.join(command)}: not a command this test can check; run it in a test, or "
            "mark the block <!-- illustration: why it cannot run -->"
        )


@pytest.mark.parametrize("block", _of("bash"))
def test_bash_block_commands_are_real(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked in a directory that holds the repository's files (linked) and an empty
    stand-in for each data file a command names that is the user's (``inputs.jsonl``)."""
    here = tmp_path / "cwd"
    here.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".git", "checkpoints"):  # checkpoints/: the runs' stand-ins
            (here / entry.name).symlink_to(entry)
    monkeypatch.chdir(here)
    commands = _commands(block.code)
    assert commands, block.name
    for command in commands:
        for word in command:
            stand_in = here / word
            if re.fullmatch(r"[\w./-]+\.(jsonl|json|db)", word) and not stand_in.exists():
                assert stand_in.parent.resolve().is_relative_to(here), word  # not in the repository
                stand_in.parent.mkdir(parents=True, exist_ok=True)
                stand_in.touch()
        _check(command, tmp_path)


# ---------------------------------------------------------------- yaml, json, sql blocks


@pytest.mark.parametrize("block", _of("yaml"))
def test_yaml_block_is_a_workflow_that_loads(block: Block, scratch: Path) -> None:
    from aworld_graph import Swarm, load_workflow

    path = scratch / "workflows" / "from-docs.yaml"
    path.write_text(block.code)
    assert isinstance(load_workflow(path), Swarm)


@pytest.mark.parametrize("block", _of("json"))
def test_json_block_is_a_task_set(block: Block, tmp_path: Path) -> None:
    from aworld_graph.meta import load_tasks

    path = tmp_path / "tasks.jsonl"
    path.write_text(block.code)
    lines = [line for line in block.code.splitlines() if line.strip()]
    tasks = load_tasks(path)
    assert len(tasks.items) == len(lines) - ('"taskset"' in lines[0]) >= 1


@pytest.mark.parametrize("block", _of("sql"))
def test_sql_block_runs_on_a_store(block: Block, tmp_path: Path) -> None:
    _run_sql(block.code, tmp_path)
