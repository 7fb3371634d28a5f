"""Runs the server starts: each one is a :class:`~aworld_graph.run.GraphRun` driven on its
thread, in a task of the server's event loop, so a client that goes away does not stop it.

A run's events go into its :class:`Feed` once, as ``(mode, data)`` stream parts; each SSE
reader picks the modes it asked for, from the start or from an event id. A background run's
feed holds every stream mode; a streamed run's only the modes it was created with (as in
LangGraph's server, a joining reader may ask for those or fewer).

Every run the server accepts has a row in the store's ``runs`` table
(:class:`~._run_table.RunTable`) before a client hears of it, and the row's status follows
the run (``pending`` → ``running`` → ``success`` / ``error`` / ``interrupted``), as LangGraph's
server says it: a run that stops at a human step (``interrupt()``, a ``Human`` node) or at an
``interrupt_before``/``interrupt_after`` node ended ``success`` (its thread reads
``interrupted`` and holds the pending interrupts; :attr:`Run.interrupts` has them), and
``interrupted`` is a run stopped mid-run: cancelled, or going when its server died. A run is
acknowledged (:meth:`RunManager.start` returns, so the client gets its id) once its row is
committed and, when it starts at once, the first checkpoint it streams is committed too (a
new input's input checkpoint; a resume's or a continuation's the one it goes on from). A run
queued behind another on its thread (``enqueue``) is acknowledged once its row is committed.
When a server starts (:meth:`RunManager.recover`), a run its predecessor left ``running``
reads ``interrupted`` (its thread continues from its last checkpoint with input ``null``, or
takes new input on top) and the queued runs it never started start again, per thread in the
order they were accepted, as LangGraph's server takes pending runs from its store's queue.

New input on a thread that has tasks pending (a human step waits, a run stopped before a node
by ``interrupt_before``/``interrupt_after``, was cancelled, failed or its server died) runs on
top of the state it stands in, the pending tasks dropped, as LangGraph's server runs it; a
person who sends a new message instead of answering starts a new turn.

The table is the one source of the runs the server accepted: listing, reading and joining a
run it is not holding read the table, and checkpoints are read only for runs it has no row of
(the CLI's and the library's, or runs of a server before the table). Deriving a server run
from its checkpoints cannot work: a run that has not written a checkpoint yet (queued, or a
resume killed before its first step) has none. In memory the manager holds only what a live
client can still join: the runs going, and the feeds of the last :data:`KEEP_FINISHED`
finished runs (a client joining a forgotten run gets its stored result without the events).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import uuid
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.constants import END

from ..config import TaskConfig
from ..run import CriticScore, GraphRun, RunEvent, StepEvent, ToolCall, built, pending_nodes
from ..task import Task
from ._assistants import Assistant
from ._chat import chat_chunk, chat_updates, chat_values, next_reply_id
from ._langgraph_app import MessageParts, ends
from ._run_table import RunTable
from ._webhooks import Webhooks
from ._wire import ApiError, clean, now

__all__ = [
    "CANCELLED",
    "KEEP_FINISHED",
    "STREAM_MODES",
    "Feed",
    "Run",
    "RunManager",
    "event_name",
    "stamp",
]

log = logging.getLogger("aworld_graph.server")

STREAM_MODES = (
    *("values", "updates", "messages", "messages-tuple", "custom", "checkpoints"),
    *("tasks", "debug", "events"),
)
"""The stream modes a run produces."""

_OWN = ("source", "step", "parents", "writes", "run_id")
"""Checkpoint metadata LangGraph or a run writes for itself; not carried onto another."""

_STATUS = {"finished": "success", "interrupted": "success", "error": "error"}
_STATUS |= {"max_steps": "error", "busy": "error", "running": "success"}
"""A run's end status by how the library's run ended: one that stopped at a human step
(``interrupted``) or before a node it was told to stop at (``running``) ran as it should, as
LangGraph's server says (``success``); whoever needs to know it waits reads the interrupts."""
CANCELLED = "Cancelled"
"""The ``error`` of a run a client (or a ``multitask_strategy``) cancelled."""
KEEP_FINISHED = 100
"""How many finished runs a server holds in memory with their stream feeds, newest first, so
a client can still join them; older ones are read from the store (without their events)."""

