"""The run endpoints: create (background), stream over SSE, wait, join, cancel, list.

A run request is checked against the thread before it starts: a resume needs a pending
interrupt; a continuation (no input) a thread that has run. New input is the next turn of the
thread's conversation, on top of the state it stands in, as LangGraph's server runs it: the
tasks pending there (a human step not answered, a node a stopped run did not reach) are
dropped. A run is never tied to its HTTP request: a client that disconnects
leaves it going (unless it asked for ``on_disconnect="cancel"``), and it can be joined.
"""

from __future__ import annotations

import asyncio
import builtins
import re
import uuid
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ._input import (
    MAX_BATCH,
    RunCreate,
    RunsCancel,
    check_command,
    check_run_options,
    durability_of,
    query_count,
    validate,
)
from ._langgraph_app import check_steering, steers
from ._runs import STREAM_MODES, Run, event_name, run_json
from ._webhooks import check_webhook
from ._wire import ApiError, clean, sse

if TYPE_CHECKING:
    from ._app import App, Rows

__all__ = ["RunRoutes"]

_STRATEGIES = ("reject", "enqueue", "interrupt", "rollback")

RUN_FIELDS = (
    *("run_id", "thread_id", "assistant_id", "created_at", "updated_at", "status"),
    *("metadata", "kwargs", "multitask_strategy", "langsmith_session_name"),
)
"""The fields of a run that ``GET /threads/{thread_id}/runs?select=`` takes, as LangGraph's
server names them (a run has no LangSmith session here: selecting it gives no field)."""


def _start_at(body: Mapping[str, Any], stateless: bool) -> str | None:
    """The checkpoint a run starts from (``checkpoint_id``, or ``checkpoint.checkpoint_id``),
    checked against the run's other options."""
    found = body.get("checkpoint_id") or (body.get("checkpoint") or {}).get("checkpoint_id")
    if found is not None and stateless:
        raise ApiError(
            422, "invalid_run", "checkpoint_id names a checkpoint of a thread: run on that thread"
        )
    if body.get("on_completion") == "delete" and not stateless:
        raise ApiError(
            422,
            "invalid_run",
            "on_completion='delete' applies to a run without a thread (POST /runs…); delete "
            "this thread with DELETE /threads/THREAD when done",
        )
    return None if found is None else str(found)


_INTERRUPT_ID = re.compile(r"[0-9a-f]{32}")
"""An interrupt's id, as LangGraph makes them (a resume map's keys)."""


def _check_strict(thread_id: str, answer: Any, waiting: builtins.list[str]) -> None:
    """A 409 for a ``strict_resume`` answer not matched to the interrupts ``waiting``, as
    LangGraph's ``strict_resume`` refuses it (the thread stays as it was)."""
    is_map = isinstance(answer, dict) and all(
        isinstance(k, str) and _INTERRUPT_ID.fullmatch(k) for k in answer
    )
    pending = ", ".join(waiting)
    if is_map and not answer:
        problem = "the resume map names no interrupt"
    elif is_map and (unknown := sorted(set(answer) - set(waiting))):
        problem = f"interrupt {unknown[0]} is not waiting (answered already, or never asked)"
    elif not is_map and len(waiting) > 1:
        problem = "several interrupts wait, so the answer must name each by its id"
    else:
        return
    raise ApiError(
        409,
        "unknown_interrupt",
        f"strict_resume: {problem}; thread {thread_id} waits for {pending}: resume with "
        '{"INTERRUPT_ID": answer, ...}',
    )


