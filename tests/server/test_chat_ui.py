"""LangChain's Agent Chat UI, built from npm as ``create-agent-chat-app`` scaffolds it (its
Vite app, ``tests/js/agent_chat_ui.sh``, once into ``.cache/``), served from loopback and
pointed at the server (allowed with ``cors_origins``), driven in headless Chromium: a
person's message, the tool call and its result, the answer streamed token by token (seen
half-way, while the model holds), the human step the workflow stops at as the UI's form (the
interrupt follows LangGraph's agent-inbox schema), the person's reply typed and sent in that
form, the workflow's answer that follows, and the thread read back as the conversation it was.
Without the UI: what the form sends for each kind of answer, and one it cannot read.

The UI test skips only when npm cannot reach its registry to build the UI (or Chromium is
missing)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from langgraph_sdk import get_client
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from aworld_graph import Agent, Human, Runners, Swarm
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.model import ModelResponse, TokenCallback
from aworld_graph.server import Assistant, create_app
from aworld_graph.testing import FunctionModel, tool_call
from tests.server import apps
from tests.server.apps import word_count
from tests.server.conftest import LiveServer
from tests.viz.chromium import Chromium, need_tool

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / ".cache" / "agent-chat-ui-0.1.6"
SCRIPT = ROOT / "tests" / "js" / "agent_chat_ui.sh"

HOLD = threading.Event()
"""Holds the answer's stream half-way until a test sets it."""

ANSWER = "The text has 4 words, counted with the word_count tool."
REPLY = "approve, and publish it"


class HeldStream(FunctionModel):
    """A ``FunctionModel`` that streams its text word by word, holding half-way until
    :data:`HOLD` is set."""

    async def complete(self, *args: Any, **options: Any) -> ModelResponse:
        on_token: TokenCallback | None = options.pop("on_token", None)
        response = await super().complete(*args, **options)
        words = response.content.split(" ") if response.content else []
        for i, word in enumerate(words):
            if i == len(words) // 2:
                await asyncio.to_thread(HOLD.wait, 60)
            if on_token is not None:
                on_token(word if i == 0 else " " + word)
        return response


def _count(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] != "tool":
        asked = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        return tool_call("word_count", {"text": str(asked).split(":", 1)[-1].strip()})
    return ANSWER


counter = Agent(name="counter", model=HeldStream(_count), tools=[word_count])
review = Human(name="review", prompt="Approve the count?")
publisher = Agent(name="publisher", model=FunctionModel(lambda m, t: "Published the count."))
reviewed = Swarm(counter, review, publisher, topology=[counter, review, publisher], name="reviewed")
"""Count with a tool, stream the answer, ask a person, then publish."""


def _registry_reachable() -> bool:
    npm = shutil.which("npm")
    if npm is None:
        return False
    try:
        return (
            subprocess.run(
                [npm, "ping", "--fetch-retries=0"], capture_output=True, timeout=60
            ).returncode
            == 0
        )
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture(scope="module")
def chat_ui() -> Path:
    """The built UI's static files (built on first use)."""
    if not (BUILD / "dist" / "index.html").exists():
        if not _registry_reachable():
            pytest.skip("npm cannot reach its registry to build the Agent Chat UI")
        done = subprocess.run(
            ["bash", str(SCRIPT), str(BUILD)], capture_output=True, text=True, timeout=1200
        )
        assert done.returncode == 0, f"building the Agent Chat UI failed:\n{done.stderr[-4000:]}"
    return BUILD / "dist"


@pytest.fixture
def ui_server(chat_ui: Path) -> Iterator[LiveServer]:
    app = Starlette(routes=[Mount("/", StaticFiles(directory=chat_ui, html=True))])
    with LiveServer(app) as server:
        yield server


@pytest.fixture
def api_server(ui_server: LiveServer, store: TrajectorySaver) -> Iterator[LiveServer]:
    HOLD.clear()
    assistant = Assistant.of(reviewed, target="tests.server.test_chat_ui:reviewed")
    app = create_app([assistant], store=store, api_key="", cors_origins=[ui_server.url])
    with LiveServer(app) as server:
        yield server
    HOLD.set()  # nothing stays blocked


