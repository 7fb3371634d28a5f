"""The shipped JSON Schemas match the models, editors are pointed at them, and the shipped files
validate against them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import aworld_graph.cli.spec  # noqa: F401  (registers validate / schema)
from aworld_graph.cli import main
from aworld_graph.spec import json_schema
from aworld_graph.spec.schema import SCHEMA_DIR, schema_text

ROOT = Path(__file__).resolve().parents[2]
FILES = {
    "workflow": sorted((ROOT / "workflows").glob("*.yaml")),
    "node": sorted((ROOT / "nodes").glob("*.yaml")),
}


@pytest.mark.parametrize("kind", ["workflow", "node"])
def test_shipped_schema_files_are_up_to_date(kind: str) -> None:
    shipped = (SCHEMA_DIR / f"{kind}.schema.json").read_text()
    assert shipped == schema_text(kind), (  # type: ignore[arg-type]
        "regenerate: python -c 'from aworld_graph.spec import write_schemas; write_schemas()'"
    )


@pytest.mark.parametrize("kind", ["workflow", "node"])
def test_shipped_files_carry_the_schema_hint_and_validate(kind: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json_schema(kind))  # type: ignore[arg-type]
    assert FILES[kind]
    for path in FILES[kind]:
        first = path.read_text().splitlines()[0]
        assert first == f"# yaml-language-server: $schema=../aworld_graph/schemas/{kind}.schema.json"
        assert (path.parent / first.split("=", 1)[1]).resolve() == SCHEMA_DIR / f"{kind}.schema.json"
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert errors == [], path


def test_schema_catches_what_editors_should_flag() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json_schema("workflow"))
    bad = {"name": "x", "build_type": "workflw", "nodes": [{"kind": "agent", "name": "a", "tols": []}]}
    assert len(list(validator.iter_errors(bad))) == 2


def test_cli_schema_prints_or_writes(tmp_path: Path) -> None:
    runner = CliRunner()
    printed = runner.invoke(main, ["schema", "--kind", "node"])
    assert printed.exit_code == 0 and json.loads(printed.output)["title"].startswith("aworld-graph node card")
    out = tmp_path / "w.json"
    written = runner.invoke(main, ["schema", "-o", str(out)])
    assert written.exit_code == 0 and out.read_text() == schema_text("workflow")
    assert runner.invoke(main, ["schema", "--kind", "nope"]).exit_code == 2