Check = Callable[[str, str | None, bool], Awaitable[None]]
"""``check(thread_id, text, has_resume)``: refuses a run the thread cannot take now with an
``ApiError`` (the routes' rule, run again when a queued run starts)."""


def event_name(part: str, modes: list[str] | None) -> str | None:
    """The SSE event name of a feed part for a reader of ``modes`` (``None``: every mode),
    or ``None`` when that reader skips it."""
    mode, bar, namespace = part.partition("|")  # a subgraph's part: MODE|NAMESPACE
    if mode == "error" or modes is None:
        return ("messages" if mode == "messages-tuple" else mode) + bar + namespace
    if mode == "messages-tuple":
        return "messages" + bar + namespace if "messages-tuple" in modes else None
    if part.startswith("messages/"):
        return part if "messages" in modes else None
    return part if mode in modes else None


_RAISED = re.compile(r"([A-Za-z_][\w.]*): (.*)", re.DOTALL)
"""A LangGraph app's run error as the run loop words it: ``ExceptionClass: message``."""


def _error_of(msg: str, is_app: bool) -> dict[str, str]:
    """A failed run's ``error`` event: for a LangGraph app, the exception's class and its
    message (``{"error": "ValueError", "message": "boom"}``), as LangGraph's server says it;
    for a workflow, or a failure that was no exception (a timeout), ``"error"`` and the
    message."""
    raised = _RAISED.fullmatch(msg) if is_app else None
    if raised is None:
        return {"error": "error", "message": msg}
    return {"error": raised[1], "message": raised[2]}


class Feed:
    """An append-only list of stream parts that readers follow as it grows."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Any]] = []
        self.closed = False
        self._grew = asyncio.Event()

    def append(self, mode: str, data: Any) -> None:
        self.items.append((mode, data))
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._grew.set()
        self._grew = asyncio.Event()

    async def follow(self, start: int = 0) -> AsyncIterator[list[tuple[int, str, Any]]]:
        """The parts from ``start`` on as ``(index, mode, data)``, in lists of those there are
        when the reader looks (a stream writes each list at once), waiting for more until the
        feed closes."""
        i = start
        while True:
            grew = self._grew
            if i < len(self.items):
                ready = self.items[i:]
                yield [(i + k, mode, data) for k, (mode, data) in enumerate(ready)]
                i += len(ready)
                continue  # more may have come while the reader wrote these
            if self.closed:
                return
            await grew.wait()


@dataclass(kw_only=True, eq=False)
class Run:
    """One run of an assistant on a thread."""

    run_id: str
    thread_id: str
    assistant: Assistant
    multitask_strategy: str
    metadata: dict[str, Any]
    kwargs: dict[str, Any]
    status: str = "pending"
    created_at: str = field(default_factory=now)
    updated_at: str = field(default_factory=now)
    feed: Feed = field(default_factory=Feed)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    values: dict[str, Any] | None = None
    """The thread's values when the run ended."""
    error: dict[str, str] | None = None
    """``{"error", "message"}`` when it failed."""
    interrupts: list[Any] = field(default_factory=list)
    """The interrupts it stopped at (a human step waits for their answer), as its last
    ``values`` event and ``wait`` carry them under ``__interrupt__``; empty when it asks
    nothing."""
    cancel_action: str | None = None
    """How it was cancelled: ``interrupt`` (its checkpoints stay) or ``rollback`` (it and its
    checkpoints are deleted)."""
    new_thread: bool = False
    """The thread was made for this run (a run without a thread): nothing to read back."""
    modes: list[str] | None = None
    """The stream modes its feed holds (``None``: all of them)."""
    checkpoint_id: str | None = None
    """The checkpoint it starts from (``checkpoint`` / ``checkpoint_id``): copied as the
    thread's head when it starts, a new branch."""
    delay: float = 0.0
    """Seconds to wait before it starts (``after_seconds``)."""
    temporary: bool = False
    """Its thread is deleted when it ends (``on_completion="delete"`` on a run without a
    thread)."""
    checkpoints: list[str] = field(default_factory=list)
    """The ids of the checkpoints it streamed, in order."""
    moved: asyncio.Event = field(default_factory=asyncio.Event)
    """Set (and replaced) when it streams a checkpoint or ends."""

    def notify(self) -> None:
        """Wake whoever waits on :attr:`moved`."""
        self.moved.set()
        self.moved = asyncio.Event()

    def json(self) -> dict[str, Any]:
        """The API's ``Run`` object."""
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant.assistant_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "status": self.status,
            "metadata": clean(self.metadata),
            "multitask_strategy": self.multitask_strategy,
            "kwargs": clean(self.kwargs),
        }

    def row(self) -> dict[str, Any]:
        """Its row of the ``runs`` table."""
        return {**self.json(), "error": self.error}


