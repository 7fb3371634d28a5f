"""``aworld-graph run`` / ``resume`` / ``model serve``: run agents and swarms from the shell."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from ..errors import DefinitionError
from ._app import db_option, main

if TYPE_CHECKING:
    from ..checkpoint import TrajectorySaver
    from ..config import RunConfig
    from ..swarm.graph import GraphSource
    from ..task import TaskResponse

__all__ = ["engine_options", "load_target", "run_conf_of"]


def load_target(target: str) -> GraphSource:
    """Import ``module:attribute`` and return it as a runnable agent or swarm."""
    from ..swarm.graph import as_source

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
    try:
        return as_source(obj)
    except DefinitionError:
        raise DefinitionError(
            f"{target}: {attr!r} in module {module_name!r} is a {type(obj).__name__}, not an "
            "Agent or a Swarm; point at one (e.g. aworld_graph.examples:math_agent) or at a "
            "workflow .yaml file"
        ) from None


def engine_options(f: Any) -> Any:
    """``--engine local|ray``, ``--workers N`` and ``--progress/--no-progress``: where a
    command's runs go, and whether a batch shows a progress bar."""
    f = click.option(
        "--progress/--no-progress",
        default=None,
        help="A progress bar of a batch on stderr (default: when stderr is a terminal).",
    )(f)
    f = click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=2,
        show_default=True,
        help="Ray worker processes (with --engine ray).",
    )(f)
    return click.option(
        "--engine",
        type=click.Choice(["local", "ray"]),
        default="local",
        show_default=True,
        help="local: this process; ray: Ray worker actors (an existing cluster when RAY_ADDRESS "
        "is set, else a local one), sharing the --db store.",
    )(f)


def run_conf_of(
    engine: Literal["local", "ray"],
    workers: int,
    concurrency: int,
    progress: bool | None = None,
) -> RunConfig:
    """The :class:`~aworld_graph.config.RunConfig` of ``--engine`` / ``--workers`` /
    ``--progress``."""
    from ..config import RunConfig

    return RunConfig(
        engine_name=engine,
        worker_num=workers,
        max_concurrency=concurrency,
        address=os.environ.get("RAY_ADDRESS") or None,
        progress=progress,
    )


def again_command(ctx: click.Context, **replace: Any) -> str:
    """The command line that runs ``ctx``'s command again with the same options (``replace``:
    other values for some of them), for "interrupted: run … to continue"."""
    words = ["aworld-graph", *ctx.command_path.split()[1:]]
    for param in ctx.command.params:
        name = param.name or ""
        value = replace.get(name, ctx.params.get(name))
        if isinstance(param, click.Argument):
            words.append(str(value))
        elif isinstance(param, click.Option) and value is not None and value != param.default:
            long = max(param.opts, key=len)
            if param.is_flag and param.secondary_opts:
                words.append(long if value else max(param.secondary_opts, key=len))
            elif param.is_flag:
                if value:
                    words.append(long)
            elif param.multiple:
                for item in value:
                    words += [long, str(item)]
            else:
                words += [long, str(value)]
    return shlex.join(words)


def _batch_tasks(path: str, source: Any, conf: Any, target: str) -> list[Any]:
    """One task per line of a JSONL file: ``{"input": …, "id"?: …, "session_id"?: …}`` or a
    JSON string. A line without an id gets ``<file stem>-<hash of the file>-<line>``, so
    running the same file again reads its finished runs back."""
    import hashlib

    from ..task import Task

    raw = Path(path).read_bytes()
    digest = hashlib.sha256(raw).hexdigest()[:8]
    tasks = []
    for number, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise DefinitionError(
                f"{path}:{number}: not JSON ({exc}); write one object per line"
            ) from None
        if isinstance(item, str):
            item = {"input": item}
        if not isinstance(item, dict) or not isinstance(item.get("input"), str):
            raise DefinitionError(
                f'{path}:{number}: write {{"input": "...", "id": "..."}} (id optional) or a JSON string'
            )
        tasks.append(
            Task(
                input=item["input"],
                swarm=source,
                id=str(item.get("id") or f"{Path(path).stem}-{digest}-{number}"),
                session_id=item.get("session_id"),
                conf=conf,
                metadata={"target": target},
            )
        )
    return tasks


def _run_batch(
    tasks: list[Any], saver: Any, run_conf: RunConfig, as_json: bool, where: str, again: str
) -> None:
    from ..runner import Runners

    try:
        responses = asyncio.run(Runners.run_task(tasks, checkpointer=saver, run_conf=run_conf))
    except KeyboardInterrupt:  # the runs in flight were cancelled where they were
        if run_conf.engine_name == "ray":
            from ..engine import shutdown

            shutdown()
        click.echo(
            f"interrupted: the runs still going stopped at their last checkpoint. To continue, "
            f"run\n  {again}\n(finished tasks are read back, not run again; the others resume "
            "from their last checkpoint)",
            err=True,
        )
        sys.exit(130)
    for r in responses.values():
        if as_json:
            payload = {k: v for k, v in vars(r).items() if k != "state"}
            click.echo(json.dumps(payload, ensure_ascii=False, default=str))
        else:
            click.echo(f"{r.id}\t{r.status}\t{(r.answer or r.msg or '')[:100]!s}")
    retried = {r.id: r.retried for r in responses.values() if r.retried}
    failed = [r.id for r in responses.values() if r.status == "error"]
    if not as_json:
        click.echo(
            f"{len(responses)} tasks: {len(responses) - len(failed)} ok, {len(failed)} failed"
        )
        for task_id, notes in retried.items():
            click.echo(f"retried {task_id}: " + "; ".join(notes))
        click.echo(f"stored: {where}")
    if failed:
        sys.exit(1)


