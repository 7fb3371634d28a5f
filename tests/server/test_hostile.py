"""A hostile client against a real server on 127.0.0.1: cross-site requests (also from real
headless Chromium), DNS rebinding, deep and big input, wrong-typed fields and ids, accepted
runs across ``kill -9``, tracebacks in the log, and connections that never finish their
headers. Every refusal is a JSON 4xx that names the header or field, and the server goes on
serving everyone else."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from langgraph_sdk import get_client

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.cli import main
from aworld_graph.server import KEEP_FINISHED, create_app
from tests.server import apps
from tests.server.conftest import LiveServer, assistants
from tests.server.test_restart import Served, _port
from tests.viz.chromium import Chromium

RUN = {"assistant_id": "counter", "input": {"input": "three words here"}}


def _refused(response: httpx.Response, statuses: tuple[int, ...], *words: str) -> None:
    assert response.status_code in statuses, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"code", "message"}, body
    for word in words:
        assert word in body["message"], (word, body)
    assert "Traceback" not in response.text


def _count(http: httpx.Client) -> int:
    response = http.post("/threads/count", json={})
    assert response.status_code == 200, response.text
    return int(response.json())


# -- 1. cross-site requests ---------------------------------------------------------------


def test_cross_site_requests_run_nothing(serve: Callable[..., LiveServer]) -> None:
    server = serve()
    body = json.dumps(RUN)
    with httpx.Client(base_url=server.url) as http:
        text = {"Content-Type": "text/plain"}
        _refused(
            http.post("/runs/wait", content=body, headers=text), (415,), "Content-Type", "json"
        )
        _refused(http.post("/runs/wait", content=body), (415,), "Content-Type")  # none at all
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        _refused(http.post("/threads", content=b"a=1", headers=form), (415,), "Content-Type")
        evil = {"Origin": "http://evil.example"}
        _refused(http.post("/runs/wait", json=RUN, headers=evil), (403,), "Origin")
        _refused(http.post("/threads", json={}, headers={"Origin": "null"}), (403,), "Origin")
        site = {"Sec-Fetch-Site": "cross-site"}
        _refused(http.post("/runs/wait", json=RUN, headers=site), (403,), "Sec-Fetch-Site")
        other_port = {"Origin": "http://127.0.0.1:1"}  # another server of this machine
        _refused(http.post("/threads", json={}, headers=other_port), (403,), "Origin")
        assert _count(http) == 0
        # the same requests as the server's own page sends them
        own = {"Origin": server.url, "Sec-Fetch-Site": "same-origin"}
        thread = http.post("/threads", json={}, headers=own).json()["thread_id"]
        _refused(http.delete(f"/threads/{thread}", headers=evil), (403,), "Origin")
        _refused(http.patch(f"/threads/{thread}", json={}, headers=evil), (403,), "Origin")
        assert http.get(f"/threads/{thread}", headers=evil).status_code == 200  # a read
        assert http.post("/runs/wait", json=RUN, headers=own).json()["answer"] == "3 words"
        assert http.delete(f"/threads/{thread}", headers=own).status_code == 204


def test_a_configured_origin_is_allowed_with_a_preflight(serve: Callable[..., LiveServer]) -> None:
    server = serve(cors_origins=["http://app.test"])
    app = {"Origin": "http://app.test", "Sec-Fetch-Site": "cross-site"}
    with httpx.Client(base_url=server.url) as http:
        preflight = http.options(
            "/threads",
            headers={**app, "Access-Control-Request-Method": "POST"}
            | {"Access-Control-Request-Headers": "content-type"},
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "http://app.test"
        created = http.post("/threads", json={}, headers=app)
        assert created.status_code == 200, created.text
        evil = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
        _refused(http.post("/threads", json={}, headers=evil), (403,), "Origin")


async def test_a_page_elsewhere_cannot_start_a_run_from_chromium(
    serve: Callable[..., LiveServer], tmp_path: Path
) -> None:
    """A page off this server (a local file: a foreign origin) posts a run as a browser
    lets any page: ``no-cors`` with a ``text/plain`` body, and as a CORS request with JSON."""
    server = serve()
    attacker = tmp_path / "attacker.html"
    attacker.write_text("<!doctype html><title>elsewhere</title>", encoding="utf-8")
    body = json.dumps(RUN)
    script = f"""(async () => {{
        const url = {json.dumps(server.url + "/runs/wait")}, out = [];
        try {{
            const r = await fetch(url, {{method: "POST", mode: "no-cors",
                headers: {{"Content-Type": "text/plain"}}, body: {json.dumps(body)}}});
            out.push("no-cors " + r.type);
        }} catch (e) {{ out.push("no-cors " + e.name); }}
        try {{
            const r = await fetch(url, {{method: "POST",
                headers: {{"Content-Type": "application/json"}}, body: {json.dumps(body)}}});
            out.push("cors " + r.status);
        }} catch (e) {{ out.push("cors " + e.name); }}
        return out;
    }})()"""
    async with Chromium(tmp_path / "profile") as browser:
        await browser.open(attacker)
        outcome = await browser.js(script)
    assert outcome == ["no-cors opaque", "cors TypeError"], outcome  # nothing readable
    assert server.url + "/runs/wait" in browser.requests  # the request did go out
    with httpx.Client(base_url=server.url) as http:
        assert _count(http) == 0  # and no run happened


# -- 2. DNS rebinding ---------------------------------------------------------------------


def test_a_host_outside_the_allow_list_is_refused(serve: Callable[..., LiveServer]) -> None:
    server = serve()
    port = server.url.rsplit(":", 1)[1]
    with httpx.Client(base_url=server.url) as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        rebound = {"Host": f"rebind.evil.example:{port}"}
        for method, path in (("POST", "/threads/search"), ("GET", f"/threads/{thread}")):
            _refused(
                http.request(method, path, json={}, headers=rebound), (400, 403), "Host", "rebind"
            )
        _refused(http.get("/", headers={"Host": "rebind.evil.example"}), (400, 403), "Host")
        for host in (f"localhost:{port}", f"[::1]:{port}", "127.0.0.1", "LOCALHOST"):
            assert http.get(f"/threads/{thread}", headers={"Host": host}).status_code == 200


def test_allowed_hosts_are_configurable(serve: Callable[..., LiveServer]) -> None:
    server = serve(allowed_hosts=["box.test"])
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/ok", headers={"Host": "box.test:2024"}).status_code == 200
        assert http.get("/ok", headers={"Host": "localhost"}).status_code == 200
        _refused(http.get("/ok", headers={"Host": "other.test"}), (400, 403), "Host")
    opened = serve(allowed_hosts=["*"])
    with httpx.Client(base_url=opened.url) as http:
        assert http.get("/ok", headers={"Host": "anything.test"}).status_code == 200
    helped = CliRunner().invoke(main, ["serve", "--help"])
    assert "--allowed-host" in helped.output


# -- 3, 4. deep, big and kept input -------------------------------------------------------


def test_deep_input_is_refused_and_listing_keeps_working(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve()
    deep = '{"a": ' * 950 + '"x"' + "}" * 950  # as JSON: the client need not recurse
    with httpx.Client(base_url=server.url) as http:
        json_type = {"Content-Type": "application/json"}
        for path, head in (("/threads", ""), ("/runs/wait", json.dumps(RUN)[1:-1] + ", ")):
            raw = f'{{{head}"metadata": {deep}}}'.encode()
            _refused(http.post(path, content=raw, headers=json_type), (400, 413, 422), "metadata")
        raw = b'{"metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        _refused(http.post("/threads", content=raw, headers=json_type), (400, 413, 422))
        assert _count(http) == 0
        assert http.post("/threads/search", json={}).status_code == 200
        assert http.get("/").status_code == 200


def test_threads_are_kept_in_the_store_not_in_memory(
    serve: Callable[..., LiveServer], store: TrajectorySaver
) -> None:
    server = serve()
    with httpx.Client(base_url=server.url) as http:
        made = http.post("/threads", json={"metadata": {"team": "a", "tags": ["x", "y"]}})
        thread = made.json()["thread_id"]
        big = {"blob": "x" * (200 * 1024)}
        _refused(http.post("/threads", json={"metadata": big}), (413, 422), "metadata")
        _refused(http.patch(f"/threads/{thread}", json={"metadata": big}), (413, 422), "metadata")
    assert store.path is not None
    other = TrajectorySaver(store.path)  # another process's view: only what is stored
    try:
        with LiveServer(create_app(assistants(), store=other, api_key="")) as second:
            with httpx.Client(base_url=second.url) as http:
                got = http.get(f"/threads/{thread}")
                assert got.status_code == 200, got.text
                assert got.json()["metadata"] == {"team": "a", "tags": ["x", "y"]}
                assert got.json()["status"] == "idle" and got.json()["values"] is None
                assert http.get(f"/threads/{thread}/state").json()["values"] == {}
                assert http.get(f"/threads/{thread}/history").json() == []
                assert [t["thread_id"] for t in http.post("/threads/search", json={}).json()] == [
                    thread
                ]
                done = http.post(f"/threads/{thread}/runs/wait", json=RUN).json()
                assert done["answer"] == "3 words"
                after = http.get(f"/threads/{thread}").json()
                assert after["metadata"]["team"] == "a"
                assert after["metadata"]["assistant_id"] == "counter"
    finally:
        other.close()


# -- 5. an accepted run is never lost -------------------------------------------------------


@pytest.fixture
def processes() -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for served in started:
        if served.proc.poll() is None:
            served.stop(signal.SIGKILL)


@pytest.mark.slow
async def test_accepted_runs_survive_kill_9(tmp_path: Path, processes: list[Served]) -> None:
    db, port = tmp_path / "served.db", _port()
    first = Served(db, port, AWORLD_TEST_SLOW="hang")
    processes.append(first)
    accepted: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=first.url, timeout=60) as http:
        for i in range(10):
            thread = (await http.post("/threads", json={"metadata": {"n": i}})).json()
            run = {"assistant_id": "slow", "input": {"input": "one two three four five"}}
            async with http.stream(
                "POST", f"/threads/{thread['thread_id']}/runs/stream", json=run
            ) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data: ") and "run_id" in line:
                        accepted[thread["thread_id"]] = json.loads(line[6:])["run_id"]
                        break  # the client holds a run id: the server said it took the run
    first.stop(signal.SIGKILL)

    second = Served(db, port)
    processes.append(second)
    sdk = get_client(url=second.url, api_key=None)
    try:
        for thread, run_id in accepted.items():
            got = await sdk.threads.get(thread)
            assert got["metadata"]["n"] in range(10)
            assert (await sdk.runs.get(thread, run_id))["run_id"] == run_id
        done = await asyncio.gather(
            *(sdk.runs.wait(thread, "slow", input=None) for thread in accepted)
        )
        assert [d["answer"] for d in done] == ["5 words"] * 10
    finally:
        await sdk.aclose()
    assert len(accepted) == 10


async def test_an_acknowledged_resume_survives_kill_9(
    tmp_path: Path, processes: list[Served]
) -> None:
    db, port = tmp_path / "served.db", _port()
    first = Served(db, port, "asking", AWORLD_TEST_SLOW="hang")
    processes.append(first)
    async with httpx.AsyncClient(base_url=first.url, timeout=60) as http:
        thread = (await http.post("/threads", json={})).json()["thread_id"]
        run = {"assistant_id": "asking", "input": {"input": "the plan"}}
        asked = (await http.post(f"/threads/{thread}/runs/wait", json=run)).json()
        assert asked["__interrupt__"], asked
        resume = {"assistant_id": "asking", "command": {"resume": "yes"}}
        resumed = await http.post(f"/threads/{thread}/runs", json=resume)
        assert resumed.status_code == 200, resumed.text
        run_id = resumed.json()["run_id"]  # acknowledged; it hangs before its step is saved
    first.stop(signal.SIGKILL)

    second = Served(db, port, "asking")
    processes.append(second)
    sdk = get_client(url=second.url, api_key=None)
    try:
        got = await sdk.runs.get(thread, run_id)
        assert (got["run_id"], got["status"], got["kwargs"]["command"]) == (
            run_id,
            "interrupted",
            {"resume": "yes"},
        )
        listed = [(r["run_id"], r["status"]) for r in await sdk.runs.list(thread)]
        assert listed[0] == (run_id, "interrupted") and len(listed) == 2
        done = await sdk.runs.wait(thread, "asking", command={"resume": "yes"})
        assert done["answer"] == "asked the plan; told yes"
    finally:
        await sdk.aclose()


async def test_queued_runs_survive_kill_9_and_run_after_restart(
    tmp_path: Path, processes: list[Served]
) -> None:
    db, port = tmp_path / "served.db", _port()
    first = Served(db, port, AWORLD_TEST_SLOW="hang")
    processes.append(first)
    async with httpx.AsyncClient(base_url=first.url, timeout=60) as http:
        thread = (await http.post("/threads", json={})).json()["thread_id"]
        runs = f"/threads/{thread}/runs"
        busy = {"assistant_id": "slow", "input": {"input": "one two three four five"}}
        hanging = (await http.post(runs, json=busy)).json()["run_id"]  # hangs in its 2nd call
        queued = []
        for given in (None, {"input": "two words"}, {"input": "now three words"}):
            body = {"assistant_id": "slow", "input": given, "multitask_strategy": "enqueue"}
            answer = (await http.post(runs, json=body)).json()
            assert answer["status"] == "pending", answer
            queued.append(answer["run_id"])
    first.stop(signal.SIGKILL)

    second = Served(db, port)
    processes.append(second)
    sdk = get_client(url=second.url, api_key=None)
    try:
        assert (await sdk.runs.get(thread, hanging))["status"] == "interrupted"
        for run_id in queued:
            assert (await sdk.runs.get(thread, run_id))["run_id"] == run_id
        # in their order: the first continues the killed run, then two new turns
        answers = [(await sdk.runs.join(thread, run_id))["answer"] for run_id in queued]
        assert answers == ["5 words", "2 words", "3 words"]
        statuses = {r["run_id"]: r["status"] for r in await sdk.runs.list(thread)}
        assert statuses == {hanging: "interrupted"} | dict.fromkeys(queued, "success")
    finally:
        await sdk.aclose()


def test_memory_holds_live_runs_and_the_last_finished(serve: Callable[..., LiveServer]) -> None:
    server = serve()
    manager = server.app.state.server.runs  # the server's RunManager
    with httpx.Client(base_url=server.url, timeout=60) as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        gated = {"assistant_id": "gated", "input": {"input": "three words here"}}
        live = http.post(f"/threads/{thread}/runs", json=gated).json()["run_id"]  # held open
        finished = []
        for i in range(KEEP_FINISHED + 5):
            body = {"assistant_id": "chat", "input": {"input": f"hello {i}"}}
            done = http.post("/runs/wait", json=body)
            assert done.status_code == 200, done.text
            finished.append(done.headers["Content-Location"])
        assert manager.held == KEEP_FINISHED + 1  # the live run and the newest finished
        oldest = http.get(finished[0])  # forgotten in memory, read from the store
        assert oldest.status_code == 200 and oldest.json()["status"] == "success"
        assert http.get(f"{finished[0]}/join").json()["answer"] == "turn 1: hello 0"
        apps.GATE.set()
        assert http.get(f"/threads/{thread}/runs/{live}/join").json()["answer"] == "3 words"
        assert manager.held == KEEP_FINISHED
        assert len(http.get(f"/threads/{thread}/runs").json()) == 1


# -- 6, 7. wrong input is a 4xx naming the field -------------------------------------------

BAD_NUMBERS = ["abc", 1.5, [], "NaN", 1e30, -1, True]


def _bad_bodies(thread: str) -> list[tuple[str, str, Any, str]]:
    cases: list[tuple[str, str, Any, str]] = [
        ("POST", "/threads", {"metadata": "x"}, "metadata"),
        ("POST", "/threads", {"thread_id": "t-\u4e2d"}, "thread_id"),
        ("POST", "/threads", {"thread_id": "a\x00b"}, "thread_id"),
        ("POST", "/threads", {"thread_id": "a\r\nb"}, "thread_id"),
        ("POST", "/threads", {"thread_id": "x" * 300}, "thread_id"),
        ("POST", "/threads", {"thread_id": 5}, "thread_id"),
        ("POST", "/threads/search", {"ids": 5}, "ids"),
        ("POST", "/threads/search", {"ids": ["\u4e2d"]}, "ids"),
        ("POST", "/threads/search", {"metadata": "x"}, "metadata"),
        ("POST", "/threads/search", {"status": 5}, "status"),
        ("PATCH", f"/threads/{thread}", {"metadata": "x"}, "metadata"),
        ("POST", f"/threads/{thread}/history", {"before": 7}, "before"),
        ("POST", f"/threads/{thread}/history", {"checkpoint": "notadict"}, "checkpoint"),
        ("POST", f"/threads/{thread}/history", {"metadata": []}, "metadata"),
        ("POST", f"/threads/{thread}/state/checkpoint", {"checkpoint": "notadict"}, "checkpoint"),
        ("POST", f"/threads/{thread}/state", {"values": "x"}, "values"),
        ("POST", f"/threads/{thread}/state", {"checkpoint_id": 7}, "checkpoint_id"),
        ("POST", f"/threads/{thread}/runs", {**RUN, "stream_mode": 5}, "stream_mode"),
        ("POST", f"/threads/{thread}/runs", {**RUN, "metadata": "x"}, "metadata"),
        ("POST", f"/threads/{thread}/runs", {**RUN, "assistant_id": 5}, "assistant_id"),
        ("POST", f"/threads/{thread}/runs", {**RUN, "command": "x"}, "command"),
        ("POST", "/runs/wait", {**RUN, "thread_id": "\u4e2d"}, "thread_id"),
        ("POST", "/assistants/search", {"limit": "abc"}, "limit"),
    ]
    for field in ("limit", "offset"):
        for value in BAD_NUMBERS:
            cases.append(("POST", "/threads/search", {field: value}, field))
    return cases


def test_wrong_input_is_a_4xx_naming_the_field(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        http.post(f"/threads/{thread}/runs/wait", json=RUN)
        for method, path, body, field in _bad_bodies(thread):
            response = http.request(method, path, json=body)
            assert response.status_code in (400, 422), (path, body, response.text)
            _refused(response, (400, 422), field)
        json_type = {"Content-Type": "application/json"}
        for raw in (b'{"limit": 1e999}', b'{"thread_id": "\\ud800"}', b'{"a": NaN}'):
            _refused(http.post("/threads/search", content=raw, headers=json_type), (400, 422))
        for path in ("\u4e2d", "a%00b", "a%0D%0Ab", "%ED%A0%80", "x" * 300):
            for route in (f"/threads/{path}", f"/threads/{path}/runs/wait"):
                response = http.request("GET" if route.count("/") == 2 else "POST", route, json=RUN)
                _refused(response, (400, 422), "thread_id")
        _refused(http.get(f"/threads/{thread}/runs/{'%0A'}"), (400, 422), "run_id")
        for value in ("abc", "1.5", "NaN", "1e30", "-1", ""):
            _refused(http.get(f"/threads/{thread}/runs", params={"limit": value}), (422,), "limit")
            _refused(
                http.get(f"/threads/{thread}/runs", params={"offset": value}), (422,), "offset"
            )
        _refused(http.get(f"/threads/{thread}/history", params={"limit": "x"}), (422,), "limit")
        _refused(http.get("/assistants/counter/graph", params={"xray": "\u00b2"}), (422,), "xray")
        run = http.post(
            f"/threads/{thread}/runs", json={"assistant_id": "counter", "input": {"input": "a b"}}
        )
        run_id = run.json()["run_id"]
        http.get(f"/threads/{thread}/runs/{run_id}/join")
        for last in (b"\xc2\xb2", b"x", b"-3", b"1e3"):
            response = http.get(
                f"/threads/{thread}/runs/{run_id}/stream", headers={"Last-Event-ID": last}
            )
            _refused(response, (400, 422), "Last-Event-ID")
        # and the server serves everyone as before
        assert http.post("/threads/search", json={}).status_code == 200
        assert http.get(f"/threads/{thread}").json()["values"]["answer"] == "2 words"


def test_an_unknown_checkpoint_is_404(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        http.post(f"/threads/{thread}/runs/wait", json=RUN)
        ghost = str(uuid.uuid4())
        _refused(http.get(f"/threads/{thread}/state/{ghost}"), (404,), ghost)
        at = {"checkpoint": {"checkpoint_id": ghost}}
        _refused(http.post(f"/threads/{thread}/state/checkpoint", json=at), (404,), ghost)
        known = http.get(f"/threads/{thread}/state").json()["checkpoint"]["checkpoint_id"]
        assert http.get(f"/threads/{thread}/state/{known}").status_code == 200


# -- 8. a 500 leaves its traceback in the log -----------------------------------------------


@pytest.mark.slow
def test_an_unexpected_failure_leaves_its_traceback_in_the_log(
    tmp_path: Path, processes: list[Served]
) -> None:
    db, port = tmp_path / "served.db", _port()
    served = Served(db, port)
    processes.append(served)
    with httpx.Client(base_url=served.url) as http:
        http.post("/threads", json={})
        with sqlite3.connect(db) as broken:  # the store taken away under the server
            broken.execute("DROP VIEW IF EXISTS trajectory")
            broken.execute("DROP TABLE checkpoints")
        failed = http.post("/threads/search", json={})
        _refused(failed, (500,), "see its log")
    served.stop()
    log = served.log()
    assert "POST /threads/search failed" in log and "Traceback (most recent call last)" in log
    assert "checkpoints" in log


# -- 9. connections that never finish their headers -----------------------------------------


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server ends the connection (bounded wait: its header timeout is far
    shorter than this one)."""
    sock.settimeout(60)
    try:
        while sock.recv(4096):  # a 408 it may send first
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


def test_slow_headers_are_cut_off(serve: Callable[..., LiveServer]) -> None:
    server = serve()
    port = int(server.url.rsplit(":", 1)[1])
    socks = []
    try:
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            socks.append(s)
        with httpx.Client(base_url=server.url) as http:
            assert http.get("/ok").status_code == 200  # others are served meanwhile
        assert all(_closed_by_server(s) for s in socks)
    finally:
        for s in socks:
            s.close()
