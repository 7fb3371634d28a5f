"""``export()``: runs from the database → rows of one format → a file.

The file kind follows the suffix: ``.jsonl`` (one row a line, streamed), ``.json`` (one
array), ``.parquet`` (needs ``pyarrow``). Every row goes through
:func:`~aworld_graph.checkpoint.strip_secrets` before it is written; duplicates are dropped;
OpenAI samples that break the format's rules are left out and counted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import IO, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..checkpoint import strip_secrets
from ..errors import ConfigError
from .formats import FORMATS, dedup_key
from .runs import Run, RunFilter, list_threads, load_run, open_saver
from .validate import validate_openai

__all__ = ["ExportReport", "export", "write_rows"]

PROGRESS_MIN_RUNS = 100
"""Exports of at least this many runs show a progress bar (when ``progress`` is ``None``)."""


@dataclass(kw_only=True)
class ExportReport:
    """What an export wrote."""

    format: str
    path: Path
    runs: int = 0
    """Runs that passed the filter."""
    rows: int = 0
    """Rows written."""
    duplicates: int = 0
    """Rows dropped as duplicates."""
    invalid: int = 0
    """Rows dropped by the validator (OpenAI format)."""
    problems: list[str] = field(default_factory=list)
    """The first few validator messages, for the user."""

    def summary(self) -> str:
        extra = []
        if self.duplicates:
            extra.append(f"{self.duplicates} duplicates dropped")
        if self.invalid:
            extra.append(f"{self.invalid} invalid samples left out")
        tail = f" ({'; '.join(extra)})" if extra else ""
        return f"wrote {self.rows} {self.format} rows from {self.runs} runs to {self.path}{tail}"


def _json_default(value: Any) -> Any:
    return str(value)


def write_rows(rows: Iterable[dict[str, Any]], out: str | PathLike[str]) -> int:
    """Write ``rows`` to ``out`` as JSONL, a JSON array or Parquet (by suffix); the count."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError(
                f"writing {path} needs pyarrow: pip install pyarrow (or the 'train' extra), "
                "or export to .jsonl"
            ) from None
        table_rows = list(rows)
        pq.write_table(pa.Table.from_pylist(table_rows), path)
        return len(table_rows)
    count = 0
    with open(path, "w", encoding="utf-8") as fh:
        if suffix == ".json":
            fh.write("[")
        for row in rows:
            text = json.dumps(row, ensure_ascii=False, default=_json_default)
            if suffix == ".json":
                fh.write(("," if count else "") + "\n" + text)
            else:
                fh.write(text + "\n")
            count += 1
        if suffix == ".json":
            fh.write("\n]\n")
    return count


class _Progress:
    """A rich progress bar on stderr, or nothing."""

    def __init__(self, total: int, show: bool, label: str, stream: IO[str] | None) -> None:
        self.bar: Any = None
        if show:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self.bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(file=stream or sys.stderr),
            )
            self.task = self.bar.add_task(label, total=total)
            self.bar.start()

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.advance(self.task)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def export(
    format: str,
    out: str | PathLike[str],
    *,
    db: str | PathLike[str] | BaseCheckpointSaver[Any] | None = None,
    filter: RunFilter | None = None,
    per: str = "episode",
    dedup: bool = True,
    progress: bool | None = None,
    progress_stream: IO[str] | None = None,
) -> ExportReport:
    """Export the runs of ``db`` that pass ``filter`` to ``out`` in ``format``.

    Args:
        format: One of :data:`~aworld_graph.export.formats.FORMATS`.
        out: Output file; ``.jsonl``, ``.json`` or ``.parquet``.
        db: Database file, saver, or ``None`` for the default database.
        filter: Which runs (threads, success, reward, agent, version, time range).
        per: ``episode`` (one chat sample per run) or ``turn`` (one per agent turn), for
            the chat formats.
        dedup: Drop rows equal to an earlier one.
        progress: Show a progress bar; ``None``: when there are 100 runs or more.
    """
    if format not in FORMATS:
        raise ConfigError(f"unknown export format {format!r}; use one of {', '.join(FORMATS)}")
    if per not in ("episode", "turn"):
        raise ConfigError(f"per={per!r}: use 'episode' or 'turn'")
    f = filter or RunFilter()
    saver = open_saver(db)
    try:
        return _export(format, out, saver, f, per, dedup, progress, progress_stream)
    finally:
        if saver is not db:
            close = getattr(saver, "close", None)
            if close is not None:
                close()


def _export(
    format: str,
    out: str | PathLike[str],
    saver: BaseCheckpointSaver[Any],
    f: RunFilter,
    per: str,
    dedup: bool,
    progress: bool | None,
    progress_stream: IO[str] | None,
) -> ExportReport:
    threads = list_threads(saver, f)
    report = ExportReport(format=format, path=Path(out))
    bar = _Progress(
        len(threads),
        progress if progress is not None else len(threads) >= PROGRESS_MIN_RUNS,
        f"export {format}",
        progress_stream,
    )

    def runs() -> Iterator[Run]:
        for info in threads:
            run = load_run(saver, info)
            bar.advance()
            if run is not None and run.matches(f):
                report.runs += 1
                yield run

    def rows() -> Iterator[dict[str, Any]]:
        seen: set[str] = set()
        for row in FORMATS[format](runs(), per=per, agent=f.agent):
            row = strip_secrets(row)
            if format == "openai":
                problems = validate_openai(row)
                if problems:
                    report.invalid += 1
                    if len(report.problems) < 5:
                        report.problems.append("; ".join(problems[:3]))
                    continue
            if dedup:
                key = dedup_key(format, row)
                if key in seen:
                    report.duplicates += 1
                    continue
                seen.add(key)
            yield row

    try:
        report.rows = write_rows(rows(), out)
    finally:
        bar.close()
    return report