def run_json(row: dict[str, Any]) -> dict[str, Any]:
    """The API's ``Run`` object of a stored row."""
    found = {k: v for k, v in row.items() if k != "error"}
    found |= {"metadata": clean(row["metadata"] or {}), "kwargs": clean(row["kwargs"] or {})}
    return found


def _scalars(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if isinstance(v, (str, int, float, bool))}


_PARTS = (
    *("values", "checkpoints", "updates", "custom", "tasks", "debug", "events", "tools"),
    *("messages-tuple", "messages/metadata", "messages/partial", "messages/complete"),
)
"""The parts of a feed (``messages/…`` are the ``messages`` mode's)."""


class _Sink:
    """Turns the library's run events into stream parts of the modes its run keeps."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.partial: dict[str, str] = {}
        self.ids: dict[str, str] = {}
        self.wants = {m: event_name(m, run.modes) is not None for m in _PARTS}
        # tool calls only for a run that asked for them (a thread stream's): no runs route
        # serves the mode
        self.wants["tools"] &= "tools" in (run.modes or run.kwargs.get("stream_mode") or ())
        self.messages = MessageParts()  # a LangGraph application's messages stream
        self.app = run.assistant.is_app
        self.before: Any = []
        """The state's messages as last streamed: what the next replies' ids follow from."""
        self.started: set[str] = set()
        """The ids of the tool calls told as started and not yet as ended."""
        self.results: Counter[str] = Counter()
        """Each agent's tool results told since the state was last streamed."""

    def _message_id(self, agent: str) -> str:
        return self.ids.setdefault(agent, next_reply_id(self.before, agent))

    def __call__(self, event: RunEvent | StepEvent) -> None:
        feed, wants = self.run.feed, self.wants
        if event["event"] == "state":
            checkpoint = event["checkpoint"]
            conf = (checkpoint["config"] or {}).get("configurable") or {}
            self.run.checkpoints.append(str(conf["checkpoint_id"]))
            self.run.notify()
            stored = clean(checkpoint.get("values") or {})  # the run's values: always
            self.before = stored.get("messages")
            self.results.clear()
            values = chat_values(stored, self.app)  # as chat UIs read them
            if (checkpoint.get("metadata") or {}).get("source") != "input":  # not before it
                self.run.values = values
                if wants["values"]:
                    feed.append("values", values)
            if wants["checkpoints"]:
                rest = clean({k: v for k, v in checkpoint.items() if k != "values"})
                feed.append("checkpoints", {**rest, "values": values})
            return
        if event["event"] == "update":
            if not (wants["updates"] or wants["custom"]):
                return
            updates = chat_updates(clean(event["updates"]), self.before, self.app)
            if wants["updates"]:
                feed.append("updates", updates)
            for node, delta in updates.items():
                record = delta.get("trace") if isinstance(delta, dict) else None
                if wants["custom"] and isinstance(record, dict) and record.get("kind") == "critic":
                    feed.append("custom", _critic_event(node, record))
            return

        def put(mode: str, data: Any) -> None:
            if wants[mode.partition("|")[0]]:  # a subgraph's part: MODE|NAMESPACE
                feed.append(mode, clean(data))

        if event["event"] == "step":  # LangGraph's own tasks / debug parts, as they are
            put(event["mode"], event["data"])
            return
        if event["event"] == "custom":  # what a LangGraph application wrote, as it is
            put("custom", event["data"])
            return
        if event["event"] == "message":  # a LangGraph application's chat-model messages
            for mode, data in self.messages.parts(event["message"], event["metadata"]):
                put(mode, data)
            return
        put("custom", event)
        if event["event"] == "token":
            agent = event["agent"]
            meta = {"langgraph_node": agent, "run_id": self.run.run_id}
            ident = self._message_id(agent)
            text = event["text"]
            self.partial[agent] = self.partial.get(agent, "") + text
            put("messages-tuple", [chat_chunk(ident, agent, text), meta])
            if len(self.partial[agent]) == len(text):
                put("messages/metadata", {ident: {"metadata": meta}})
            whole = {**chat_chunk(ident, agent, self.partial[agent]), "type": "ai"}
            put("messages/partial", [whole])
        elif event["event"] == "llm_call":
            agent = event["agent"]
            meta = {"langgraph_node": agent, "run_id": self.run.run_id}
            ident = self._message_id(agent)
            calls = event["tool_calls"] or []
            whole = chat_chunk(ident, agent, event["content"] or "", calls, event["usage"])
            if agent not in self.partial:  # no tokens were streamed: one whole chunk
                put("messages-tuple", [whole, meta])
                put("messages/metadata", {ident: {"metadata": meta}})
            elif calls:  # the text was streamed: its tool calls follow in a chunk of their own
                put("messages-tuple", [chat_chunk(ident, agent, "", calls), meta])
            complete = {k: v for k, v in whole.items() if k != "tool_call_chunks"}
            put("messages/complete", [{**complete, "type": "ai"}])
            self.partial.pop(agent, None)
            self.ids.pop(agent, None)
        elif event["event"] == "tool_start":
            self.started.add(event["tool_call_id"])
            put("tools", _tool_started(event["tool_call_id"], event["tool"], event["arguments"]))
        elif event["event"] == "tool_call":
            ident = event["tool_call_id"]
            if ident not in self.started:  # its saved result was reused: it did not start again
                put("tools", _tool_started(ident, event["tool"], event["arguments"]))
            self.started.discard(ident)
            put("tools", self._tool_ended(event))

    def _tool_ended(self, event: ToolCall) -> dict[str, Any]:
        """A workflow's tool call's end as LangGraph streams one in the ``tools`` mode: a
        ``tool-finished`` with its tool message (the id the thread's values give it), or a
        ``tool-error``."""
        ident, agent = event["tool_call_id"], event["agent"]
        self.results[agent] += 1  # its message's id, as the thread's values name it
        if event["is_error"]:
            return {"event": "tool-error", "tool_call_id": ident, "message": event["content"]}
        before = self.before if isinstance(self.before, list) else []
        mine = [m for m in before if isinstance(m, dict) and m.get("_agent") == agent]
        number = sum(m.get("role") == "tool" for m in mine) + self.results[agent]
        said = {"type": "tool", "name": event["tool"], "content": event["content"]}
        output = said | {"id": f"tool-{agent}-{number}", "tool_call_id": ident}
        return {"event": "tool-finished", "tool_call_id": ident, "output": output | _SUCCESS}


