"""``aworld-graph export``: stored runs → training data (a thin layer over
:func:`aworld_graph.export.export`)."""

from __future__ import annotations

import click

from ._app import db_option, main

__all__ = ["export_command"]

_FORMATS = ("aworld", "openai", "sharegpt", "trl-sft", "trl-dpo", "trl-reward", "verl")


@main.command("export")
@click.option(
    "--format",
    "-f",
    "fmt",
    type=click.Choice(_FORMATS),
    required=True,
    help="aworld (trajectory items), openai (chat fine-tuning), sharegpt, trl-sft, "
    "trl-dpo (best vs worst run of a task), trl-reward (prompt + reward rows), verl (Parquet).",
)
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(dir_okay=False),
    help="Output file: .jsonl, .json or .parquet (Parquet needs pyarrow).",
)
@db_option()
@click.option("--thread", "threads", multiple=True, help="Only this thread (repeatable).")
@click.option(
    "--finished", is_flag=True, help="Only runs that finished with an answer, whatever their score."
)
@click.option(
    "--success-only",
    is_flag=True,
    help="Only successful runs: finished with an answer and not scored 'fail' by a reward "
    "function (a run scored 0 is left out; --finished keeps it).",
)
@click.option("--min-reward", type=float, default=None, help="Only runs with at least this reward.")
@click.option("--agent", default=None, help="Only runs (and, per turn, turns) of this agent.")
@click.option("--workflow-version", default=None, help="Only runs of this workflow version.")
@click.option("--since", default=None, help="Only runs started at/after this ISO time (UTC).")
@click.option("--until", default=None, help="Only runs started at/before this ISO time (UTC).")
@click.option(
    "--per",
    type=click.Choice(["episode", "turn"]),
    default="episode",
    show_default=True,
    help="Chat formats: one sample per run, or one per agent turn.",
)
@click.option("--include-subruns", is_flag=True, help="Also export delegated members' runs.")
@click.option("--no-dedup", is_flag=True, help="Keep duplicate rows.")
@click.option(
    "--keep-unlabeled",
    is_flag=True,
    help="verl: also write prompts whose run has no ground truth (ground_truth null); "
    "by default they are left out and counted.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bar on stderr (default: on for 100 runs or more).",
)
def export_command(
    fmt: str,
    out: str,
    db: str | None,
    threads: tuple[str, ...],
    finished: bool,
    success_only: bool,
    min_reward: float | None,
    agent: str | None,
    workflow_version: str | None,
    since: str | None,
    until: str | None,
    per: str,
    include_subruns: bool,
    no_dedup: bool,
    keep_unlabeled: bool,
    progress: bool | None,
) -> None:
    """Export stored runs as training data (secrets stripped, duplicates dropped).

    \b
    Examples:
      aworld-graph export -f openai -o sft.jsonl --success-only
      aworld-graph export -f trl-dpo -o pairs.jsonl --min-reward 0
      aworld-graph export -f verl -o train.parquet --since 2025-01-01
    """
    from ..export import RunFilter, export

    report = export(
        fmt,
        out,
        db=db,
        filter=RunFilter(
            threads=threads,
            finished=finished,
            success_only=success_only,
            min_reward=min_reward,
            agent=agent,
            workflow_version=workflow_version,
            since=since,
            until=until,
            include_subruns=include_subruns,
        ),
        per=per,
        dedup=not no_dedup,
        keep_unlabeled=keep_unlabeled,
        progress=progress,
    )
    click.echo(report.summary())
    for problem in report.problems:
        click.echo(f"  left out: {problem}", err=True)
