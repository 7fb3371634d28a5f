"""``aworld-graph run`` / ``resume`` / ``model serve``: run agents and swarms from the shell."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import DefinitionError
from ._app import db_option, main

if TYPE_CHECKING:
    from ..graph import GraphSource
    from ..task import TaskResponse

__all__ = ["load_target"]


def load_target(target: str) -> GraphSource:
    """Import ``module:attribute`` and return it as a runnable agent or swarm."""
    from ..graph import as_source

    if target.endswith((".yaml", ".yml")):
        try:
            from ..spec import load_workflow
        except ImportError:
            raise DefinitionError(
                f"{target}: YAML workflows are not available in this version"
            ) from None
        return load_workflow(target)
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise DefinitionError(
            f"{target!r} is not MODULE:ATTRIBUTE (e.g. aworld_graph.examples:math_agent) or a workflow .yaml file"
        )
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DefinitionError(
            f"{target}: cannot import module {module_name!r} ({exc}); check the name and PYTHONPATH"
        ) from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise DefinitionError(
            f"{target}: module {module_name!r} has no attribute {attr!r}"
        ) from None
    return as_source(obj)


def _saver(db: str | None) -> Any:
    if db:
        os.environ["AWORLD_GRAPH_DB"] = db
    from ..runner import default_checkpointer

    return default_checkpointer()


def _report(response: TaskResponse, db_path: str, as_json: bool) -> None:
    if as_json:
        payload = {k: v for k, v in vars(response).items() if k != "state"}
        click.echo(json.dumps(payload, ensure_ascii=False, indent=2, default=str))
    else:
        click.echo(f"answer: {response.answer}")
        click.echo(response.summary())
        click.echo(
            f"stored: {db_path} (thread {response.thread_id}, checkpoint {response.checkpoint_id})"
        )
        if response.status in ("error", "interrupted", "max_steps"):
            click.echo(
                f"resume: aworld-graph resume {response.thread_id}"
                + (" --value TEXT" if response.interrupts else "")
            )
    if response.status == "error":
        sys.exit(1)


def _recorded_source(saver: Any, thread: str, target: str | None) -> tuple[Any, Any]:
    """``(agent, swarm)`` that run ``thread`` ran, from ``target`` or the run's own record."""
    latest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    if latest is None:
        raise DefinitionError(
            f"no run with thread id {thread!r} in {_db_path()}; list runs with `aworld-graph threads`"
        )
    target = target or latest.metadata.get("target") or latest.metadata.get("workflow")
    if not target:
        raise DefinitionError(
            f"run {thread} did not record what it ran; pass --target MODULE:ATTRIBUTE"
        )
    source = load_target(str(target))
    agent = getattr(source, "agent", None)
    return agent, None if agent is not None else source


def _db_path() -> str:
    from ..checkpoint import default_target

    return str(default_target())


