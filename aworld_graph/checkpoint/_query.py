"""Building the ``list()`` query, and turning decode failures into clear errors."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import get_checkpoint_id

from ..errors import AWorldGraphError, ConfigError, RuntimeFailure

__all__ = ["decoding", "where_clause"]

_FILTER_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@contextmanager
def decoding(path: Path) -> Iterator[None]:
    """Values that cannot be decoded mean a damaged file: say so, naming it."""
    try:
        yield
    except AWorldGraphError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        raise RuntimeFailure(
            f"checkpoint database {path} holds a value that cannot be decoded "
            f"({type(exc).__name__}: {exc}); the file may be damaged. Check it with "
            f"`sqlite3 {path} 'PRAGMA integrity_check'`, then restore a backup or move it aside"
        ) from exc


def where_clause(
    config: RunnableConfig | None,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
) -> tuple[str, list[Any]]:
    """``WHERE`` clause and parameters selecting checkpoints for ``list()``.

    Metadata filter keys must be plain identifiers; values are always bound parameters
    (the JSON path too), so nothing from a filter is spliced into the SQL text — unlike the
    key handling behind CVE-2025-67644 in LangGraph's own SQLite saver.
    """
    clauses: list[str] = []
    params: list[Any] = []
    if config is not None:
        conf = config["configurable"]
        clauses.append("thread_id = ?")
        params.append(str(conf["thread_id"]))
        if (ns := conf.get("checkpoint_ns")) is not None:
            clauses.append("checkpoint_ns = ?")
            params.append(ns)
        if checkpoint_id := get_checkpoint_id(config):
            clauses.append("checkpoint_id = ?")
            params.append(checkpoint_id)
    for key, value in (filter or {}).items():
        if not isinstance(key, str) or not _FILTER_KEY.match(key):
            raise ConfigError(
                f"invalid metadata filter key {key!r}: use a plain identifier (letters, "
                "digits and '_', not starting with a digit)"
            )
        path = f'$."{key}"'
        if value is None:
            clauses.append("json_extract(metadata, ?) IS NULL")
            params.append(path)
        elif isinstance(value, bool):
            clauses.append("json_extract(metadata, ?) = ?")
            params.extend((path, int(value)))
        elif isinstance(value, (int, float, str)):
            clauses.append("json_extract(metadata, ?) = ?")
            params.extend((path, value))
        else:
            clauses.append("json_extract(metadata, ?) = json(?)")
            params.extend((path, _json_text(value)))
    if before is not None and (before_id := get_checkpoint_id(before)):
        clauses.append("checkpoint_id < ?")
        params.append(before_id)
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


def _json_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)