_SUCCESS = {"status": "success"}


def _tool_started(ident: str, tool: str, arguments: str) -> dict[str, Any]:
    """A ``tool-started`` part: the call's id, its tool and its arguments (parsed when they
    are JSON, as the model wrote them when not)."""
    try:
        args: Any = json.loads(arguments or "{}")
    except ValueError:
        args = arguments
    return {"event": "tool-started", "tool_call_id": ident, "tool_name": tool, "input": args}


def _critic_event(node: str, record: dict[str, Any]) -> CriticScore:
    return {
        "event": "critic_score",
        "critic": node,
        "judged": record.get("judged"),
        "score": record.get("score"),
        "status": record.get("status"),
        "feedback": record.get("feedback"),
        "round": record.get("round"),
    }


def _left(created_at: Any, after_seconds: Any) -> float:
    """The seconds a run created at ``created_at`` still waits of its ``after_seconds``."""
    if not isinstance(after_seconds, (int, float)) or after_seconds <= 0:
        return 0.0
    start = datetime.fromisoformat(str(created_at)) + timedelta(seconds=after_seconds)
    return max(0.0, (start - datetime.now(UTC)).total_seconds())


async def _checked(check: Check, thread_id: str, text: str | None, has: bool, run: Run) -> None:
    await check(thread_id, text, has)