@main.command()
@click.argument("target")
@click.option("--input", "-i", "input_", required=True, help="The task input (the user's request).")
@click.option("--task-id", default=None, help="Task id (= checkpoint thread); random by default.")
@click.option(
    "--max-steps",
    type=int,
    default=None,
    help="Upper bound on node executions (at least 1); wins over the workflow file's max_steps.",
)
@click.option(
    "--stream", is_flag=True, help="Print events (LLM calls, tool calls, tokens) as they happen."
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole response as JSON.")
@db_option()
def run(
    target: str,
    input_: str,
    task_id: str | None,
    max_steps: int | None,
    stream: bool,
    as_json: bool,
    db: str | None,
) -> None:
    """Run TARGET (MODULE:ATTRIBUTE of an Agent or Swarm, or a workflow .yaml) on --input."""
    from ..config import TaskConfig
    from ..runner import Runners
    from ..task import Task

    source = load_target(target)
    saver = _saver(db)
    conf = TaskConfig(stream=stream, max_steps=max_steps)  # wins over the file's max_steps
    agent = getattr(source, "agent", None)
    task = Task(
        input=input_,
        agent=agent,
        swarm=None if agent is not None else source,
        conf=conf,
        metadata={"target": target},
        **({"id": task_id} if task_id else {}),
    )

    async def go() -> TaskResponse:
        if not stream:
            return (await Runners.run_task(task, checkpointer=saver))[task.id]
        response: TaskResponse | None = None
        async for event in Runners.streaming_run(
            input_,
            agent=task.agent,
            swarm=task.swarm,
            task_id=task.id,
            conf=conf,
            checkpointer=saver,
        ):
            if event["event"] == "done":
                response = event["response"]
            elif event["event"] == "token":
                click.echo(event["text"], nl=False)
            elif event["event"] in ("llm_call", "tool_call", "handoff"):
                click.echo(
                    f"\n[{event['event']}] "
                    + json.dumps({k: v for k, v in event.items() if k != "event"}, default=str)[
                        :300
                    ]
                )
        assert response is not None
        return response

    _report(asyncio.run(go()), _db_path(), as_json)


@main.command()
@click.argument("thread")
@click.option("--value", default=None, help="Answer to a pending human-input request.")
@click.option(
    "--target",
    default=None,
    help="MODULE:ATTRIBUTE or workflow file, if the run did not record one.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole response as JSON.")
@db_option()
def resume(
    thread: str, value: str | None, target: str | None, as_json: bool, db: str | None
) -> None:
    """Continue run THREAD from its last checkpoint (work already saved is not redone)."""
    from ..runner import Runners

    saver = _saver(db)
    agent, swarm = _recorded_source(saver, thread, target)
    response = asyncio.run(
        Runners.resume(
            thread,
            agent=agent,
            swarm=swarm,
            value=value,
            checkpointer=saver,
        )
    )
    _report(response, _db_path(), as_json)


@main.group()
def model() -> None:
    """The embedded local model (SmolLM2-135M-Instruct on llama.cpp)."""


@model.command()
@click.option("--port", type=int, default=None, help="Port on 127.0.0.1 (free port by default).")
def serve(port: int | None) -> None:
    """Serve the embedded model in the foreground; other processes reuse it."""
    from .._local_model import serve_forever

    serve_forever(port)


def _parse_set(items: tuple[str, ...]) -> dict[str, Any]:
    """``key=value`` pairs into a state update; ``context.x=1`` sets a context field; values are
    JSON when they parse as JSON, else strings."""
    update: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise DefinitionError(
                f"--set {item!r}: write KEY=VALUE, e.g. --set answer=42 or --set context.approved=true"
            )
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        if key.startswith("context."):
            update.setdefault("context", {})[key.split(".", 1)[1]] = value
        elif key == "message":
            update.setdefault("messages", []).append({"role": "user", "content": str(value)})
        else:
            update[key] = value
    return update


def _thread_of(checkpoint: str) -> str:
    import sqlite_utils

    db = sqlite_utils.Database(_db_path())
    rows = list(
        db.query(
            "select thread_id from checkpoints where checkpoint_id = ? and checkpoint_ns = ''",
            [checkpoint],
        )
    )
    if not rows:
        raise DefinitionError(
            f"no checkpoint {checkpoint!r} in {_db_path()}; see `aworld-graph history THREAD`"
        )
    return str(rows[0]["thread_id"])


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
    "--target",
    default=None,
    help="MODULE:ATTRIBUTE or workflow file, if the run did not record one.",
)
@db_option()
def fork(
    checkpoint: str,
    sets: tuple[str, ...],
    new_thread: str | None,
    target: str | None,
    db: str | None,
) -> None:
    """Branch a run at CHECKPOINT with edited state; continue it with `aworld-graph resume`."""
    from ..runner import Runners

    saver = _saver(db)
    thread = _thread_of(checkpoint)
    agent, swarm = _recorded_source(saver, thread, target)
    forked = asyncio.run(
        Runners.fork(
            thread,
            checkpoint,
            values=_parse_set(sets),
            new_task_id=new_thread,
            agent=agent,
            swarm=swarm,
            checkpointer=saver,
        )
    )
    click.echo(
        f"forked {thread}@{checkpoint} into thread {forked}; continue with: aworld-graph resume {forked}"
    )
