"""What a request may carry, checked at the boundary: ids, request bodies (pydantic models of
the API's bodies), query numbers and flags, and how deep a body may nest. A request that
breaks a rule is a 400/422 that names the field and the rule, before anything is stored.

Ids (threads, runs, checkpoints, assistants) are 1 to 256 characters of ``A-Z a-z 0-9`` and
``- _ . : @ + = ~``: no spaces, control characters or anything outside ASCII.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, ValidationError

from ._wire import ApiError

__all__ = [
    "ID_RULE",
    "MAX_DEPTH",
    "MAX_METADATA",
    "AssistantSearch",
    "History",
    "MAX_BATCH",
    "RunCreate",
    "RunsCancel",
    "StateAt",
    "StateUpdate",
    "ThreadCreate",
    "ThreadPatch",
    "ThreadSearch",
    "before_id",
    "check_command",
    "check_run_options",
    "check_depth",
    "check_id",
    "durability_of",
    "query_count",
    "validate",
]

ID_RULE = "1 to 256 characters of A-Z a-z 0-9 - _ . : @ + = ~"
"""The one alphabet and length of every id, as messages say it."""

_ID = re.compile(r"[A-Za-z0-9_.:@+=~-]{1,256}")

MAX_DEPTH = 64
"""How deep a request body may nest (objects and lists), counting the body itself."""

MAX_METADATA = 64 * 1024
"""The most bytes a ``metadata`` object may take as JSON."""

MAX_COUNT = 10_000
"""The largest ``limit`` or ``offset`` served."""

MAX_DELAY = 7 * 24 * 3600
"""The longest ``after_seconds`` a run may wait before it starts (a week)."""


def check_id(field: str, value: str) -> str:
    """``value`` when it is an id (:data:`ID_RULE`), else a 422 naming ``field``."""
    if not _ID.fullmatch(value):
        raise ApiError(422, "invalid_id", f"{field} must be {ID_RULE}; got {_shown(value)}")
    return value


def _shown(value: str) -> str:
    return ascii(value[:40] + ("…" if len(value) > 40 else ""))


def _id(value: str) -> str:
    if not _ID.fullmatch(value):
        raise ValueError(f"must be {ID_RULE}")
    return value


def _small(value: dict[str, Any]) -> dict[str, Any]:
    size = len(orjson.dumps(value, default=str))
    if size > MAX_METADATA:
        raise ValueError(f"is {size} bytes as JSON; at most {MAX_METADATA} are kept")
    return value


Id = Annotated[str, Field(strict=True), AfterValidator(_id)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_COUNT)]
Metadata = Annotated[dict[str, Any], AfterValidator(_small)]
Text = Annotated[str, Field(strict=True)]


class _Body(BaseModel):
    """A request body: the fields the server reads are checked; other fields LangGraph's
    clients send are let through (and not used)."""

    model_config = ConfigDict(extra="allow")


class CheckpointRef(_Body):
    """The API's ``Checkpoint`` object as a request names one."""

    checkpoint_id: Id | None = None


class ThreadCreate(_Body):
    """``POST /threads``."""

    thread_id: Id | None = None
    metadata: Metadata | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None


class ThreadPatch(_Body):
    """``PATCH /threads/{thread_id}``."""

    metadata: Metadata | None = None


class ThreadSearch(_Body):
    """``POST /threads/search`` and ``/threads/count``."""

    ids: list[Id] | None = None
    metadata: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: Count = 10
    offset: Count = 0


class AssistantSearch(_Body):
    """``POST /assistants/search``, ``/assistants/count`` and ``/agents/search``."""

    graph_id: Text | None = None
    name: Text | None = None
    metadata: dict[str, Any] | None = None
    limit: Count = 10
    offset: Count = 0


def before_id(value: Any) -> str | None:
    """The checkpoint id of a history ``before``: an id, a checkpoint
    (``{"checkpoint_id": ...}``, as the SDK types it) or a checkpoint config
    (``{"configurable": {"checkpoint_id": ...}}``, as LangGraph's server takes it)."""
    if isinstance(value, dict) and isinstance(value.get("configurable"), dict):
        value = value["configurable"]
    found = value.get("checkpoint_id") if isinstance(value, dict) else value
    return found if isinstance(found, str) and _ID.fullmatch(found) else None


