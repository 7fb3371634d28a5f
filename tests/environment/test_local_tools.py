"""The bundled environment's tools, called in process on the server ``build_server`` makes
(as an MCP client calls them): safe arithmetic and rooted files."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from aworld_graph.environment.server import build_server

from .conftest import make_root


def _call(server: Any, name: str, **arguments: Any) -> Any:
    """The tool's result (its structured value, else its text); a refusal raises ToolError."""
    result = asyncio.run(server.call_tool(name, arguments))
    if result.structured_content is not None:
        return result.structured_content["result"]
    return "".join(block.text for block in result.content)


def calculate(expression: str) -> Any:
    return _call(build_server("."), "calculator", expression=expression)


class ServedFiles:
    """The file tools of a server confined to ``root``."""

    def __init__(self, root: Path, search_seconds: float = 2.0) -> None:
        self.server = build_server(root, search_seconds=search_seconds)
        self.root = root.resolve()

    @classmethod
    def at(cls, root: Path, search_seconds: float = 2.0) -> ServedFiles:
        return cls(root, search_seconds)

    def read_file(self, path: str) -> str:
        return str(_call(self.server, "read_file", path=path))

    def list_files(self, path: str = ".") -> str:
        return str(_call(self.server, "list_files", path=path))

    def search_files(self, pattern: str, path: str = ".") -> str:
        return str(_call(self.server, "search_files", pattern=pattern, path=path))


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 * (3 + 4) ** 2", 98),
        ("-2 ** 2", -4),
        ("7 // 2 + 7 % 3", 4),
        ("1 / 4", 0.25),
        ("2 ** -2", 0.25),
        ("sqrt(16) + abs(-1)", 5.0),
        ("max(1, 5, 3) - min(4, 2)", 3),
        ("round(pi, 2)", 3.14),
        ("factorial(5)", 120),
        ("2 ** 4000 // 2 ** 3999", 2),
    ],
)
def test_calculator_computes(expression: str, value: float) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("__import__('os').system('true')", "is not available"),
        ("__import__('os')", "function '__import__' is not available"),
        ("(1).__class__", "Attribute is not allowed"),
        ("'a' * 3", "is not a number"),
        ("True + 1", "is not a number"),
        ("x + 1", "unknown name 'x'"),
        ("[1, 2]", "List is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("9 ** 9 ** 9", "makes a number of more than"),
        ("10 ** 5000", "makes a number of more than"),
        ("2.0 ** 100000", "exponent 100000 is too large"),
        ("factorial(10000)", "limited to arguments of at most 500"),
        ("1 / 0", "division by zero"),
        ("(-1) ** 0.5", "complex number"),
        ("1e308 * 10", "not a finite number"),
        ("1 +", "cannot parse"),
        ("-" * 100 + "1", "nests deeper"),
        ("1" * 2000, "the limit is 1000"),
        ("sqrt(x=4)", "positional arguments only"),
    ],
)
def test_calculator_refuses(expression: str, reason: str) -> None:
    with pytest.raises(ToolError, match=reason.replace("(", r"\(").replace("*", r"\*")):
        calculate(expression)


@pytest.fixture
def files(tmp_path: Path) -> ServedFiles:
    return ServedFiles.at(make_root(tmp_path))


@pytest.mark.parametrize(
    "path",
    [
        "..",
        "../outside/secret.txt",
        "docs/../../outside/secret.txt",
        "/etc/passwd",
        "link_out",
        "dir_out/secret.txt",
        "~",
    ],
)
def test_paths_outside_the_root_are_refused(files: ServedFiles, path: str) -> None:
    for call in (files.read_file, files.list_files):
        with pytest.raises(ToolError, match="outside the environment root"):
            call(path)
    with pytest.raises(ToolError, match="outside the environment root"):
        files.search_files("secret", path)


def test_absolute_path_inside_root_and_inner_links_work(files: ServedFiles) -> None:
    assert files.read_file(str(files.root / "hello.txt")).startswith("hello world")
    assert files.read_file("link_in").startswith("hello world")
    assert files.read_file("docs/../hello.txt").startswith("hello world")


def test_list_read_search(files: ServedFiles) -> None:
    listing = files.list_files(".").splitlines()
    assert "docs/" in listing and "hello.txt  (24 bytes)" in listing
    assert files.list_files("docs") == "notes.md  (26 bytes)"
    hits = files.search_files("answer")
    assert hits == "docs/notes.md:2: The answer is 42."
    assert "link_out" not in files.search_files(
        "secret"
    ) and "top secret" not in files.search_files("top")
    assert (
        files.search_files("notes")
        == "docs/notes.md: (file name matches)\ndocs/notes.md:1: # Notes"
    )
    assert files.search_files("[unclosed") == "no matches for '[unclosed' under '.'"


def test_read_errors(files: ServedFiles, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="is a directory"):
        files.read_file("docs")
    with pytest.raises(ToolError, match="is missing"):
        files.read_file("nope.txt")
    (files.root / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolError, match="binary"):
        files.read_file("blob.bin")
    with pytest.raises(ValueError, match="not a directory"):
        ServedFiles.at(tmp_path / "missing")


@pytest.mark.parametrize(
    "pattern",
    ["(a|aa)+$", "(aa|a)+!b", r"(\w|\w\w)+$", "(?:a|aa)+x{41}"],
)
def test_a_catastrophic_pattern_is_stopped_with_a_clear_error(tmp_path: Path, pattern: str) -> None:
    (tmp_path / "long.txt").write_text(
        "ok\n" + "a" * 40 + "x" * 40 + "aaaaaaaaaaaaaaaaaaaaaaaaaaaa!\n"
    )
    files = ServedFiles.at(tmp_path, search_seconds=0.05)  # 2 s by default: 4 cases, 8 s
    with pytest.raises(ToolError) as info:
        files.search_files(pattern)
    message = str(info.value)
    assert (
        f"search_files: search_files stopped: pattern {pattern!r} took longer than 0.05 s"
        in message
    )
    assert "(at long.txt:2)" in message and "search for plain text" in message
    assert files.search_files("ok") == "long.txt:1: ok"  # the next search works