def _saver(db: str | None) -> TrajectorySaver:
    """The store ``--db`` names (made when missing), closed when the command ends."""
    from ..checkpoint import open_store

    return click.get_current_context().with_resource(open_store(db))


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


def _recorded_source(saver: Any, thread: str, target: str | None, where: str) -> GraphSource:
    """The agent or swarm run ``thread`` ran, from ``target`` or the run's own record."""
    latest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    if latest is None:
        raise DefinitionError(
            f"no run with thread id {thread!r} in {where}; list runs with `aworld-graph threads`"
        )
    target = target or latest.metadata.get("target") or latest.metadata.get("workflow")
    if not target:
        raise DefinitionError(
            f"run {thread} did not record what it ran; pass --target MODULE:ATTRIBUTE"
        )
    return load_target(str(target))


@main.command()
@click.argument("target")
@click.option("--input", "-i", "input_", default=None, help="The task input (the user's request).")
@click.option(
    "--batch",
    "batch",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help='A JSONL file of tasks instead of --input: one {"input": ..., "id": ...} per line.',
)
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
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Runs of a --batch in flight at once (per worker with --engine ray).",
)
@engine_options
@db_option()
def run(
    target: str,
    input_: str | None,
    batch: str | None,
    task_id: str | None,
    max_steps: int | None,
    stream: bool,
    as_json: bool,
    concurrency: int,
    engine: Literal["local", "ray"],  # click.Choice
    workers: int,
    progress: bool | None,
    db: str | None,
) -> None:
    """Run TARGET (MODULE:ATTRIBUTE of an Agent or Swarm, or a workflow .yaml) on --input, or
    on every task of a --batch file (`--engine ray --workers N` spreads it over Ray workers)."""
    from ..config import TaskConfig
    from ..runner import Runners
    from ..task import Task

    if (input_ is None) == (batch is None):
        raise DefinitionError("give exactly one of --input TEXT or --batch FILE.jsonl")
    source = load_target(target)
    saver = _saver(db)
    conf = TaskConfig(stream=stream, max_steps=max_steps)  # wins over the file's max_steps
    if batch is not None or engine == "ray":
        if stream:
            raise DefinitionError(
                "--stream shows one run's events; leave it out with --batch or --engine ray"
            )
        tasks = (
            _batch_tasks(batch, source, conf, target)
            if batch is not None
            else [
                Task(
                    input=str(input_),
                    swarm=source,
                    conf=conf,
                    metadata={"target": target},
                    id=task_id or "",  # empty: a new thread of its own
                )
            ]
        )
        # a single --input's task id, so that the same command continues the same run
        again = again_command(
            click.get_current_context(), task_id=task_id if batch is not None else tasks[0].id
        )
        conf_of = run_conf_of(engine, workers, concurrency, progress)
        _run_batch(tasks, saver, conf_of, as_json, saver.label, again)
        return
    assert input_ is not None
    task = Task(
        input=input_,
        swarm=source,
        conf=conf,
        metadata={"target": target},
        id=task_id or "",  # empty: a new thread of its own
    )

    async def go() -> TaskResponse:
        if not stream:
            return (await Runners.run_task(task, checkpointer=saver))[task.id]
        response: TaskResponse | None = None
        async for event in Runners.streaming_run(
            input_, swarm=source, task_id=task.id, conf=conf, checkpointer=saver
        ):
            if event["event"] == "done":
                response = event["response"]
            elif event["event"] == "token":
                click.echo(event["text"], nl=False)
            elif event["event"] in ("llm_call", "tool_call", "handoff"):
                fields = {k: v for k, v in event.items() if k != "event"}
                click.echo(f"\n[{event['event']}] " + json.dumps(fields, default=str)[:300])
        assert response is not None
        return response

    _report(asyncio.run(go()), saver.label, as_json)


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
    source = _recorded_source(saver, thread, target, saver.label)
    response = asyncio.run(Runners.resume(thread, swarm=source, value=value, checkpointer=saver))
    _report(response, saver.label, as_json)


@main.group()
def model() -> None:
    """The embedded local model (SmolLM2-135M-Instruct on llama.cpp)."""


@model.command()
@click.option("--port", type=int, default=None, help="Port on 127.0.0.1 (free port by default).")
def serve(port: int | None) -> None:
    """Serve the embedded model in the foreground; other processes reuse it."""
    from ..local import serve_forever

    serve_forever(port)


@model.command()
def check() -> None:
    """Check that the installed llama.cpp build runs here: one real completion.

    On failure, prints how the server died and the command that rebuilds llama-cpp-python
    portably, and exits with status 1."""
    from ..local import check as check_model

    reply = check_model()
    click.echo(f"the embedded model answered: {reply.strip()!r}")