def _before(value: Any) -> Any:
    if value is not None and before_id(value) is None:
        raise ValueError(
            'must be a checkpoint id, {"checkpoint_id": ID} (the checkpoint of a history '
            'entry) or {"configurable": {"checkpoint_id": ID}}, with the id ' + ID_RULE
        )
    return value


class History(_Body):
    """``GET/POST /threads/{thread_id}/history``."""

    limit: Count = 10
    before: Annotated[Any, AfterValidator(_before)] = None
    metadata: dict[str, Any] | None = None
    checkpoint: CheckpointRef | None = None
    select: list[Text] | None = None


class StateAt(_Body):
    """``POST /threads/{thread_id}/state/checkpoint``."""

    checkpoint: CheckpointRef | None = None
    select: list[Text] | None = None


class StateUpdate(_Body):
    """``POST /threads/{thread_id}/state``."""

    values: dict[str, Any] | None = None
    as_node: Text | None = None
    checkpoint_id: Id | None = None
    checkpoint: CheckpointRef | None = None


class LangSmithTracer(BaseModel):
    """A run's ``langsmith_tracer``, as LangGraph's server reads it (its LangSmith project
    and dataset example). Without LangSmith configured, LangGraph's server only puts them in
    the run's config, where nothing reads them; this server, which has no LangSmith, reads
    and checks them and sends no trace."""

    model_config = ConfigDict(extra="forbid")

    project_name: Text | None = None
    example_id: Text | None = None


class RunCreate(_Body):
    """The run routes' bodies (``…/runs``, ``…/runs/stream``, ``…/runs/wait``): every field
    LangGraph's clients send; another is a 422 naming it."""

    model_config = ConfigDict(extra="forbid")

    assistant_id: Annotated[str, Field(strict=True, max_length=256)] = ""
    thread_id: Id | None = None
    input: Any = None
    command: Any = None  # checked by check_command, which names the field that is wrong
    metadata: Metadata | None = None
    stream_mode: Text | list[Text] | None = None
    stream_subgraphs: StrictBool | None = None
    multitask_strategy: Text | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    interrupt_before: Literal["*"] | list[Text] | None = None
    interrupt_after: Literal["*"] | list[Text] | None = None
    after_seconds: Annotated[float, Field(ge=0, le=MAX_DELAY)] | None = None
    checkpoint_id: Id | None = None
    checkpoint: CheckpointRef | None = None
    config: dict[str, Any] | None = None
    context: Any = None  # checked with the assistant's context schema
    webhook: Any = None  # checked by check_webhook
    stream_resumable: StrictBool | None = None  # every stream is resumable
    durability: Literal["sync", "async", "exit"] | None = None
    checkpoint_during: StrictBool | None = None  # the older name of durability
    strict_resume: StrictBool | None = None
    feedback_keys: list[Text] | None = None  # refused by check_run_options: no LangSmith
    langsmith_tracer: LangSmithTracer | None = None


def durability_of(body: Mapping[str, Any], is_app: bool) -> str | None:
    """The ``durability`` a run asks for, as LangGraph's server reads it: ``durability``, else
    ``checkpoint_during`` (its older name: ``false`` is ``"exit"``, ``true`` ``"async"``),
    else ``None`` (this server's own: ``"sync"``). A workflow (``is_app`` false) saves each
    step before the next, its trajectory row with it: ``"async"`` is served as ``"sync"``
    (the step is saved, sooner) and ``"exit"`` (no step saved until the run ends) is a 422
    naming the field."""
    field, durability = "durability", body.get("durability")
    if durability is None and body.get("checkpoint_during") is not None:
        field = "checkpoint_during"
        durability = "async" if body["checkpoint_during"] else "exit"
    if durability == "exit" and not is_app:
        given = "checkpoint_during=false" if field == "checkpoint_during" else "durability='exit'"
        raise ApiError(
            422,
            "invalid_run",
            f"{field}: {given} saves no step until the run ends, but a workflow saves each "
            "step (its trajectory) before the next; leave it out, or use durability='sync' "
            "(a LangGraph application takes 'exit')",
        )
    if durability is not None and not is_app:
        return "sync"
    return None if durability is None else str(durability)


