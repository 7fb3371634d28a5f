"""``aworld-graph fork``: branch a run at a checkpoint with edited state."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click

from ..errors import DefinitionError
from ._app import db_option, main
from .run import _recorded_source, _saver

__all__: list[str] = []


def _parse_set(items: tuple[str, ...]) -> dict[str, Any]:
    """``key=value`` pairs into a state update; ``context.x=1`` sets a context field. A text
    field (``answer``, ``status``…) takes the value as written; other values are JSON when they
    parse as JSON, else strings. Every problem (syntax, unknown field, wrong type) is reported
    at once."""
    from ..state import field_type, update_problems

    update: dict[str, Any] = {}
    problems: list[str] = []
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            problems.append(
                f"{item!r}: write KEY=VALUE, e.g. --set answer=42 or --set context.approved=true"
            )
            continue
        value: Any = raw
        if field_type(key) not in ((str, False), (str, True)):
            try:
                value = json.loads(raw)
            except ValueError:
                value = raw
        if key.startswith("context."):
            update.setdefault("context", {})[key.split(".", 1)[1]] = value
        elif key == "message":
            update.setdefault("messages", []).append({"role": "user", "content": str(value)})
        else:
            update[key] = value
    problems += update_problems({k: v for k, v in update.items() if k != "messages"})
    if problems:
        raise DefinitionError(
            f"--set: {len(problems)} problem(s): " + "; ".join(problems) + ". Nothing was forked"
        )
    return update


def _thread_of(saver: Any, checkpoint: str, where: str) -> str:
    thread: str | None = saver.thread_of(checkpoint)  # a TrajectorySaver
    if thread is None:
        raise DefinitionError(
            f"no checkpoint {checkpoint!r} in {where}; see `aworld-graph history THREAD`"
        )
    return thread


@main.command()
@click.argument("checkpoint")
@click.option(
    "--set",
    "sets",
    multiple=True,
    help="State edit KEY=VALUE (repeatable): answer=…, context.x=…, message=… (adds a user message).",
)
@click.option(
    "--new-thread",
    default=None,
    help="Write the fork into a new thread (a copy) instead of branching in place.",
)
@click.option(
    "--replace",
    is_flag=True,
    help="With --new-thread: delete the run already stored under that id first.",
)
@click.option(
    "--target",
    default=None,
    help="MODULE:ATTRIBUTE or workflow file, if the run did not record one.",
)
@db_option()
def fork(
    checkpoint: str,
    sets: tuple[str, ...],
    new_thread: str | None,
    replace: bool,
    target: str | None,
    db: str | None,
) -> None:
    """Branch a run at CHECKPOINT with edited state; continue it with `aworld-graph resume`."""
    from ..runner import Runners

    saver = _saver(db)
    thread = _thread_of(saver, checkpoint, saver.label)
    values = _parse_set(sets)  # every problem at once, before anything is written
    source = _recorded_source(saver, thread, target, saver.label)
    forked = asyncio.run(
        Runners.fork(
            thread,
            checkpoint,
            values=values,
            new_task_id=new_thread,
            swarm=source,
            checkpointer=saver,
            replace=replace,
        )
    )
    click.echo(
        f"forked {thread}@{checkpoint} into thread {forked}; continue with: aworld-graph resume {forked}"
    )
