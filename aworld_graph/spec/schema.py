"""JSON Schemas of the two file kinds, generated from the models (shipped in ``schemas/``).

Editors pick them up from the first line of a file::

    # yaml-language-server: $schema=../aworld_graph/schemas/workflow.schema.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter

from .models import NodeCard, WorkflowSpec
from .writer import SCHEMA_DIR

__all__ = ["SCHEMA_DIR", "json_schema", "schema_text", "write_schemas"]

Kind = Literal["workflow", "node"]
_TITLES = {
    "workflow": "aworld-graph workflow (workflows/*.yaml)",
    "node": "aworld-graph node card (nodes/*.yaml)",
}


def json_schema(kind: Kind = "workflow") -> dict[str, Any]:
    """The JSON Schema of a workflow file or of a node card file."""
    if kind == "workflow":
        body = WorkflowSpec.model_json_schema(by_alias=True)
    elif kind == "node":
        body = TypeAdapter(NodeCard).json_schema(by_alias=True)
    else:
        raise ValueError(f"kind must be 'workflow' or 'node', got {kind!r}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **body,
        "title": _TITLES[kind],
    }


def schema_text(kind: Kind = "workflow") -> str:
    """:func:`json_schema` as the text of the shipped file."""
    return json.dumps(json_schema(kind), indent=2, ensure_ascii=False) + "\n"


def write_schemas(directory: str | Path = SCHEMA_DIR) -> list[Path]:
    """Write ``workflow.schema.json`` and ``node.schema.json`` into ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in ("workflow", "node"):
        path = directory / f"{kind}.schema.json"
        path.write_text(schema_text(kind), encoding="utf-8")
        written.append(path)
    return written
