"""``aworld-graph threads | history | prune | vacuum | migrate``: look after the checkpoint store.

A thin layer over :class:`aworld_graph.checkpoint.TrajectorySaver`.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..checkpoint import TransitionRow, open_store
from ._app import db_option, main

__all__ = [
    "threads_command",
    "history_command",
    "prune_command",
    "vacuum_command",
    "migrate_command",
]


@main.command("threads")
@db_option()
@click.option("--limit", "-n", type=int, default=50, show_default=True, help="Threads to show.")
def threads_command(db: str | None, limit: int) -> None:
    """List the threads (runs) in the database, most recent first, with the status of each
    (finished, error, interrupted, max_steps, running)."""
    from ..trajectory import thread_status

    with open_store(db, create=False) as saver:
        threads = saver.threads(limit)
        statuses = [thread_status(saver, t.thread_id) or "" for t in threads]
    if not threads:
        click.echo("no threads")
        return
    width = max(len("THREAD"), *(len(t.thread_id) for t in threads))
    status_width = max(len("STATUS"), *map(len, statuses))
    click.echo(
        f"{'THREAD':<{width}}  {'CHECKPOINTS':>11}  {'STEP':>5}  {'STATUS':<{status_width}}  "
        "LAST ACTIVITY"
    )
    for t, status in zip(threads, statuses, strict=True):
        step = "" if t.last_step is None else str(t.last_step)
        extra = f"  ({t.namespaces} namespaces)" if t.namespaces > 1 else ""
        click.echo(
            f"{t.thread_id:<{width}}  {t.checkpoints:>11}  {step:>5}  "
            f"{status:<{status_width}}  {t.last_at}{extra}"
        )


@main.command("history")
@click.argument("thread")
@db_option()
@click.option("--ns", default="", help="Checkpoint namespace (subgraph); root by default.")
def history_command(thread: str, db: str | None, ns: str) -> None:
    """Show THREAD's checkpoints as a tree: forks branch off where they started."""
    with open_store(db, create=False) as saver:
        rows = saver.transitions(thread, ns)
    if not rows:
        raise click.ClickException(
            f"no checkpoints for thread {thread!r}; see `aworld-graph threads`"
        )
    for line in history_lines(rows):
        click.echo(line)


def history_lines(rows: list[TransitionRow]) -> list[str]:
    """Text lines of the checkpoint tree (oldest first; later children are forks)."""
    # A failed step's row has no checkpoint: it is no node of the tree (its retry is not a fork).
    by_id = {r.checkpoint_id: r for r in rows if r.checkpoint_id is not None}
    children: dict[str | None, list[str]] = {}
    for checkpoint_id, r in by_id.items():
        parent = r.parent_checkpoint_id if r.parent_checkpoint_id in by_id else None
        children.setdefault(parent, []).append(checkpoint_id)
    lines: list[str] = []

    def walk(checkpoint_id: str | None, indent: str) -> None:
        while checkpoint_id is not None:
            lines.append(indent + "● " + _describe(by_id[checkpoint_id]))
            kids = children.get(checkpoint_id, [])
            for fork in kids[1:]:
                lines.append(indent + "├─╮ fork")
                walk(fork, indent + "│ ")
            checkpoint_id = kids[0] if kids else None

    roots = children.get(None, [])
    for i, root in enumerate(roots):
        if i:
            lines.append("")
        walk(root, "")
    return lines


def _describe(r: TransitionRow) -> str:
    step = "" if r.step is None else f"step {r.step:>3}  "
    parts = [f"{r.checkpoint_id}  {step}{r.source or '':<6}"]
    if r.nodes:
        parts.append("[" + ", ".join(r.nodes) + "]")
    if r.tool_names:
        parts.append("tools: " + ", ".join(r.tool_names))
    if r.llm_usage:
        parts.append(f"tokens: {r.llm_usage.get('total_tokens', 0)}")
    if r.reward is not None:
        parts.append(f"reward: {r.reward:g}")
    if r.duration_ms is not None:
        parts.append(f"+{r.duration_ms:.0f}ms")
    return "  ".join(parts)


@main.command("prune")
@click.argument("thread", required=False)
@db_option()
@click.option(
    "--keep", type=int, default=None, help="Keep this many newest checkpoints per thread."
)
@click.option(
    "--older-than",
    "older_than",
    type=float,
    default=None,
    help="Delete checkpoints older than this many days (each thread keeps its newest).",
)
@click.option(
    "--include-latest",
    is_flag=True,
    help="With --older-than: also delete a thread's newest checkpoint (drops old threads).",
)
def prune_command(
    thread: str | None,
    db: str | None,
    keep: int | None,
    older_than: float | None,
    include_latest: bool,
) -> None:
    """Delete old checkpoints of THREAD (or of every thread). Run `vacuum` to shrink the file."""
    if (keep is None) == (older_than is None):
        raise click.UsageError("give exactly one of --keep N or --older-than DAYS")
    threads = [thread] if thread else None
    with open_store(db, create=False) as saver:
        if keep is not None:
            deleted = saver.prune_keep_last(keep, threads)
        else:
            assert older_than is not None
            deleted = saver.prune_older_than(older_than, threads, keep_latest=not include_latest)
    scope = f"thread {thread}" if thread else "all threads"
    click.echo(f"deleted {deleted} checkpoint{'s' if deleted != 1 else ''} ({scope})")


@main.command("vacuum")
@db_option()
def vacuum_command(db: str | None) -> None:
    """Compact the database file (VACUUM) and truncate its write-ahead log."""
    with open_store(db, create=False) as saver:
        if saver.path is None:
            saver.vacuum()
            click.echo(f"{saver.label}: vacuumed")
            return
        before = _size(saver.path)
        saver.vacuum()
        after = _size(saver.path)
    click.echo(f"{saver.path}: {before / 1e6:.2f} MB -> {after / 1e6:.2f} MB")


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


@main.command("migrate")
@click.argument("db")
def migrate_command(db: str) -> None:
    """Bring a checkpoint store written by an older aworld-graph to this version's schema
    (the first write does it too). DB is a SQLite file or a postgresql:// URL."""
    from ..checkpoint import SCHEMA_VERSION

    with open_store(db, create=False) as saver:
        changed = saver.migrate()
        label = saver.label
    if changed:
        click.echo(f"{label}: migrated to schema {SCHEMA_VERSION}")
    else:
        click.echo(f"{label}: already at schema {SCHEMA_VERSION}")
