"""``aworld-graph viz``: every format, to stdout or a file, and a stored run read back by thread."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import aworld_graph.cli.viz  # noqa: F401  (registers the command)
from aworld_graph import Runners
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.cli import main
from aworld_graph.viz import to_dot, to_mermaid

from .chromium import need_tool
from .swarms import handoff, report

REPORT = "tests.viz.swarms:report_swarm"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["viz", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_text_formats_go_to_stdout() -> None:
    code, out, _ = invoke("tests.viz.swarms:handoff_swarm")
    assert code == 0 and out == to_mermaid(handoff())
    code, out, _ = invoke(REPORT, "--format", "dot", "--tools")
    assert code == 0 and out == to_dot(report(), tools=True)
    code, out, _ = invoke("tests.viz.swarms:solo_agent", "-f", "mermaid")
    assert code == 0 and 'n_solo("solo (root)<br/>tools: lookup"):::agent' in out


def test_pictures_and_pages_go_to_files(tmp_path: Path) -> None:
    need_tool("dot")
    for name, magic in (("t.svg", b"<?xml"), ("t.png", b"\x89PNG"), ("t.html", b"<!DOCTYPE html>")):
        code, _, err = invoke(REPORT, "-o", str(tmp_path / name))  # format from the suffix
        assert code == 0 and (tmp_path / name).read_bytes().startswith(magic), err
        assert f"wrote {tmp_path / name}" in err
    code, out, _ = invoke(REPORT, "--format", "svg")
    assert code == 0 and '<g id="n_planner" class="node agent root">' in out


def test_html_with_a_stored_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with TrajectorySaver(db) as saver:
        response = asyncio.run(
            Runners.run("go", swarm=report(), checkpointer=saver, task_id="cli-run")
        )
    assert response.success
    out_file = tmp_path / "run.html"
    code, _, err = invoke(REPORT, "--run", "cli-run", "--db", str(db), "-o", str(out_file))
    assert code == 0, err
    page = out_file.read_text(encoding="utf-8")
    data = json.loads(
        re.search(
            r'<script type="application/json" id="viz-data">(.*?)</script>', page, re.S
        ).group(1)  # type: ignore[union-attr]
    )
    assert data["run"]["thread_id"] == "cli-run" and data["run"]["status"] == "finished"
    assert [s["name"] for s in data["run"]["steps"]][:2] == ["planner", "research"]
    assert len(data["run"]["steps"]) == 11 and data["run"]["usage"]["total_tokens"] > 0
    assert "</script><!--" not in page.split('id="viz-data">')[1].split("</script>")[0]


def test_errors_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(main, ["viz", REPORT, "--run", "nope", "--db", str(tmp_path / "none.db")])
    assert bad.exit_code == 1 and "no checkpoint database at" in bad.stderr
    (tmp_path / "empty.db").write_bytes(b"")  # an empty SQLite database
    bad = runner.invoke(main, ["viz", REPORT, "--run", "nope", "--db", str(tmp_path / "empty.db")])
    assert bad.exit_code == 1 and "no run with thread id 'nope'" in bad.stderr
    bad = runner.invoke(main, ["viz", REPORT, "--run", "x", "--format", "mermaid"])
    assert bad.exit_code == 2 and "only --format html" in bad.stderr
    bad = runner.invoke(main, ["viz", "tests.viz.swarms:nothing"])
    assert bad.exit_code == 1 and "has no attribute 'nothing'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_help_describes_every_option() -> None:
    text = CliRunner().invoke(main, ["viz", "--help"]).stdout
    for option in ("--format", "--run", "--db", "--tools", "--output"):
        assert option in text
    assert "mermaid|dot|svg|png|html" in text


@pytest.fixture(autouse=True)
def _cwd_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])


def test_workflow_files_are_targets() -> None:
    from .snapshot import DIR
    from .test_topology import WORKFLOWS

    for path in WORKFLOWS[:1]:  # the snapshot tests cover every workflow; this covers the CLI
        code, out, err = invoke(str(path.relative_to(Path.cwd())), "--format", "mermaid")
        assert code == 0 and out == (DIR / f"workflow_{path.stem}.mmd").read_text(), err
