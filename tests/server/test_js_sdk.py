"""LangGraph's JavaScript client, ``@langchain/langgraph-sdk``, call by call against
``aworld-graph serve`` and LangGraph's own server (``langgraph dev``) on the same LangGraph
project (:mod:`tests.server.langgraph_dev`).

``tests/js/langgraph_sdk_calls.mjs`` makes each call a LangGraph user makes (assistants,
threads, runs, crons, store) and prints one JSON line per call; one node process runs it per
server, and the answers are compared with ids and timestamps normalised as
``test_vs_langgraph_dev`` does. The SDK is installed once from npm into the ignored
``.cache/langgraph-js`` by ``tests/js/langgraph_sdk.sh`` (``tests/setup.sh`` runs it); the
module skips only when npm cannot reach its registry. Our server runs with an API key, so the
same run shows the key guards every call. What the comparison found wrong here (a deleted run
read back from its checkpoints) is also checked in-process, on a workflow.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from tests.server import langgraph_dev as peers
from tests.server.conftest import LiveServer
from tests.server.test_vs_langgraph_dev import normalise

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
JS_DIR = ROOT / ".cache" / "langgraph-js"
"""Where the SDK is installed (``.cache/`` is ignored by git)."""
INSTALL = ROOT / "tests" / "js" / "langgraph_sdk.sh"
SCRIPT = ROOT / "tests" / "js" / "langgraph_sdk_calls.mjs"
KEY = "js-sdk-test-key"

Answers = dict[str, dict[str, Any]]

CALLS = [
    "auth.withoutKey",
    "assistants.search",
    "assistants.search includePagination",
    "assistants.get",
    "assistants.getGraph",
    "assistants.getSchemas",
    "assistants.getSubgraphs",
    "assistants.create",
    "assistants.update",
    "assistants.getVersions",
    "assistants.setLatest",
    "assistants.count",
    "runs.wait with a created assistant",
    "assistants.delete",
    "threads.create",
    "threads.get",
    "threads.update",
    "threads.search",
    "threads.count",
    "runs.wait",
    "threads.copy",
    "threads.getState",
    "threads.updateState",
    "threads.getHistory",
    "threads.getHistory before",
    "threads.getState checkpoint",
    "threads.patchState",
    "threads.delete",
    "threads.prune",
    "runs.create",
    "runs.joinStream",
    "runs.join",
    "runs.stream values/updates/messages-tuple",
    "runs.stream events",
    "runs.stream checkpoints/tasks/debug/custom",
    "threads.joinStream",
    "runs.list",
    "runs.get",
    "runs.cancel",
    "runs.cancelMany",
    "runs.delete",
    "runs.createBatch",
    "runs.wait stateless onCompletion=keep",
    "runs.stream stateless onCompletion=keep",
    "runs.wait stateless onCompletion=delete",
    "runs.stream stateless onCompletion=delete",
    "runs.create multitaskStrategy=enqueue",
    "runs.create multitaskStrategy=reject",
    "runs.create multitaskStrategy=interrupt",
    "runs.create multitaskStrategy=rollback",
    "runs.wait interruptBefore",
    "runs.wait human step, command resume",
    "runs.stream human step, command resume",
    "crons.createForThread",
    "crons.create",
    "crons.update",
    "crons.search",
    "crons.search threadId",
    "crons.count",
    "crons.delete",
    "store.putItem",
    "store.getItem",
    "store.searchItems",
    "store.listNamespaces",
    "store.deleteItem",
]
"""Every call the script makes, in its order."""

REFUSED = {"threads.patchState": 405}
"""Calls neither server serves (docs/server.md: ``PATCH /threads/{id}/state`` is not served by
``langgraph dev`` either), with the status both answer."""


def _install() -> None:
    """``tests/js/langgraph_sdk.sh`` (a no-op once installed); a skip only when npm cannot
    reach its registry."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed: no JavaScript client")
    done = subprocess.run(
        ["bash", str(INSTALL), str(JS_DIR)], capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        ping = subprocess.run(["npm", "ping"], capture_output=True, text=True, timeout=60)
        if ping.returncode != 0:
            pytest.skip(f"npm cannot reach its registry to install the SDK: {ping.stderr[-500:]}")
        raise AssertionError(f"{INSTALL.name} failed: {done.stderr[-3000:]}")


def _aliases(url: str, key: str | None) -> dict[str, str]:
    """A server's system assistant ids by graph id (LangGraph's: a uuid5 per graph; ours: the
    graph id itself)."""
    headers = {"x-api-key": key} if key else {}
    found = httpx.post(f"{url}/assistants/search", json={"limit": 100}, headers=headers).json()
    return {a["assistant_id"]: a["graph_id"] for a in found}


def _answers(out: str, aliases: dict[str, str]) -> Answers:
    """The script's lines by call, each normalised on its own (ids numbered per call)."""
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {line["call"]: normalise(line, aliases) for line in lines}


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Answers]]:
    _install()
    try:
        peers.langgraph_dev_bin()
    except peers.Unavailable as exc:
        pytest.skip(str(exc))
    script = JS_DIR / SCRIPT.name  # beside its node_modules, where node finds the SDK
    shutil.copyfile(SCRIPT, script)
    folder = tmp_path_factory.mktemp("project")
    config = peers.write_project(folder)
    ours = peers.aworld_serve(config, folder / "ours.db")
    ours.env["AWORLD_GRAPH_API_KEY"] = KEY
    with peers.langgraph_dev(config) as peer, ours:
        sides = {"peer": (peer.url, None), "ours": (ours.url, KEY)}
        nodes = {  # one node process per server, side by side
            name: subprocess.Popen(
                ["node", str(script), url] + ([key] if key else []),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for name, (url, key) in sides.items()
        }
        ran: dict[str, tuple[bytes, bytes]] = {}
        try:
            for name, node in nodes.items():
                ran[name] = node.communicate(timeout=180)
        finally:
            for node in nodes.values():
                if node.poll() is None:
                    node.kill()
                    node.wait()
        said: dict[str, Answers] = {}
        for name, (out, err) in ran.items():
            (folder / f"{name}.jsonl").write_bytes(out)  # what it said, to read on a failure
            assert nodes[name].returncode == 0, f"{name}: {err.decode()[-3000:]}"
            said[name] = _answers(out.decode(), _aliases(*sides[name]))
        yield said


def test_the_script_makes_every_call(answers: dict[str, Answers]) -> None:
    # (sorted: the multitask calls run side by side and answer in any order)
    assert sorted(answers["ours"]) == sorted(CALLS)
    assert sorted(answers["peer"]) == sorted(CALLS)


def test_every_call_succeeds_on_our_server(answers: dict[str, Answers]) -> None:
    failed = {
        call: line
        for call, line in answers["ours"].items()
        if not line["ok"] and REFUSED.get(call) != line["status"]
    }
    assert failed == {}


def test_the_calls_not_served_are_refused_alike(answers: dict[str, Answers]) -> None:
    for call, status in REFUSED.items():
        assert answers["ours"][call]["status"] == status
        assert answers["peer"][call]["status"] == status


def test_the_api_key_guards_every_call(answers: dict[str, Answers]) -> None:
    # Ours runs with AWORLD_GRAPH_API_KEY: a client without it, or with another, gets 401 (and
    # every other call, made with it, succeeds above); langgraph dev runs without a key.
    assert answers["ours"]["auth.withoutKey"]["result"] == {"without": 401, "wrong": 401}
    assert answers["peer"]["auth.withoutKey"]["result"] == {"without": 200, "wrong": 200}


def test_a_deleted_run_is_gone(answers: dict[str, Answers]) -> None:
    # runs.delete: a get is a 404 and the thread's runs leave it out, on both servers (ours
    # read a deleted run back from its checkpoints before)
    for side in ("ours", "peer"):
        assert answers[side]["runs.delete"]["result"] == {"gone": 404, "listed": False}


async def test_a_deleted_workflow_run_is_gone(server: LiveServer) -> None:
    # The same in-process, on a workflow (no npm): the run's checkpoints stay, and are no longer
    # read back as a run of the thread.
    client = get_client(url=server.url, api_key=None)
    try:
        tid = (await client.threads.create())["thread_id"]
        ids = []
        for text in ("count these four words", "and these three"):
            made = await client.runs.create(
                tid, "counter", input={"messages": [{"role": "user", "content": text}]}
            )
            await client.runs.join(tid, made["run_id"])
            ids.append(made["run_id"])
        await client.runs.delete(tid, ids[0])
        with pytest.raises(NotFoundError):
            await client.runs.get(tid, ids[0])
        assert [r["run_id"] for r in await client.runs.list(tid)] == [ids[1]]
        assert len(await client.threads.get_history(tid, limit=100)) > 4  # its steps stay
    finally:
        await client.aclose()


def _copy_values(ours: dict[str, Any], peer: dict[str, Any]) -> None:
    # docs/server.md (threads.copy): the copy reads the copied values at once; langgraph dev
    # 0.16.7 answers the copy, and gets it, with values null until the copy's next run.
    mine, theirs = ours["result"], peer["result"]
    for read in ("copy", "got"):
        assert theirs[read].pop("values") is None
        assert [[m["type"], m["content"]] for m in mine[read].pop("values")["messages"]] == [
            ["human", "hello"],
            ["ai", "you said: hello"],
        ]


DIFFERENCES = {"threads.copy": _copy_values}
"""Where the two servers answer a call differently by design (each documented in
docs/server.md): a function that asserts the difference and removes it from both answers."""


def test_the_answers_are_langgraph_devs(answers: dict[str, Answers]) -> None:
    ours, peer = answers["ours"], answers["peer"]
    for call, differ in DIFFERENCES.items():
        differ(ours[call], peer[call])
    compared = [c for c in CALLS if c != "auth.withoutKey" and c not in REFUSED]
    assert {c: ours[c] for c in compared} == {c: peer[c] for c in compared}
