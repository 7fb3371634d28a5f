"""``aworld-graph validate`` / ``schema``: check workflow and card files, print the JSON Schemas."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import click

from ._app import main

__all__ = ["schema", "validate"]


def _files(paths: tuple[str, ...]) -> tuple[list[Path], list[Path]]:
    """The files to check, and the directories given that hold no YAML file."""
    found: list[Path] = []
    empty: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            inside = sorted(
                p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()
            )
            found += inside
            if not inside:
                empty.append(path)
        else:
            found.append(path)
    return found, empty


@main.command()
@click.argument("paths", nargs=-1, required=True)
def validate(paths: tuple[str, ...]) -> None:
    """Check workflow and node-card files (or every .yaml under a directory).

    Prints `OK FILE` for each good file and every problem of the others (file:line: field:
    what is wrong; fix: what to do). Exits 1 when any file has a problem; warnings (a file
    that loads, but likely not as meant) are printed and do not fail it.
    """
    from ..spec import validate_file
    from ..spec.source import display_path

    files, empty = _files(paths)
    for path in empty:
        click.echo(
            f"{display_path(path)}: a directory with no .yaml or .yml file in it; fix: pass "
            "workflow or node-card files, or a directory that holds them"
        )
    bad = total = len(empty)
    for path in files:
        problems = validate_file(path)
        for problem in problems:
            click.echo(str(problem))
        errors = [p for p in problems if not p.warning]
        if errors:
            bad += 1
            total += len(errors)
        else:
            warned = len(problems)
            click.echo(f"OK {display_path(path)}" + (f" ({warned} warning(s))" if warned else ""))
    if bad:
        click.echo(
            f"{total} problem(s); {bad} of {len(files) + len(empty)} file(s) failed", err=True
        )
        sys.exit(1)


@main.command()
@click.option(
    "--kind",
    type=click.Choice(["workflow", "node"]),
    default="workflow",
    show_default=True,
    help="workflow: workflows/*.yaml; node: node cards (nodes/*.yaml).",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write to FILE."
)
def schema(kind: Literal["workflow", "node"], output: str | None) -> None:  # click.Choice
    """Print the JSON Schema of workflow files or of node cards (for editors and CI)."""
    from ..spec.schema import schema_text

    text = schema_text(kind)
    if output:
        Path(output).write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
