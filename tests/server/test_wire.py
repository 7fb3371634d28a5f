"""What goes over the wire: JSON for values orjson refuses, the shapes ``jsonable`` makes, and a
stream's event ids (several events in one write, each with its own id; a reader that comes
back with ``Last-Event-ID`` gets the rest and nothing twice)."""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from typing import Any

import httpx

from aworld_graph.server._wire import dumps, jsonable, sse
from tests.server import apps
from tests.server.conftest import LiveServer


def test_dumps_takes_what_orjson_refuses() -> None:
    assert json.loads(dumps({"n": 2**70})) == {"n": 2**70}
    assert json.loads(dumps({"s": "lone \ud800 surrogate"})) == {"s": "lone \ud800 surrogate"}
    assert dumps({"text": "naïve ✓"}) == '{"text":"naïve ✓"}'.encode()
    assert sse("values", {"a": 1}, "7") == b'id: 7\nevent: values\ndata: {"a":1}\n\n'


@dataclasses.dataclass
class _Point:
    x: int


def test_jsonable_makes_plain_json_types() -> None:
    deep: Any = "leaf"
    for _ in range(70):
        deep = [deep]
    value = {
        1: ("a", {2}),
        "od": OrderedDict(b=None),
        "point": _Point(3),
        "nested": [{"k": [1.5, True]}],
    }
    assert jsonable(value) == {
        "1": ["a", [2]],
        "od": {"b": None},
        "point": {"x": 3},
        "nested": [{"k": [1.5, True]}],
    }
    out = jsonable(deep)
    for _ in range(65):
        out = out[0]
    assert isinstance(out, str)  # past depth 64 a value is text, never a recursion error


def _events(text: str) -> list[tuple[int, str]]:
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        if "id" in fields:
            out.append((int(fields["id"]), fields["event"]))
    return out


async def test_event_ids_and_a_reader_coming_back(server: LiveServer) -> None:
    apps.GATE.set()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        run = {"assistant_id": "counter", "input": {"input": "a b c"}}
        run["stream_mode"] = ["values", "updates", "custom"]
        whole = (await http.post("/runs/stream", json=run)).text
        events = _events(whole)
        ids = [i for i, _ in events]
        assert ids == sorted(set(ids)) and len(events) > 10
        run_id = json.loads(whole.split("data: ", 1)[1].split("\n", 1)[0])["run_id"]
        thread = (await http.get(f"/runs/{run_id}")).json()["thread_id"]
        middle = ids[len(ids) // 2]
        rest = await http.get(
            f"/threads/{thread}/runs/{run_id}/stream",
            params={"stream_mode": ["values", "updates", "custom"]},
            headers={"Last-Event-ID": str(middle)},
        )
        assert _events(rest.text) == [e for e in events if e[0] > middle]