async def _disconnected(request: Request) -> None:
    """Return when the client of ``request`` (its body read already) has gone."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


THREAD_STREAM_MODES = ("run_modes", "lifecycle", "state_update")
"""What ``GET /threads/{thread_id}/stream`` serves: each run's events in the modes it was
made with, its start and end (``metadata`` events), and each edit of the thread's state
(``state_update``)."""


def _thread_modes(query: Any) -> set[str]:
    asked = [
        mode.strip()
        for value in (*query.getlist("stream_mode"), *query.getlist("stream_modes"))
        for mode in value.split(",")
        if mode.strip()
    ]
    _known(
        asked, THREAD_STREAM_MODES, "invalid_stream_mode", "thread stream mode {!r} is not served"
    )
    return set(asked or ["run_modes"])


def _known(names: Sequence[str], known: Sequence[str], code: str, problem: str) -> None:
    """A 422 (``code``) for the first of ``names`` not ``known``: ``problem`` with it, and
    the names known."""
    for name in names:
        if name not in known:
            said = problem.format(name[:40])
            raise ApiError(422, code, f"{said}; use any of {', '.join(known)}")


def _modes(value: Any, known: Sequence[str] = STREAM_MODES) -> list[str]:
    modes = [value] if isinstance(value, str) else list(value or ["values"])
    bad = [m for m in modes if m not in known]
    if bad:
        raise ApiError(
            422,
            "invalid_stream_mode",
            f"stream mode {bad[0]!r} is not served; use any of {', '.join(known)}",
        )
    return modes


class RunRoutes:
    """Handlers for ``/threads/{thread_id}/runs…`` and the thread-less ``/runs…``."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.runs = app.runs
        self.threads = app.threads

    def rows(self) -> Rows:
        get, post, thread = ["GET"], ["POST"], "/threads/{thread_id:str}"
        return [
            (f"{thread}/runs", self.create, post),
            (f"{thread}/runs", self.list, get),
            (f"{thread}/runs/stream", self.stream, post),
            (f"{thread}/runs/wait", self.wait, post),
            (f"{thread}/runs/{{run_id:str}}", self.get, get),
            (f"{thread}/runs/{{run_id:str}}", self.delete, ["DELETE"]),
            (f"{thread}/runs/{{run_id:str}}/cancel", self.cancel, post),
            (f"{thread}/runs/{{run_id:str}}/join", self.join, get),
            (f"{thread}/runs/{{run_id:str}}/stream", self.join_stream, get),
            (f"{thread}/stream", self.thread_stream, get),
            ("/runs/batch", self.batch, post),
            ("/runs/cancel", self.cancel_many, post),
            ("/runs", self.create, post),
            ("/runs/stream", self.stream, post),
            ("/runs/wait", self.wait, post),
            ("/runs/{run_id:str}", self.get, get),
            ("/runs/{run_id:str}/wait", self.join, get),
            ("/runs/{run_id:str}/stream", self.join_stream, get),
            ("/runs/{run_id:str}/cancel", self.cancel, post),
        ]

    # -- creating --------------------------------------------------------------------------

    async def _create(
        self, request: Request, thread_id: str | None, *, streamed: bool = False
    ) -> tuple[Run, dict[str, Any]]:
        return await self.start_run(await self.app.body(request), thread_id, streamed=streamed)

    async def start_run(
        self,
        body: dict[str, Any],
        thread_id: str | None,
        *,
        streamed: bool = False,
        tools: bool = False,
    ) -> tuple[Run, dict[str, Any]]:
        """Check a run's ``body`` as ``POST …/runs`` does and start it (or queue it) on
        ``thread_id`` (``None``: the body's, or a stateless run); the run and the checked body.
        ``tools``: its ``stream_mode`` may name ``tools`` too, the tool calls of the thread
        stream's ``tools`` channel (not a stream mode of the runs routes, as in LangGraph's
        server)."""
        validate(RunCreate, body)
        check_webhook(body.get("webhook"))
        check_run_options(body)
        if thread_id is None:
            thread_id = body.get("thread_id")
        assistant = self.app.assistants.get(str(body.get("assistant_id") or ""))
        durability = durability_of(body, assistant.is_app)
        strict = bool(body.get("strict_resume"))
        body["stream_mode"] = _modes(
            body.get("stream_mode"), [*STREAM_MODES, "tools"] if tools else STREAM_MODES
        )
        strategy = str(body.get("multitask_strategy") or "enqueue")  # LangGraph's default
        if strategy not in _STRATEGIES:
            raise ApiError(
                422, "invalid_strategy", f"multitask_strategy must be one of {_STRATEGIES}"
            )
        command = check_command(body.get("command"))
        steering = steers(command)  # update/goto: LangGraph's Command(update=, goto=)
        if steering:
            await check_steering(assistant, command)
        if command and body.get("input") == {}:  # the JS SDK's useStream: submit({}, {command})
            body["input"] = None  # no input, as LangGraph's server runs the command alone
        text = assistant.run_input(body)  # its input's text; config and context checked
        has_resume = "resume" in command
        if (has_resume or steering) and text is not None:
            raise ApiError(422, "invalid_run", "send either input or command, not both")
        metadata = body.get("metadata") or {}
        new = thread_id is None
        start_at = _start_at(body, new)
        if thread_id is None:  # a stateless run gets a thread of its own: its run stores it
            if text is None:
                raise ApiError(422, "missing_input", "a run without a thread needs an input")
            thread_id = str(uuid.uuid4())
        elif not await self.threads.exists(thread_id):
            if body.get("if_not_exists") != "create":
                raise self.threads.not_found(thread_id)
            await self.threads.create({"thread_id": thread_id})
        thread_id = str(thread_id)
        owner = None if new else await self.threads.assistant_of(thread_id)
        if owner is not None and owner.graph_id != assistant.graph_id:
            raise ApiError(
                409,
                "wrong_assistant",
                f"thread {thread_id} holds runs of {owner.assistant_id}, not "
                f"{assistant.assistant_id}; start a new thread for another workflow",
            )
        if start_at is not None:  # 404 now if it is not there
            await self.threads.state(thread_id, start_at)
        busy = bool(self.runs.busy(thread_id))
        deferred = busy or start_at is not None  # checked on the state the run starts from
        checked = not (steering and not has_resume)  # a command runs on any state, as in LangGraph
        answer = command.get("resume") if strict else None  # checked against the interrupts
        if checked and not deferred and not new:  # else checked when the runs before it end
            await self.check(thread_id, text, has_resume, strict=strict, answer=answer)

        async def later(run: Run) -> None:
            await self.check(
                thread_id, text, has_resume, at=run.checkpoint_id, strict=strict, answer=answer
            )

        run = await self.runs.start(
            thread_id=thread_id,
            assistant=assistant,
            text=text,
            resume=command.get("resume"),
            multitask_strategy=strategy,
            metadata=dict(metadata),
            kwargs={
                k: body.get(k)
                for k in (
                    *("input", "command", "stream_mode", "config", "context", "webhook"),
                    *("interrupt_before", "interrupt_after", "stream_subgraphs"),
                    *("strict_resume", "langsmith_tracer"),
                )
            }
            | {"durability": durability or "sync"},  # this server's own: each step saved
            check=later if deferred and checked else None,
            new_thread=new,
            modes=body["stream_mode"] if streamed else None,
            delay=float(body.get("after_seconds") or 0),
            temporary=new and body.get("on_completion") == "delete",
            checkpoint_id=start_at,
        )
        return run, body

    async def check(
        self,
        thread_id: str,
        text: str | None,
        has_resume: bool,
        at: str | None = None,
        *,
        strict: bool = False,
        answer: Any = None,
    ) -> None:
        """Refuse with an ``ApiError`` a run the thread cannot take now (at checkpoint
        ``at``, when the run starts from it). New input is taken on any thread, as LangGraph's
        server takes it: on one that waits for a human step or stopped mid-run it goes on top
        (the run drops the tasks pending there). A resume is refused when nothing waits for
        it; with ``strict`` (``strict_resume``) also when ``answer`` is not matched to the
        interrupts that wait, as LangGraph's ``strict_resume``: a map of interrupt ids that
        names none or one not waiting, or one value when several wait."""
        state = await self.threads.state(thread_id, at)
        started = bool(state["values"]) or state["checkpoint"]["checkpoint_id"] is not None
        if has_resume and not state["interrupts"]:
            raise ApiError(
                409,
                "no_interrupt",
                f"thread {thread_id} is not waiting for input, so there is nothing to resume; "
                + ("send input null to continue it" if state["next"] else "start a new run"),
            )
        if has_resume and strict:
            _check_strict(thread_id, answer, [str(i.get("id")) for i in state["interrupts"]])
        if text is None and not has_resume and not started:
            raise ApiError(
                422,
                "missing_input",
                f'thread {thread_id} has not run yet: send input, e.g. {{"messages": '
                '[{"role": "user", "content": "..."}]}',
            )

    @staticmethod
    def _where(
        thread_id: str, run_id: str, then: str | None = None, stateless: bool = False
    ) -> dict[str, str]:
        """The run's ``Content-Location`` and, with ``then`` (``stream`` or ``join``), the
        ``Location`` a client goes on from when its response is cut (the SDK rejoins a stream
        there with ``Last-Event-ID``), as LangGraph's server sends them."""
        base = f"/runs/{run_id}" if stateless else f"/threads/{thread_id}/runs/{run_id}"
        where = {"Content-Location": base}
        if then is not None:
            where["Location"] = f"{base}/{then}"
        return where

    async def create(self, request: Request) -> Response:
        thread_id = request.path_params.get("thread_id")
        run, _ = await self._create(request, thread_id)
        where = self._where(run.thread_id, run.run_id, stateless=thread_id is None)
        return self.app.json(run.json(), headers=where)

    async def stream(self, request: Request) -> Response:
        thread_id = request.path_params.get("thread_id")
        run, body = await self._create(request, thread_id, streamed=True)
        cancel = body.get("on_disconnect") == "cancel"
        where = self._where(run.thread_id, run.run_id, "stream", stateless=thread_id is None)
        return self._sse(run, body["stream_mode"], cancel, start=0, headers=where)

    async def wait(self, request: Request) -> Response:
        run, body = await self._create(request, request.path_params.get("thread_id"))
        if body.get("on_disconnect") == "cancel":  # a client gone stops the run
            gone = asyncio.ensure_future(_disconnected(request))
            ended = asyncio.ensure_future(run.done.wait())
            await asyncio.wait((gone, ended), return_when=asyncio.FIRST_COMPLETED)
            gone.cancel()
            ended.cancel()
            if not run.done.is_set():
                await self.runs.cancel(run)
        return await self._result(run, headers=self._where(run.thread_id, run.run_id, "join"))

    async def batch(self, request: Request) -> Response:
        """``POST /runs/batch``: several runs without a thread, each a new thread; every one
        is checked before any starts."""
        payloads = await self.app.json_body(request)
        if not isinstance(payloads, builtins.list) or not all(
            isinstance(p, dict) for p in payloads
        ):
            raise ApiError(
                422,
                "invalid_body",
                'the body of /runs/batch must be a list of runs: [{"assistant_id": ..., '
                '"input": ...}, ...]',
            )
        if len(payloads) > MAX_BATCH:
            raise ApiError(
                422, "too_many", f"at most {MAX_BATCH} runs in one batch; send several batches"
            )
        for i, payload in enumerate(payloads):
            try:
                # the JavaScript SDK's createBatch sends its payload with assistantId added
                # as assistant_id: the same id, twice
                if "assistantId" in payload and payload["assistantId"] == payload.get(
                    "assistant_id"
                ):
                    del payload["assistantId"]
                validate(RunCreate, payload)
                if payload.get("thread_id") is not None or payload.get("command"):
                    raise ApiError(
                        422,
                        "invalid_run",
                        "a batch run has no thread: leave out thread_id and command",
                    )
                check_run_options(payload)
                assistant = self.app.assistants.get(str(payload.get("assistant_id") or ""))
                durability_of(payload, assistant.is_app)
            except ApiError as exc:
                raise ApiError(exc.status, exc.code, f"run [{i}]: {exc.message}") from None
        runs = [(await self.start_run(dict(p), None))[0] for p in payloads]
        return self.app.json([run.json() for run in runs])

    async def cancel_many(self, request: Request) -> Response:
        """``POST /runs/cancel``: the runs of a thread by id, every run ``pending``,
        ``running`` or both (``status="all"``), or every going run of an assistant."""
        body = await self.app.checked(request, RunsCancel)
        action = request.query_params.get("action", "interrupt")
        if action not in ("interrupt", "rollback"):
            raise ApiError(422, "invalid_action", "action must be 'interrupt' or 'rollback'")
        status, thread_id, run_ids = body.get("status"), body.get("thread_id"), body.get("run_ids")
        assistant_id = body.get("assistant_id")
        live = [r for r in self.runs.live.values() if not r.done.is_set()]
        if assistant_id is not None:
            if status or thread_id or run_ids:
                raise ApiError(
                    422, "invalid_body", "assistant_id goes alone: no thread_id, run_ids, status"
                )
            await self.runs.cancel_many(
                [r for r in live if r.assistant.assistant_id == assistant_id], action
            )
            return Response(status_code=204)
        if status is not None:
            if thread_id or run_ids:
                raise ApiError(
                    422,
                    "invalid_body",
                    "status cancels every run of that status: leave out thread_id and run_ids",
                )
            wanted = ("pending", "running") if status == "all" else (status,)
            found = [r for r in live if r.status in wanted]
            known = bool(found)
        elif thread_id and run_ids:
            found = [r for r in (self.runs.get(i, thread_id) for i in run_ids) if r is not None]
            ended = [i for i in run_ids if await self.runs.stored(i, thread_id)]  # not held
            known = bool(found or ended)
        else:
            raise ApiError(
                422,
                "invalid_body",
                "name the runs to cancel: thread_id and run_ids, a status "
                "('pending', 'running' or 'all'), or an assistant_id",
            )
        if not known:  # as LangGraph's server answers
            raise ApiError(404, "run_not_found", "no runs found to cancel")
        await self.runs.cancel_many(found, action)
        return Response(status_code=204)

    # -- existing runs ---------------------------------------------------------------------

    async def _run(self, request: Request) -> Run | dict[str, Any]:
        """The run a request names: held by this server, else its stored row."""
        thread_id = request.path_params.get("thread_id")
        run_id = request.path_params["run_id"]
        found = self.runs.get(run_id, thread_id) or await self.runs.stored(run_id, thread_id)
        if found is None and thread_id:
            for past in await self.past(thread_id):
                if past["run_id"] == run_id:
                    return {**past, "error": None}
        if found is None:
            raise ApiError(
                404,
                "run_not_found",
                f"no run {run_id!r}"
                + (f" on thread {thread_id}" if thread_id else "")
                + "; GET /threads/THREAD/runs lists a thread's runs",
            )
        return found

    async def get(self, request: Request) -> Response:
        found = await self._run(request)
        return self.app.json(found.json() if isinstance(found, Run) else run_json(found))

    async def list(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        if not await self.threads.exists(thread_id):
            raise self.threads.not_found(thread_id)
        runs = await self.runs.of_thread(thread_id)
        runs += await self.past(thread_id, known={r["run_id"] for r in runs})
        runs.sort(key=lambda r: r["created_at"], reverse=True)
        status = request.query_params.get("status")
        runs = [r for r in runs if not status or r["status"] == status]
        offset = query_count(request.query_params, "offset", 0)
        limit = query_count(request.query_params, "limit", 10)
        page = runs[offset : offset + limit]
        select = [f for f in request.query_params.getlist("select") if f]
        _known(select, RUN_FIELDS, "invalid_query", "select: {!r} is not a field of a run")
        if select:  # only those fields, as LangGraph's server answers
            page = [{k: v for k, v in r.items() if k in select} for r in page]
        return self.app.json(page)

    async def past(
        self, thread_id: str, known: Collection[str] = ()
    ) -> builtins.list[dict[str, Any]]:
        """Runs read back from the thread's checkpoints (the CLI's and the library's, which
        have no row in the ``runs`` table; ``known``: the runs that have one): a run's status
        follows from where the thread stands. The last run of a thread that stopped mid-run is
        ``interrupted`` (continue it with a new run with input null); one that stopped at a
        human step ended ``success``, as LangGraph's server says. A run this server made is
        not read back: it has its row until ``DELETE …/runs/{run}``, and is gone after that,
        as on LangGraph's server."""
        rows = await asyncio.to_thread(self.threads.saver.transitions, thread_id)
        runs: dict[str, dict[str, Any]] = {}
        last: str | None = None
        for row in rows:
            if not row.run_id:
                continue
            entry = runs.setdefault(
                row.run_id, {"created_at": row.created_at, "error": False, "updated_at": None}
            )
            entry["updated_at"] = row.created_at
            entry["error"] = entry["error"] or bool(row.error)
            last = row.run_id
        elsewhere = [r for r in runs if r not in known]
        elsewhere = await asyncio.to_thread(self._made_elsewhere, thread_id, elsewhere)
        if not elsewhere:
            return []
        thread = await self.threads.get(thread_id)
        assistant_id = thread["metadata"].get("assistant_id")
        out = []
        for run_id, entry in runs.items():
            if run_id not in elsewhere:
                continue
            status = "error" if entry["error"] else "success"
            if run_id == last and not self.runs.busy(thread_id) and not thread["interrupts"]:
                status = {"interrupted": "interrupted", "error": "error"}.get(
                    thread["status"], status
                )
            out.append(
                {
                    "run_id": run_id,
                    "thread_id": thread_id,
                    "assistant_id": assistant_id,
                    "created_at": entry["created_at"],
                    "updated_at": entry["updated_at"],
                    "status": status,
                    "metadata": {},
                    "multitask_strategy": "reject",
                    "kwargs": {},
                }
            )
        return out

    def _made_elsewhere(self, thread_id: str, run_ids: Sequence[str]) -> builtins.list[str]:
        """Those of ``run_ids`` that the CLI or the library made on the thread: their
        checkpoints carry no ``assistant_id`` (this server stamps its runs' with one)."""
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        return [
            run_id
            for run_id in run_ids
            if next(
                self.threads.saver.list(
                    config, filter={"run_id": run_id, "assistant_id": None}, limit=1
                ),
                None,
            )
            is not None
        ]

    async def join(self, request: Request) -> Response:
        found = await self._run(request)
        if isinstance(found, Run):
            return await self._result(found, self._where(found.thread_id, found.run_id, "join"))
        if found["status"] in ("pending", "running"):  # another server's, going or queued
            raise ApiError(
                409, "run_elsewhere", f"run {found['run_id']} is not held by this server"
            )
        thread_id = found["thread_id"]
        values = (await self.threads.state(thread_id))["values"]
        return await self._answer(thread_id, found["status"], values, found["error"])

    async def join_stream(self, request: Request) -> Response:
        found = await self._run(request)
        query = request.query_params
        # the SDK sends an empty ``stream_mode=`` when none is asked for: the run's own modes
        asked = [mode for mode in query.getlist("stream_mode") if mode]
        modes = _modes(asked) if asked else None
        cancel = query.get("cancel_on_disconnect", "false").lower() in ("1", "true")
        last = request.headers.get("last-event-id", "").strip()
        if last not in ("", "-1") and not (last.isascii() and last.isdigit()):
            raise ApiError(
                422,
                "invalid_header",
                "Last-Event-ID must be the id of an event of the stream (a whole number), or -1 "
                f"for its start; got {ascii(last[:40])}",
            )
        start = int(last) + 1 if last else 0
        if not isinstance(found, Run):  # a run not held here: its events are gone
            return self._gone(found, start)
        if modes is None:  # the modes the run was created with, as LangGraph's server
            modes = list(found.modes or found.kwargs.get("stream_mode") or STREAM_MODES)
        where = self._where(found.thread_id, found.run_id, "stream")
        return self._sse(found, modes, cancel, start=start, headers=where)

    async def thread_stream(self, request: Request) -> Response:
        """``GET /threads/{thread_id}/stream``: the events of the thread's runs, those going
        (from their start) and each run after them, until the client goes (LangGraph's
        thread stream). Each run
        starts with ``metadata`` (``run_id``) and ends with ``metadata``
        (``{"status": "run_done", "run_id"}``); an event's id is ``RUN:N``, so
        ``Last-Event-ID`` resumes after it while the server holds that run. With
        ``state_update``, each edit of the thread's state while the client is there
        (``POST …/state``) is a ``state_update`` event, ``{"state", "thread_id"}``, with an id
        as LangGraph's server gives one: ``RUN:N`` past the events of the run before it (no
        run is going while a state is edited), ``-:N`` before any, so ``Last-Event-ID``
        resumes with the runs after the edit."""
        thread_id = request.path_params["thread_id"]
        if not await self.threads.exists(thread_id):
            raise self.threads.not_found(thread_id)
        modes = _thread_modes(request.query_params)
        last = request.headers.get("last-event-id", "").strip()
        after_run, _, after = last.rpartition(":")
        if last and not (after_run and after.isascii() and after.isdigit()):
            raise ApiError(
                422,
                "invalid_header",
                f"Last-Event-ID must be the id of an event of this stream (RUN:N); got "
                f"{ascii(last[:60])}",
            )
        held = self.runs.of(thread_id)
        if after_run:  # resume: that run from after the event, and the runs after it
            ids = [r.run_id for r in held]
            done = set(ids[: ids.index(after_run)]) if after_run in ids else set()
            start = {after_run: int(after) + 1}
        else:  # join: the runs going (from their start), and every later one
            done, start = {r.run_id for r in held if r.done.is_set()}, {}

        runs_told = bool(modes & {"run_modes", "lifecycle"})  # each run's start and end
        edits_told = "state_update" in modes
        before = [r for r in held if r.run_id in done]
        previous = before[-1] if before else None  # the run an edit made now comes after
        edits_after = 0  # the edits sent since it

        def edited(updates: builtins.list[dict[str, Any]]) -> bytes:
            nonlocal edits_after
            if not edits_told:
                return b""
            told = []
            for update in updates:
                place = len(previous.feed.items) if previous is not None else 0
                ident = f"{previous.run_id if previous is not None else '-'}:{place + edits_after}"
                edits_after += 1
                told.append(sse("state_update", update, ident))
            return b"".join(told)

        # watched from now, so an edit made once the client has the answer's head is sent
        edits = self.threads.watch(thread_id)

        async def events() -> AsyncIterator[bytes]:
            try:
                async for chunk in runs():
                    yield chunk
            finally:
                self.threads.unwatch(thread_id, edits)

        async def runs() -> AsyncIterator[bytes]:
            nonlocal previous, edits_after
            while True:
                launched = self.runs.launched
                fresh = [r for r in self.runs.of(thread_id) if r.run_id not in done]
                if not fresh:
                    if told := edited(edits.take()):
                        yield told
                    if self.runs.closing:
                        return
                    await edits.wait(launched)
                    continue
                for run in fresh:
                    if told := edited(edits.take(before=run.run_id)):
                        yield told
                    done.add(run.run_id)
                    begin = start.get(run.run_id, 0)
                    past = begin - len(run.feed.items)
                    if past > 0 and run.feed.closed:  # resumed after an edit made after it
                        previous, edits_after = run, past
                        continue
                    if begin == 0 and runs_told:
                        yield sse("metadata", {"run_id": run.run_id, "attempt": 1})
                    # the run's own stream modes (a run that asked for none: values), as
                    # LangGraph's server's run_modes
                    own = run.modes or run.kwargs.get("stream_mode")
                    async for ready in run.feed.follow(begin):
                        if "run_modes" not in modes:
                            continue
                        wanted = [(event_name(m, own), i, d) for i, m, d in ready]
                        chunk = b"".join(sse(e, d, f"{run.run_id}:{i}") for e, i, d in wanted if e)
                        if chunk:
                            yield chunk
                    if runs_told:
                        yield sse("metadata", {"status": "run_done", "run_id": run.run_id})
                    previous, edits_after = run, 0

        headers = {"Cache-Control": "no-store"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    def _gone(self, found: dict[str, Any], start: int) -> Response:
        """The stream of a run this server does not hold: its ``metadata`` event, then its
        end (its result: ``GET …/join``)."""
        ident = {"run_id": found["run_id"], "attempt": 1}
        body = sse("metadata", ident) if start == 0 else b""
        where = self._where(found["thread_id"], found["run_id"], "stream")
        return Response(body, media_type="text/event-stream", headers=where)

    async def cancel(self, request: Request) -> Response:
        found = await self._run(request)
        query = request.query_params
        wait = query.get("wait", "0").lower() in ("1", "true")
        if isinstance(found, Run):  # one not held here has ended
            await self.runs.cancel(found, action=query.get("action", "interrupt"), wait=wait)
        return Response(status_code=204 if not wait else 200, content=b"" if not wait else b"{}")

    async def delete(self, request: Request) -> Response:
        found = await self._run(request)
        if isinstance(found, Run) and not found.done.is_set():
            raise ApiError(409, "run_active", f"run {found.run_id} is going; cancel it first")
        await self.runs.forget(run_id=found.run_id if isinstance(found, Run) else found["run_id"])
        return Response(status_code=204)

    # -- results ---------------------------------------------------------------------------

    async def _result(self, run: Run, headers: dict[str, str] | None = None) -> Response:
        """The thread's values when ``run`` ends (``__error__`` when it failed, as LangGraph's
        API answers ``wait``/``join``)."""
        await run.done.wait()
        return await self._answer(
            run.thread_id, run.status, run.values, run.error, headers, run.interrupts
        )

    async def _answer(
        self,
        thread_id: str,
        status: str,
        values: dict[str, Any] | None,
        error: dict[str, str] | None,
        headers: dict[str, str] | None = None,
        interrupts: builtins.list[Any] | None = None,
    ) -> Response:
        """``interrupts``: those the run stopped at (``None``: a run not held here, whose
        thread's pending interrupts are read when it ended ``success``, as a run that stops
        at a human step does)."""
        answer: dict[str, Any] = dict(values or {})
        if interrupts is None and status == "success" and error is None:
            interrupts = (await self.threads.state(thread_id))["interrupts"]
        if interrupts:
            answer["__interrupt__"] = interrupts
        if error is not None:
            answer["__error__"] = clean(error)
        return self.app.json(answer, headers=headers)

    def _sse(
        self,
        run: Run,
        modes: builtins.list[str],
        cancel_on_disconnect: bool,
        start: int,
        headers: dict[str, str],
    ) -> Response:
        async def events() -> AsyncIterator[bytes]:
            ended = False
            try:
                if start == 0:
                    yield sse("metadata", {"run_id": run.run_id, "attempt": 1})
                async for ready in run.feed.follow(start):
                    wanted = [(event_name(mode, modes), i, data) for i, mode, data in ready]
                    chunk = b"".join(sse(e, data, str(i)) for e, i, data in wanted if e)
                    if chunk:
                        yield chunk
                ended = True
            finally:
                if not ended and cancel_on_disconnect and not run.done.is_set():
                    run.cancel_action = "interrupt"
                    assert run.task is not None
                    run.task.cancel()

        headers = {**headers, "Cache-Control": "no-store"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)
