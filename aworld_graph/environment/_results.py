"""From MCP wire results to what the model reads and what the trajectory keeps.

* Arguments are checked against the tool's ``inputSchema`` (JSON Schema, with ``jsonschema``)
  before a call is sent, so a model's mistake costs no round trip and gets a precise message.
* A ``CallToolResult`` becomes a :class:`~aworld_graph.tools.ToolOutcome`: text blocks joined for
  the model, structured content as JSON when there is no text, images and audio as a short note;
  the model's text is truncated with a note, the whole result is kept in ``ToolOutcome.result``:
  image, audio and binary-resource bytes with it (base64, as sent) up to
  :data:`MAX_KEPT_BYTES` decoded; larger ones are replaced by their size and SHA-256 (so a
  checkpoint is not inflated by a screenshot loop), marked ``"omitted": true``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

import jsonschema
import mcp_types
from jsonschema.exceptions import SchemaError

from ..tools import ToolOutcome, truncate_for_model

__all__ = ["ArgumentChecker", "error_outcome", "result_outcome"]

MAX_ARGUMENT_PROBLEMS = 8
"""At most this many schema problems are listed in one validation message."""


class ArgumentChecker:
    """Validates tool arguments against one tool's ``inputSchema``."""

    def __init__(self, schema: dict[str, Any] | None) -> None:
        self.schema: dict[str, Any] = schema or {"type": "object"}
        """The tool's input schema (an empty object schema when the server gave none)."""
        try:
            cls = jsonschema.validators.validator_for(self.schema)
            cls.check_schema(self.schema)
            self._validator: jsonschema.protocols.Validator | None = cls(self.schema)
        except SchemaError:
            self._validator = None  # the server's schema is broken: let the server judge

    def problems(self, arguments: Any) -> list[str]:
        """What is wrong with ``arguments``, one line per problem; empty when they are valid."""
        if not isinstance(arguments, dict):
            return [f"arguments must be a JSON object, got {type(arguments).__name__}"]
        if self._validator is None:
            return []
        found: list[str] = []
        for error in sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path)):
            where = ".".join(str(part) for part in error.absolute_path) or "(arguments)"
            found.append(f"{where}: {error.message}")
            if len(found) >= MAX_ARGUMENT_PROBLEMS:
                found.append("(more problems not shown)")
                break
        return found


def error_outcome(
    message: str, *, kind: str, server: str | None, started: float, now: float
) -> ToolOutcome:
    """A failed call: ``message`` for the model, ``{"error", "error_type"}`` for the trajectory."""
    return ToolOutcome(
        content=truncate_for_model(message),
        is_error=True,
        result={"error": message, "error_type": kind},
        server=server,
        duration_ms=(now - started) * 1000,
    )


def result_outcome(
    result: mcp_types.CallToolResult, *, label: str, server: str, started: float, now: float
) -> ToolOutcome:
    """Convert a tool's result; ``label`` (``server__tool``) names it in error text."""
    kept: list[dict[str, Any]] = []
    shown: list[str] = []
    for block in result.content:
        data = block.model_dump(by_alias=True, mode="json", exclude_none=True)
        if isinstance(block, mcp_types.TextContent):
            shown.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
            size = _keep_bytes(data, "data")
            shown.append(f"[{kind}: {block.mime_type}, {size} bytes; not shown as text]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                shown.append(resource.text)
            else:
                size = _keep_bytes(data["resource"], "blob")
                shown.append(
                    f"[resource {resource.uri}: {resource.mime_type or 'binary'}, {size} bytes]"
                )
        elif isinstance(block, mcp_types.ResourceLink):
            shown.append(f"[resource link: {block.uri}{f' ({block.name})' if block.name else ''}]")
        else:
            shown.append(json.dumps(data, ensure_ascii=False))
        kept.append(data)
    whole: dict[str, Any] = {"content": kept}
    if result.structured_content is not None:
        whole["structuredContent"] = result.structured_content
        if not any(isinstance(block, mcp_types.TextContent) for block in result.content):
            shown.insert(0, json.dumps(result.structured_content, ensure_ascii=False))
    if result.is_error:
        whole["isError"] = True
    text = "\n".join(shown)
    if result.is_error:
        text = f"Tool '{label}' reported an error: {text or '(no message)'}"
    elif not text:
        text = "(the tool returned no content)"
    return ToolOutcome(
        content=truncate_for_model(text),
        is_error=bool(result.is_error),
        result=whole,
        server=server,
        duration_ms=(now - started) * 1000,
    )


MAX_KEPT_BYTES = 1024 * 1024
"""Binary content up to this size (decoded) is kept in the trajectory with its bytes."""


def _keep_bytes(block: dict[str, Any], field: str) -> int:
    """Note the decoded size of ``block[field]`` (base64); drop the bytes when too large.

    Returns the size."""
    encoded = block.get(field) or ""
    try:
        raw = base64.b64decode(encoded, validate=False)
    except (binascii.Error, ValueError):
        raw = encoded.encode() if isinstance(encoded, str) else bytes(encoded)
    block["size_bytes"] = len(raw)
    if len(raw) > MAX_KEPT_BYTES:
        block.pop(field, None)
        block["sha256"] = hashlib.sha256(raw).hexdigest()
        block["omitted"] = True
    return len(raw)
