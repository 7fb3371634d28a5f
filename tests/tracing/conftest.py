"""Tracing tests: an SDK tracer provider with the in-memory exporter, and span-tree helpers."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aworld_graph import tracing


@dataclass
class Spans:
    """The finished spans of a test, read through the SDK's in-memory exporter."""

    exporter: InMemorySpanExporter
    provider: TracerProvider

    def all(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, [s.name for s in self.all()]
        return found[0]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        return next((s for s in self.all() if s.context.span_id == span.parent.span_id), None)

    def tree(self) -> list[str]:
        """Span names indented by depth, in start order (parents start before children)."""
        lines = []
        for span in self.all():
            depth, up = 0, self.parent(span)
            while up is not None:
                depth, up = depth + 1, self.parent(up)
            lines.append("  " * depth + span.name)
        return lines

    def clear(self) -> None:
        self.exporter.clear()


@pytest.fixture
def spans() -> Iterator[Spans]:
    """Tracing on (content off) into an in-memory exporter; off again after the test."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(tracer_provider=provider)
    try:
        yield Spans(exporter, provider)
    finally:
        tracing.disable()
        provider.shutdown()


def trajectory_rows(db: Path) -> list[dict[str, Any]]:
    """The rows of the store's ``trajectory`` view (the documented table for a run's steps)."""
    conn = sqlite3.connect(db)
    try:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            "SELECT thread_id, checkpoint_id, parent_checkpoint_id, step, source, nodes, error "
            "FROM trajectory ORDER BY step"
        ).fetchall()
    finally:
        conn.close()
    return [dict(r) for r in rows]
