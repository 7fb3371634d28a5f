"""The bundled environment's tools as plain functions: safe arithmetic and rooted files."""

from __future__ import annotations

from pathlib import Path

import pytest

from aworld_graph.environment._calculator import CalculatorError, calculate
from aworld_graph.environment._files import FileAccessError, RootedFiles

from .conftest import make_root


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
    with pytest.raises(CalculatorError, match=reason.replace("(", r"\(").replace("*", r"\*")):
        calculate(expression)


@pytest.fixture
def files(tmp_path: Path) -> RootedFiles:
    return RootedFiles.at(make_root(tmp_path))


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
def test_paths_outside_the_root_are_refused(files: RootedFiles, path: str) -> None:
    for call in (files.read_file, files.list_files):
        with pytest.raises(FileAccessError, match="outside the environment root"):
            call(path)
    with pytest.raises(FileAccessError, match="outside the environment root"):
        files.search_files("secret", path)


def test_absolute_path_inside_root_and_inner_links_work(files: RootedFiles) -> None:
    assert files.read_file(str(files.root / "hello.txt")).startswith("hello world")
    assert files.read_file("link_in").startswith("hello world")
    assert files.read_file("docs/../hello.txt").startswith("hello world")


def test_list_read_search(files: RootedFiles) -> None:
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


def test_read_errors(files: RootedFiles, tmp_path: Path) -> None:
    with pytest.raises(FileAccessError, match="is a directory"):
        files.read_file("docs")
    with pytest.raises(FileAccessError, match="is missing"):
        files.read_file("nope.txt")
    (files.root / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(FileAccessError, match="binary"):
        files.read_file("blob.bin")
    with pytest.raises(FileAccessError, match="not a directory"):
        RootedFiles.at(tmp_path / "missing")


@pytest.mark.parametrize(
    "pattern",
    ["(a|aa)+$", "(aa|a)+!b", r"(\w|\w\w)+$", "(?:a|aa)+x{41}"],
)
def test_a_catastrophic_pattern_is_stopped_with_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pattern: str
) -> None:
    import aworld_graph.environment._files as files_module

    monkeypatch.setattr(files_module, "SEARCH_SECONDS", 0.05)
    (tmp_path / "long.txt").write_text(
        "ok\n" + "a" * 40 + "x" * 40 + "aaaaaaaaaaaaaaaaaaaaaaaaaaaa!\n"
    )
    files = RootedFiles.at(tmp_path)
    with pytest.raises(FileAccessError) as info:
        files.search_files(pattern)
    message = str(info.value)
    assert message.startswith(f"search_files stopped: pattern {pattern!r} took longer than 0.05 s")
    assert "(at long.txt:2)" in message and "search for plain text" in message
    assert files.search_files("ok") == "long.txt:1: ok"  # the next search works
