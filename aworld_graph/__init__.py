"""aworld-graph: multi-agent systems as LangGraph state graphs."""

from __future__ import annotations

__all__: list[str] = []
