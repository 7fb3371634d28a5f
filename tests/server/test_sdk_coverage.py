"""docs/server.md, "Every SDK call", against the installed Python ``langgraph-sdk``: every
public method of the async and sync clients' ``assistants``, ``threads``, ``runs``, ``crons``
and ``store`` has one line there, listing every parameter it takes (but ``headers`` and
``params``, the HTTP layer's), and says what the server does with it. A new SDK method or
parameter fails here until the doc says how it is served. What a line claims is driven with
the real client in tests/server/test_sdk_params.py and the other server tests."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client, get_sync_client

DOC = Path(__file__).resolve().parents[2] / "docs" / "server.md"
SUB_CLIENTS = ("assistants", "threads", "runs", "crons", "store")
HTTP_LAYER = {"self", "headers", "params"}
"""Parameters every method takes and sends as given (the request's headers and query)."""

_LINE = re.compile(r"^- `(\w+)\.(\w+)\(([^)]*)\)`: (.+)$")


def sdk_calls(client: Any) -> dict[tuple[str, str], set[str]]:
    """``(sub-client, method) → its parameters`` (without :data:`HTTP_LAYER`)."""
    calls = {}
    for sub in SUB_CLIENTS:
        for name, fn in inspect.getmembers(type(getattr(client, sub)), inspect.isfunction):
            if not name.startswith("_"):
                params = set(inspect.signature(fn).parameters) - HTTP_LAYER
                calls[(sub, name)] = params
    return calls


def documented() -> dict[tuple[str, str], tuple[list[str], str]]:
    """``(sub-client, method) → (its parameters, what the line says)`` from the doc's section."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Every SDK call\n", 1)[1].split("\n## ", 1)[0]
    lines: dict[tuple[str, str], tuple[list[str], str]] = {}
    for line in section.splitlines():
        found = _LINE.match(line)
        if found is None:
            assert not line.startswith("- `"), f"a call line the test cannot read: {line}"
            continue
        sub, method, params, said = found.groups()
        assert (sub, method) not in lines, f"{sub}.{method} is listed twice"
        lines[(sub, method)] = ([p.strip() for p in params.split(",") if p.strip()], said)
    return lines


@pytest.fixture(scope="module")
def clients() -> list[dict[tuple[str, str], set[str]]]:
    # no request is made: the clients are only read
    return [
        sdk_calls(get_client(url="http://127.0.0.1:9", api_key=None)),
        sdk_calls(get_sync_client(url="http://127.0.0.1:9", api_key=None)),
    ]


def test_the_async_and_sync_clients_have_the_same_calls(
    clients: list[dict[tuple[str, str], set[str]]],
) -> None:
    async_calls, sync_calls = clients
    assert async_calls == sync_calls
    assert len(async_calls) >= 45  # the SDK was read (every sub-client's methods)


def test_every_sdk_method_has_one_line_with_every_parameter(
    clients: list[dict[tuple[str, str], set[str]]],
) -> None:
    calls = clients[0]
    lines = documented()
    missing = sorted(f"{s}.{m}" for s, m in calls.keys() - lines.keys())
    unknown = sorted(f"{s}.{m}" for s, m in lines.keys() - calls.keys())
    assert not missing, f"docs/server.md has no line for {missing}"
    assert not unknown, f"docs/server.md lists calls the SDK does not have: {unknown}"
    for (sub, method), params in calls.items():
        listed, _ = lines[(sub, method)]
        assert len(listed) == len(set(listed)), f"{sub}.{method}: a parameter listed twice"
        assert set(listed) == params, (
            f"{sub}.{method}: the doc lists {sorted(set(listed) - params)} that the SDK lacks "
            f"and lacks {sorted(params - set(listed))}"
        )


_REFUSED = re.compile(r"`(\w+)(?:=[^`]*)?` (?:is )?a 422")
"""How a line says a parameter is refused: ```ttl` is a 422``, ```strategy="x"` is a 422``."""


def test_every_line_says_how_the_call_is_served() -> None:
    for (sub, method), (params, said) in documented().items():
        call = f"{sub}.{method}"
        assert said.startswith(("served", "not served")), f"{call}: {said}"
        if said.startswith("not served"):
            assert "404" in said, f"{call} must say what the client gets: {said}"
        refused = _REFUSED.findall(said)
        assert len(refused) == said.count("422"), f"{call}: say which parameter is a 422"
        unread = said.split("not read: ", 1)[1] if "not read: " in said else ""
        unread = re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", unread).split(", as ")[0])
        for name in [*refused, *unread]:
            assert name in params, f"{call}: {name} is not one of its parameters"


def test_no_sdk_parameter_is_accepted_and_left_unread() -> None:
    unread = {f"{s}.{m}": said for (s, m), (_, said) in documented().items() if "not read" in said}
    assert not unread, unread


def test_every_sdk_call_is_served() -> None:
    unserved = [f"{s}.{m}" for (s, m), (_, p) in documented().items() if p.startswith("not served")]
    assert not unserved, unserved