def stamp(assistant: Assistant, run_id: str | None = None) -> dict[str, Any]:
    """The checkpoint metadata that ties a checkpoint to ``assistant`` (and to run
    ``run_id``): what the server reads a thread's assistant from."""
    metadata: dict[str, Any] = {"assistant_id": assistant.assistant_id}
    metadata["graph_id"] = assistant.graph_id
    if assistant.target:
        metadata["target"] = assistant.target
    if run_id is not None:
        metadata["run_id"] = run_id
    return metadata


class RunManager:
    """The runs of this server process: at most one runs on a thread at a time. Each is
    stored in the ``runs`` table of ``saver``'s store (made here if it is not there yet)."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self.table = RunTable(saver)
        """The store's ``runs`` table."""
        self.live: dict[str, Run] = {}
        """The runs pending or going."""
        self.finished: OrderedDict[str, Run] = OrderedDict()
        """The last :data:`KEEP_FINISHED` runs that ended, oldest first, with their feeds."""
        self.active: dict[str, list[Run]] = {}
        """Pending and running runs per thread, in the order they run."""
        self.launched = asyncio.Event()
        """Set (and replaced) when a run is launched, and when the server closes: what a
        thread's stream waits on between runs."""
        self.closing = False
        self.webhooks = Webhooks()
        """Sends each run's webhook, if it named one, as it ends."""

    @property
    def held(self) -> int:
        """How many runs this server holds in memory: at most the live ones and
        :data:`KEEP_FINISHED` finished ones."""
        return len(self.live) + len(self.finished)

    def busy(self, thread_id: str) -> list[Run]:
        return [r for r in self.active.get(thread_id, []) if not r.done.is_set()]

    def get(self, run_id: str, thread_id: str | None = None) -> Run | None:
        """A run this server holds (going, or finished not long ago)."""
        run = self.live.get(run_id) or self.finished.get(run_id)
        if run is None or (thread_id is not None and run.thread_id != thread_id):
            return None
        return run

    async def stored(self, run_id: str, thread_id: str | None = None) -> dict[str, Any] | None:
        """A run's row of the ``runs`` table (``error`` holds ``{"error", "message"}`` when
        it failed)."""
        row = await asyncio.to_thread(self.table.get, run_id)
        if row is None or (thread_id is not None and row["thread_id"] != thread_id):
            return None
        return row

    async def of_thread(self, thread_id: str) -> list[dict[str, Any]]:
        """The API's ``Run`` objects of a thread's stored runs (a held run as it is now)."""
        rows = await asyncio.to_thread(self.table.of_thread, thread_id)
        held = [self.get(row["run_id"]) for row in rows]
        return [run.json() if run else run_json(row) for run, row in zip(held, rows, strict=True)]

    async def forget(self, *, run_id: str | None = None, thread_id: str | None = None) -> None:
        """Delete a finished run, or every run of a thread, from memory and the store."""
        for held in (self.finished, self.live):
            for run in list(held.values()):
                if run.run_id == run_id or run.thread_id == thread_id:
                    held.pop(run.run_id)
        await self.table.delete(run_id=run_id, thread_id=thread_id)

    async def start(
        self,
        *,
        thread_id: str,
        assistant: Assistant,
        text: str | None,
        resume: Any,
        multitask_strategy: str,
        metadata: dict[str, Any],
        kwargs: dict[str, Any],
        check: Callable[[Run], Awaitable[None]] | None = None,
        new_thread: bool = False,
        modes: list[str] | None = None,
        delay: float = 0.0,
        temporary: bool = False,
        checkpoint_id: str | None = None,
    ) -> Run:
        """Store a run of ``assistant`` on ``thread_id`` and start it (after ``delay``
        seconds, and after the runs before it on the thread have ended, as LangGraph's
        ``enqueue``). ``reject`` refuses it while the thread is busy; ``interrupt`` and
        ``rollback`` cancel the runs going first (``rollback`` deletes them and their
        checkpoints). ``check`` runs first (after those runs, and after the copy of
        ``checkpoint_id`` it starts from) and may refuse the run with an ``ApiError``.
        ``modes``: the stream modes to keep (``None``: all). ``temporary``: its thread is
        deleted when it ends."""
        running = self.busy(thread_id)
        if running and multitask_strategy == "reject":
            raise ApiError(
                409,
                "thread_busy",
                f"thread {thread_id} is busy with run {running[-1].run_id}; wait for it "
                "(GET .../runs/RUN/join), cancel it, or send multitask_strategy='enqueue'",
            )
        if running and multitask_strategy in ("interrupt", "rollback"):
            for other in running:
                await self.cancel(other, action=multitask_strategy, wait=True)
        given = {"after_seconds": delay, "checkpoint_id": checkpoint_id}
        given["on_completion"] = "delete" if temporary else None
        kwargs = kwargs | {k: v for k, v in given.items() if v}  # what a restart reads back
        run = Run(
            run_id=str(uuid.uuid4()),
            thread_id=thread_id,
            assistant=assistant,
            multitask_strategy=multitask_strategy,
            metadata=metadata,
            kwargs=kwargs,
            new_thread=new_thread,
            modes=modes,
            checkpoint_id=checkpoint_id,
            delay=delay,
            temporary=temporary,
        )
        await self.table.put(run.row())  # stored before anyone hears of it
        if self._launch(run, check, text, resume) is None and not delay:
            await self._stored(run)
        return run

    def _launch(
        self,
        run: Run,
        check: Callable[[Run], Awaitable[None]] | None,
        text: str | None,
        resume: Any,
    ) -> Run | None:
        """Start ``run`` after the runs going on its thread; the run it waits for, if any."""
        queue = self.active.setdefault(run.thread_id, [])
        before = next((r for r in reversed(queue) if not r.done.is_set()), None)
        queue.append(run)
        self.live[run.run_id] = run
        run.task = asyncio.get_running_loop().create_task(
            self._execute(run, before, check, text, resume)
        )
        self._wake()
        return before

    def _wake(self) -> None:
        self.launched.set()
        self.launched = asyncio.Event()

    def of(self, thread_id: str) -> list[Run]:
        """The runs of ``thread_id`` this server holds (finished not long ago, then live), in
        the order they were created."""
        held = [*self.finished.values(), *self.live.values()]
        return sorted((r for r in held if r.thread_id == thread_id), key=lambda r: r.created_at)

    async def recover(
        self,
        assistant_of: Callable[[str], Assistant],
        check: Check,
        exists: Callable[[str], Awaitable[bool]],
    ) -> None:
        """On starting a server: runs stored ``running`` (their server died) read
        ``interrupted``; runs stored ``pending`` start again, per thread in the order they were
        accepted, each checked by ``check`` as it starts."""
        for row in await asyncio.to_thread(self.table.unfinished):
            run_id, thread_id = row["run_id"], row["thread_id"]
            if row["status"] == "running":
                await self.table.set_status(run_id, "interrupted", now())
                continue
            kwargs = row["kwargs"] or {}
            command = kwargs.get("command") or {}
            has_resume = isinstance(command, dict) and "resume" in command
            try:
                assistant = assistant_of(str(row["assistant_id"]))
                text = assistant.text_of(kwargs.get("input"))
            except ApiError as exc:
                error = {"error": exc.code, "message": exc.message}
                await self.table.set_status(run_id, "error", now(), error)
                continue
            new_thread = not await exists(thread_id)
            strategy = str(row["multitask_strategy"])
            run = Run(
                run_id=run_id,
                thread_id=thread_id,
                assistant=assistant,
                multitask_strategy=strategy,
                metadata=row["metadata"] or {},
                kwargs=kwargs,
                created_at=str(row["created_at"]),
                new_thread=new_thread,
                checkpoint_id=kwargs.get("checkpoint_id") or None,
                delay=_left(row["created_at"], kwargs.get("after_seconds")),
                temporary=new_thread and kwargs.get("on_completion") == "delete",
            )
            checked = functools.partial(_checked, check, thread_id, text, has_resume)
            resume = command.get("resume") if has_resume else None
            self._launch(run, None if new_thread else checked, text, resume)

    async def _stored(self, run: Run) -> None:
        """Return once the first checkpoint ``run`` streamed is committed, or it ended.

        LangGraph streams a checkpoint while its save may still be under way, and starts the
        next step's save only after it (``durability="sync"``): the first is committed when
        the store has it, or at the latest when a second one streams."""
        while True:
            moved = run.moved
            if run.done.is_set() or len(run.checkpoints) > 1:
                return
            if run.checkpoints:
                conf = {"thread_id": run.thread_id, "checkpoint_ns": ""}
                conf["checkpoint_id"] = run.checkpoints[0]
                if await self.saver.aget_tuple({"configurable": conf}) is not None:
                    return
            await moved.wait()

    def _finish(self, run: Run) -> None:
        """Hold ``run`` among the finished ones, forgetting the oldest beyond the bound."""
        self.live.pop(run.run_id, None)
        self.finished[run.run_id] = run
        while len(self.finished) > KEEP_FINISHED:
            self.finished.popitem(last=False)

    async def _execute(
        self,
        run: Run,
        before: Run | None,
        check: Callable[[Run], Awaitable[None]] | None,
        text: str | None,
        resume: Any,
    ) -> None:
        try:
            if run.delay:
                await asyncio.sleep(run.delay)
            if before is not None:
                await before.done.wait()
            if check is not None:  # at the checkpoint it starts from, if it names one
                await check(run)
            if run.checkpoint_id is not None:
                await self._copy_checkpoint(run)
            if not run.assistant.is_app and (text is not None or ends(run.kwargs.get("command"))):
                await self._drop_pending(run)  # new input on top, or {"goto": "__end__"}
            await self._drive(run, text, resume)
        except asyncio.CancelledError:
            run.status = "interrupted"
            run.error = {"error": CANCELLED, "message": f"run {run.run_id} was cancelled"}
            if run.cancel_action == "rollback":
                await asyncio.to_thread(self.saver.delete_for_runs, [run.run_id])
        except ApiError as exc:
            run.status = "error"
            run.error = {"error": exc.code, "message": exc.message}
        except Exception as exc:  # reported to the client as an error event; never a traceback
            run.status = "error"
            run.error = {"error": type(exc).__name__, "message": str(exc)}
        finally:
            run.updated_at = now()
            try:
                if run.cancel_action == "rollback":
                    await self.table.delete(run_id=run.run_id)
                else:
                    await self.table.set_status(run.run_id, run.status, run.updated_at, run.error)
            except Exception:  # the store failed: the run's row keeps its last status
                log.exception("run %s: storing its status failed", run.run_id)
            if run.error is not None:
                run.feed.append("error", clean(run.error))
            run.feed.close()
            queue = self.active.get(run.thread_id, [])
            if run in queue:
                queue.remove(run)
            if not queue:
                self.active.pop(run.thread_id, None)
            if run.cancel_action == "rollback":  # deleted: no longer a run of the thread
                self.live.pop(run.run_id, None)
            else:
                self._finish(run)
            if run.temporary:  # on_completion="delete": its thread goes before anyone hears
                try:
                    await asyncio.to_thread(self.saver.delete_thread, run.thread_id)
                    await self.forget(thread_id=run.thread_id)
                except Exception:
                    log.exception("run %s: deleting its thread failed", run.run_id)
            run.done.set()
            run.notify()
            self.webhooks.ended(run)

    async def _copy_checkpoint(self, run: Run) -> None:
        """Make the checkpoint ``run`` starts from the thread's head: LangGraph's
        ``update_state`` with ``as_node="__copy__"`` (a new branch; the history keeps the old
        one). The copy carries no metadata of its own: the run's next checkpoint does, and a
        copy with nothing pending, which the run may leave as it is, gets a checkpoint on top
        that names the assistant (LangGraph's ``as_node=END`` update: nothing to clear)."""
        compiled = built(run.assistant.source).compile(self.saver)
        conf = {"thread_id": run.thread_id, "checkpoint_ns": "", "checkpoint_id": run.checkpoint_id}
        snapshot = await compiled.aget_state({"configurable": conf})
        if snapshot.config is None:
            raise ApiError(
                404,
                "checkpoint_not_found",
                f"no checkpoint {run.checkpoint_id} in thread {run.thread_id}; GET "
                f"/threads/{run.thread_id}/history lists them",
            )
        kept = {k: v for k, v in (snapshot.metadata or {}).items() if k not in _OWN}
        copied = await compiled.aupdate_state(snapshot.config, None, as_node="__copy__")
        if not pending_nodes(await compiled.aget_state(copied)):
            named = cast(RunnableConfig, {**copied, "metadata": kept | stamp(run.assistant)})
            await compiled.aupdate_state(named, None, as_node=END)

    async def _drop_pending(self, run: Run) -> None:
        """Clear the tasks a workflow's thread has pending (:meth:`GraphRun.drop_pending`), so
        new input is the next turn on top of the state it stopped in, as LangGraph's loop drops
        them for a LangGraph application's new input (its run does it itself)."""
        task = Task(input="", swarm=run.assistant.source, id=run.thread_id)
        async with GraphRun(task, self.saver) as graph_run:
            await graph_run.drop_pending(stamp(run.assistant))

    async def _drive(self, run: Run, text: str | None, resume: Any) -> None:
        run.status = "running"
        run.updated_at = now()
        await self.table.set_status(run.run_id, run.status, run.updated_at)
        metadata = _scalars(run.metadata) | stamp(run.assistant, run.run_id)
        task = Task(
            input=text or "",
            swarm=run.assistant.source,
            id=run.thread_id,
            conf=TaskConfig(stream=True),
            metadata=metadata,
            new_thread=run.new_thread,  # a thread id made just now has nothing stored
        )
        async with GraphRun(task, self.saver) as graph_run:
            response = await graph_run.drive(
                resume=resume,
                events=_Sink(run),
                states=True,
                new_turn=text is not None,  # new input on a finished thread: its next turn
                **run.assistant.run_options(run.run_id, run.thread_id, run.kwargs),
                interrupt_before=run.kwargs.get("interrupt_before"),
                interrupt_after=run.kwargs.get("interrupt_after"),
                durability=run.kwargs.get("durability") or "sync",
                # a background run passes on those it was created with (its feed holds them)
                steps=run.modes or run.kwargs.get("stream_mode") or (),
            )
        if run.values is None or response.status not in ("finished", "interrupted"):
            run.values = chat_values(clean(response.state or {}), run.assistant.is_app)
        if response.interrupts:  # as the thread's state has them (LangGraph's Interrupt items)
            compiled = built(run.assistant.source).compile(self.saver)
            config: RunnableConfig = {"configurable": {"thread_id": run.thread_id}}
            asked = list((await compiled.aget_state(config)).interrupts)
            run.interrupts = clean(asked or response.interrupts)
            run.feed.append("values", {**(run.values or {}), "__interrupt__": run.interrupts})
        run.status = _STATUS.get(response.status, "error")
        if run.status == "error":
            run.error = _error_of(str(response.msg), run.assistant.is_app)

    async def cancel(self, run: Run, *, action: str = "interrupt", wait: bool = False) -> None:
        """Stop ``run``, as LangGraph's server does: its saved checkpoints stay
        (``interrupt``: the thread reads ``interrupted`` where the run stopped; a run with
        input ``null`` continues it, new input goes on top of it) or are deleted with it
        (``rollback``: the thread stands where it stood before the run)."""
        if run.done.is_set() or run.status not in ("pending", "running"):  # ended, or ending
            if wait:
                await run.done.wait()
            return
        if action not in ("interrupt", "rollback"):
            raise ApiError(422, "invalid_action", "action must be 'interrupt' or 'rollback'")
        run.cancel_action = action
        assert run.task is not None
        run.task.cancel()
        if wait:
            await run.done.wait()

    async def cancel_many(self, runs: list[Run], action: str) -> None:
        """Cancel ``runs`` (those still going; the others have ended) and wait for them."""
        for run in runs:
            await self.cancel(run, action=action)
        for run in runs:
            await run.done.wait()

    async def close(self) -> None:
        """Cancel every run still going (server shutdown); they stay resumable."""
        self.closing = True
        self._wake()  # thread streams end
        live = [r for r in self.live.values() if not r.done.is_set()]
        for run in live:
            await self.cancel(run)
        for run in live:
            await run.done.wait()
        await self.webhooks.close()