def check_run_options(body: Mapping[str, Any]) -> None:
    """A 422 for a run option LangGraph's server serves only with LangSmith, which this
    server has not: ``feedback_keys`` (LangGraph's server asks LangSmith for a feedback URL
    per key when the run ends, and without LangSmith that call fails)."""
    if body.get("feedback_keys"):
        raise ApiError(
            422,
            "invalid_run",
            "feedback_keys: feedback URLs are made by LangSmith, which this server does not "
            "use; leave feedback_keys out",
        )


class RunsCancel(_Body):
    """``POST /runs/cancel``: runs by thread and ids, by status, or by assistant."""

    thread_id: Id | None = None
    run_ids: list[Id] | None = None
    status: Literal["pending", "running", "all"] | None = None
    assistant_id: Annotated[str, Field(strict=True, max_length=256)] | None = None


MAX_BATCH = 100
"""The most runs one ``POST /runs/batch`` creates."""


def validate(model: type[_Body], body: Mapping[str, Any]) -> None:
    """Check ``body`` against ``model``; a 422 naming every field that breaks its rule (the
    first problem of each)."""
    try:
        model.model_validate(body)
    except ValidationError as exc:
        problems: dict[str, str] = {}
        for error in exc.errors(include_url=False, include_input=False):
            field = str(error["loc"][0]) if error["loc"] else "body"
            problems.setdefault(field, f"{field}: {error['msg']}")
        raise ApiError(422, "invalid_field", "; ".join(problems.values())) from None


_COMMAND_FIELDS = ("resume", "update", "goto")
_GOTO_RULE = (
    'a node name, {"node": NAME, "input": VALUE} (a Send: NAME runs with that input), or a '
    "list of them"
)


def check_command(value: Any) -> dict[str, Any]:
    """A run's ``command`` (``{}`` for none), as LangGraph's ``Command``: ``resume`` (any
    value), ``update`` (an object of state keys, or a list of ``[key, value]`` pairs) and
    ``goto`` (:data:`_GOTO_RULE`); anything else is a 422 naming the field and the rule."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ApiError(
            422,
            "invalid_command",
            'command must be an object like {"resume": ...} or {"update": {...}, "goto": "node"}',
        )
    for key in value:
        if key not in _COMMAND_FIELDS:
            raise ApiError(
                422,
                "invalid_command",
                f"command.{_shown(str(key))} is not a field of a command; it takes "
                f"{', '.join(_COMMAND_FIELDS)}",
            )
    update = value.get("update")
    pairs = isinstance(update, list) and all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in update
    )
    if update is not None and not isinstance(update, dict) and not pairs:
        raise ApiError(
            422,
            "invalid_command",
            "command.update must be an object of state keys to values, or a list of "
            '[key, value] pairs, like {"messages": [...]}',
        )
    goto = value.get("goto")
    for n, item in enumerate(goto if isinstance(goto, list) else [goto]):
        where = f"command.goto[{n}]" if isinstance(goto, list) else "command.goto"
        if item is None and not isinstance(goto, list):
            continue
        if isinstance(item, dict):
            node, extra = item.get("node"), sorted(set(item) - {"node", "input"})
            if isinstance(node, str) and node and "input" in item and not extra:
                continue
        elif isinstance(item, str) and item:
            continue
        raise ApiError(422, "invalid_command", f"{where} must be {_GOTO_RULE}")
    return dict(value)


def check_depth(body: Mapping[str, Any]) -> None:
    """A 422 naming the top-level field of ``body`` that nests deeper than :data:`MAX_DEPTH`."""
    stack: list[tuple[Any, int, str]] = [(v, 2, str(k)) for k, v in body.items()]
    while stack:
        value, depth, field = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise ApiError(
                    422, "too_deep", f"{field} nests deeper than {MAX_DEPTH} levels; flatten it"
                )
            children = value.values() if isinstance(value, dict) else value
            stack.extend((c, depth + 1, field) for c in children if isinstance(c, (dict, list)))


def query_count(query: Mapping[str, str], name: str, default: int) -> int:
    """Query parameter ``name`` as a count (``0`` to :data:`MAX_COUNT`), else a 422 naming it."""
    raw = query.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_COUNT:
        rule = f"a whole number from 0 to {MAX_COUNT}"
        raise ApiError(422, "invalid_query", f"{name} must be {rule}; got {_shown(raw)}")
    return int(raw)