async def _until(
    browser: Chromium, check: Callable[[str], bool], what: str, seconds: float = 60
) -> str:
    """The page's text once ``check`` accepts it (polled; bounded)."""
    shown = ""
    for _ in range(int(seconds * 10)):
        shown = str(await browser.js("document.body ? document.body.innerText : ''"))
        if check(shown):
            return shown
        await asyncio.sleep(0.1)
    raise AssertionError(
        f"the chat UI never showed {what}; it shows:\n{shown[-2000:]}\n"
        f"errors: {browser.errors}\nconsole: {browser.console[-10:]}"
    )


async def _asked(browser: Chromium, ui_server: LiveServer, api_server: LiveServer) -> str:
    """The UI opened on the server, a person's message sent, the answer streamed (seen half
    way while the model holds) and the human step's form shown: the page's text then."""
    query = urlencode({"apiUrl": api_server.url, "assistantId": "reviewed"})
    await browser.send("Page.navigate", url=f"{ui_server.url}/?{query}")
    await _until(browser, lambda s: "Send" in s, "its message box")
    await browser.click("textarea")
    await browser.send("Input.insertText", text="count: one two three four")
    await browser.click("button[type=submit]")

    half = ANSWER[: ANSWER.index(" counted")]  # the words streamed before the hold
    shown = await _until(browser, lambda s: half in s, "the first half of the answer")
    assert "count: one two three four" in shown  # the person's message
    assert "word_count" in shown and "one two three four" in shown  # the tool call
    assert "counted with" not in shown  # the rest is not streamed yet
    HOLD.set()
    shown = await _until(
        browser, lambda s: ANSWER in s and "Approve the count?" in s, "the human step"
    )
    assert shown.count("count: one two three four") == 1
    assert "Respond to assistant" in shown and "Accept" in shown  # its form, not JSON
    assert "allow_respond" not in shown  # the generic view lists the value's keys
    return shown


async def _click(browser: Chromium, label: str) -> None:
    """Click the page's button whose text is ``label``."""
    await browser.js(
        "[...document.querySelectorAll('button')].find(b => b.textContent.trim() =="
        f" {json.dumps(label)}).setAttribute('data-clicked', 'yes')"
    )
    await browser.click("button[data-clicked=yes]")


@pytest.mark.timeout(1500)  # the first run builds the UI (npm install, vite build) first
async def test_the_agent_chat_ui_renders_a_workflow_run(
    ui_server: LiveServer, api_server: LiveServer, tmp_path: Path
) -> None:
    need_tool("chromium", "chromium-browser")
    async with Chromium(tmp_path / "profile") as browser:
        await _asked(browser, ui_server, api_server)
        await browser.screenshot(tmp_path / "asked.png")

        # the person answers in the form: types a reply and sends it
        await browser.click('textarea[placeholder="Your response here..."]')
        await browser.send("Input.insertText", text=REPLY)
        await _click(browser, "Send Response")
        await _until(browser, lambda s: "Published the count." in s, "the workflow's answer")

        href = str(await browser.js("location.href"))
        thread = href.split("threadId=", 1)[1].split("&", 1)[0]
        client = get_client(url=api_server.url, api_key=None)
        try:
            done = (await client.threads.get_state(thread))["values"]
        finally:
            await client.aclose()
        assert isinstance(done, dict) and done["answer"] == "Published the count."
        assert done["context"]["review"] == REPLY  # recorded as a plain reply is
        assert [r["content"] for r in done["trace"] if r["kind"] == "human"] == [REPLY]
        await browser.send("Page.reload")
        shown = await _until(browser, lambda s: "Published the count." in s, "the reply")
        assert "Thread History" in shown  # its list of threads names this one by its message
        shown = shown.split("New thread", 1)[1]  # the conversation
        assert shown.count("count: one two three four") == 1
        assert REPLY in shown.split(ANSWER, 1)[1]  # the person's reply, after the answer
        assert "Results from earlier steps" not in shown  # no prompt the workflow wrote
        await browser.screenshot(tmp_path / "done.png")
    origins = (ui_server.url, api_server.url, "data:", "blob:")
    assert all(url.startswith(origins) for url in browser.requests), json.dumps(browser.requests)


