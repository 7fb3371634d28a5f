"""``export()``: runs from the database → rows of one format → a file.

The file kind follows the suffix: ``.jsonl`` (one row a line, streamed), ``.json`` (one
array), ``.parquet`` (needs ``pyarrow``). Every row goes through
:func:`~aworld_graph.checkpoint.strip_secrets` before it is written; duplicates are dropped;
OpenAI samples that break the format's rules are left out and counted.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import IO, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..checkpoint import strip_secrets
from ..errors import ConfigError
from ..secrets import is_secret_key, mentions_registered_secret
from .formats import FORMATS, dedup_key
from .runs import Run, RunFilter, list_threads, load_run, opened
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
    unlabeled: int = 0
    """verl rows left out because their run has no ground truth (``keep_unlabeled``)."""
    problems: list[str] = field(default_factory=list)
    """The first few validator messages, for the user."""

    def summary(self) -> str:
        extra = []
        if self.duplicates:
            extra.append(f"{self.duplicates} duplicates dropped")
        if self.invalid:
            extra.append(f"{self.invalid} invalid samples left out")
        if self.unlabeled:
            extra.append(
                f"{self.unlabeled} prompts without ground truth left out (keep them with "
                "--keep-unlabeled)"
            )
        tail = f" ({'; '.join(extra)})" if extra else ""
        return f"wrote {self.rows} {self.format} rows from {self.runs} runs to {self.path}{tail}"


def _json_default(value: Any) -> Any:
    return str(value)


def _dumps(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, default=_json_default)


# strip_secrets changes a row when a key names a credential, when an MCP server entry has an
# ``env``, or when a string value looks like a credential. Rows are checked for that on their
# JSON text first (values: looser than strip_secrets' own patterns; keys: exactly, through
# the parser, when a key-like word is there at all), so only rows that may hold a secret pay
# for the full walk.
_KEY_WORDS = (
    "api_key",
    "api-key",
    "apikey",
    "secret",
    "passw",
    "authoriz",
    "credential",
    "token",
    '"env"',
)
_COUNTERS = ('"prompt_tokens":', '"completion_tokens":', '"total_tokens":')
_SK = re.compile(r"sk-[a-z0-9_\-]{12,}")
_MCP_KEYS = frozenset({"command", "args", "url", "transport"})


def _secret_keys(text: str) -> bool:
    found = False

    def hook(pairs: list[tuple[str, Any]]) -> None:
        nonlocal found
        if found:
            return
        keys = [k for k, _ in pairs]
        if any(is_secret_key(k) for k in keys) or (
            "env" in keys and not _MCP_KEYS.isdisjoint(keys)
        ):
            found = True

    json.loads(text, object_pairs_hook=hook)
    return found


def _suspect(text: str) -> bool:
    low = text.lower()
    if "bearer" in low or "basic" in low or ("sk-" in low and _SK.search(low)):
        return True
    if mentions_registered_secret(low):
        return True
    for counter in _COUNTERS:
        low = low.replace(counter, "")
    # a tool call's "arguments" is JSON text: its keys are inside a string, not parsed here
    return any(word in low for word in _KEY_WORDS) and ('"arguments"' in low or _secret_keys(text))


def scrubbed(row: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``row`` without secrets (see :func:`~aworld_graph.checkpoint.strip_secrets`), and its
    JSON text."""
    text = _dumps(row)
    if _suspect(text):
        row = strip_secrets(row)
        text = _dumps(row)
    return row, text


def write_rows(rows: Iterable[dict[str, Any]], out: str | PathLike[str]) -> int:
    """Write ``rows`` (secrets stripped) to ``out`` as JSONL, a JSON array or Parquet (by
    suffix); returns the count."""
    return _write((scrubbed(row) for row in rows), Path(out))


def _write(rows: Iterable[tuple[dict[str, Any], str]], path: Path) -> int:
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
        table_rows = [row for row, _ in rows]
        pq.write_table(pa.Table.from_pylist(table_rows), path)
        return len(table_rows)
    count = 0
    with open(path, "w", encoding="utf-8") as fh:
        if suffix == ".json":
            fh.write("[")
        for _, text in rows:
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
    keep_unlabeled: bool = False,
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
        keep_unlabeled: ``verl``: also write prompts whose run has no ground truth (with
            ``reward_model.ground_truth`` null, which verl's rule rewards cannot score); by
            default they are left out and counted in :attr:`ExportReport.unlabeled`.
        progress: Show a progress bar; ``None``: when there are 100 runs or more.
    """
    if format not in FORMATS:
        raise ConfigError(f"unknown export format {format!r}; use one of {', '.join(FORMATS)}")
    if per not in ("episode", "turn"):
        raise ConfigError(f"per={per!r}: use 'episode' or 'turn'")
    f = filter or RunFilter()
    with opened(db) as saver:
        return _export(format, out, saver, f, per, dedup, keep_unlabeled, progress, progress_stream)


def _export(
    format: str,
    out: str | PathLike[str],
    saver: BaseCheckpointSaver[Any],
    f: RunFilter,
    per: str,
    dedup: bool,
    keep_unlabeled: bool,
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

    def rows() -> Iterator[tuple[dict[str, Any], str]]:
        seen: set[bytes] = set()
        for raw in FORMATS[format](runs(), per=per, agent=f.agent):
            if (
                format == "verl"
                and not keep_unlabeled
                and raw["reward_model"]["ground_truth"] is None
            ):
                report.unlabeled += 1
                continue
            row, text = scrubbed(raw)
            if format == "openai":
                problems = validate_openai(row)
                if problems:
                    report.invalid += 1
                    if len(report.problems) < 5:
                        report.problems.append("; ".join(problems[:3]))
                    continue
            if dedup:
                key = dedup_key(format, row, text)
                if key in seen:
                    report.duplicates += 1
                    continue
                seen.add(key)
            yield row, text

    try:
        report.rows = _write(rows(), Path(out))
    finally:
        bar.close()
    return report