@pytest.mark.timeout(1500)  # the first run builds the UI (npm install, vite build) first
async def test_mark_as_resolved_in_the_ui_ends_the_human_step(
    ui_server: LiveServer, api_server: LiveServer, tmp_path: Path
) -> None:
    """The form's "Mark as Resolved" sends ``goto`` END: the workflow's thread stops
    waiting, unanswered, and nothing after the human step runs."""
    need_tool("chromium", "chromium-browser")
    async with Chromium(tmp_path / "profile") as browser:
        await _asked(browser, ui_server, api_server)
        href = str(await browser.js("location.href"))
        thread = href.split("threadId=", 1)[1].split("&", 1)[0]
        # the button's own click handler (a synthetic mouse click at its centre misses it)
        await browser.js(
            "[...document.querySelectorAll('button')]"
            ".find(b => b.textContent.trim() == 'Mark as Resolved').click()"
        )
        await _until(browser, lambda s: "Marked thread as resolved." in s, "its confirmation")
        client = get_client(url=api_server.url, api_key=None)
        try:
            for _ in range(300):  # bounded: 30 s
                state = await client.threads.get_state(thread)
                if not state["interrupts"]:
                    break
                await asyncio.sleep(0.1)
            status = (await client.threads.get(thread))["status"]
            runs = await client.runs.list(thread)
        finally:
            await client.aclose()
    assert (state["next"], state["interrupts"], status) == ([], [], "idle")
    assert state["values"]["answer"] == ANSWER  # the count stands, unpublished
    assert "review" not in state["values"]["context"]  # the step was not answered
    assert [(r["status"], r["kwargs"]["command"]) for r in runs][0] == (
        "success",
        {"goto": "__end__"},
    )


PLAN = {"input": "plan the offsite"}


async def test_the_uis_answers_to_a_human_step_are_kept_as_replies(server: LiveServer) -> None:
    """The request the UI sends when a person answers (``input: {}`` with the command's
    agent-inbox answer): ``accept`` is kept as ``"approve"``; an answer the step cannot read
    is asked again, the interrupt's ``error`` naming the field, and is kept in the trace with
    that error once the person answers well."""
    sdk = get_client(url=server.url, api_key=None)
    try:
        thread = (await sdk.threads.create())["thread_id"]
        asked = (await sdk.runs.wait(thread, "approval", input=PLAN))["__interrupt__"][0]["value"]
        assert {k: asked[k] for k in ("node", "prompt", "answer")} == {
            "node": "approval",
            "prompt": "Approve the plan?",
            "answer": "plan: three steps",
        }
        assert asked["action_request"] == {
            "action": "Approve the plan?",
            "args": {"answer": "plan: three steps"},
        }
        assert asked["config"] == {
            "allow_respond": True,
            "allow_accept": True,
            "allow_edit": False,
            "allow_ignore": False,
        }
        wrong = [{"type": "approve", "args": None}]
        again = await sdk.runs.wait(thread, "approval", input={}, command={"resume": wrong})
        error = again["__interrupt__"][0]["value"]["error"]
        assert "[0].type 'approve'" in error and "'accept'" in error, error
        assert again["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
        assert (await sdk.threads.get(thread))["status"] == "interrupted"
        accept = [{"type": "accept", "args": None}]
        done = await sdk.runs.wait(thread, "approval", input={}, command={"resume": accept})
    finally:
        await sdk.aclose()
    assert isinstance(done, dict) and done["answer"] == "published the plan"
    assert done["context"]["approval"] == "approve"
    humans = [r for r in done["trace"] if r["kind"] == "human"]
    assert [(json.loads(r["content"]) if r.get("error") else r["content"]) for r in humans] == [
        wrong,
        "approve",
    ]
    assert humans[0]["error"] == error and "error" not in humans[1]


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        ([{"type": "response", "args": "add a fourth step"}], "add a fourth step"),
        (
            [{"type": "edit", "args": {"action": "x", "args": {"answer": "plan: four"}}}],
            "plan: four",
        ),
        ([{"type": "ignore", "args": None}], "ignore"),
        ("approve", "approve"),  # a plain value, as before
    ],
)
async def test_each_agent_inbox_answer_is_kept_as_its_text(
    answer: Any, kept: str, store: TrajectorySaver
) -> None:
    asked = await Runners.run("plan the offsite", swarm=apps.approval, checkpointer=store)
    assert asked.status == "interrupted"
    done = await Runners.resume(asked.id, swarm=apps.approval, value=answer, checkpointer=store)
    assert done.success, done.msg
    assert done.state["context"]["approval"] == kept
    said = [m["content"] for m in done.state["messages"] if m.get("_agent") == "approval"]
    assert said == [kept]  # the person's message
    assert done.answer == ("published the plan" if kept == "approve" else "revised the plan")
