"""An endpoint answering 200 with something that is not a chat completion is retried like a
5xx, then a ModelError naming the endpoint; an oversized reply is refused, recorded, and the
run can be resumed (issue 22); what a retried attempt got is kept in the step's trace record
(issue 34)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from aworld_graph import Agent, Runners, TaskConfig
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.errors import ModelError
from aworld_graph.model import OpenAIModel
from aworld_graph.trajectory import load_run
from tests.fake_openai import FakeOpenAI, body, calls, status, text

NOT_COMPLETIONS = [
    body(200, b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>", "text/html"),
    body(200, b'{"id": "chatcmpl-1", "object": "chat.comp'),  # cut short
    body(200, b""),
    body(200, b'{"detail": "ok"}'),  # JSON, but no choices
    body(200, b"<html>maintenance</html>", "application/json"),  # a lying content type
]


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("aworld_graph.model.RETRY_BASE_S", 0.001)


def _ask(model: OpenAIModel, stream: bool = False) -> str:
    on_token = (lambda _t: None) if stream else None
    reply = asyncio.run(model.complete([{"role": "user", "content": "hi"}], on_token=on_token))
    return reply.content


@pytest.mark.parametrize(
    "bad", NOT_COMPLETIONS, ids=["html", "truncated", "empty", "no-choices", "lie"]
)
@pytest.mark.parametrize("stream", [False, True])
def test_an_unusable_200_is_retried_then_works(
    fake_openai: FakeOpenAI, bad: dict, stream: bool
) -> None:
    fake_openai.add(bad, text("fine"))
    model = OpenAIModel(model="m", base_url=fake_openai.url, max_retries=2)
    assert _ask(model, stream) == "fine"
    assert len(fake_openai.requests) == 2


@pytest.mark.parametrize(
    "bad", NOT_COMPLETIONS, ids=["html", "truncated", "empty", "no-choices", "lie"]
)
def test_an_endpoint_that_keeps_answering_garbage_is_a_clear_model_error(
    fake_openai: FakeOpenAI, bad: dict
) -> None:
    fake_openai.add(bad, bad, bad)
    model = OpenAIModel(model="m", base_url=fake_openai.url, max_retries=2)
    with pytest.raises(ModelError) as info:
        _ask(model)
    message = str(info.value)
    assert fake_openai.url in message and "'m'" in message
    assert "not a chat completion" in message and "3 attempt(s)" in message
    assert "check LLM_BASE_URL" in message
    assert len(fake_openai.requests) == 3


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", ["text", "tool-arguments"])
def test_an_oversized_reply_is_refused(fake_openai: FakeOpenAI, stream: bool, kind: str) -> None:
    huge = "x" * 5_000
    fake_openai.add(text(huge) if kind == "text" else calls(("echo", {"text": huge})))
    model = OpenAIModel(model="m", base_url=fake_openai.url, max_output_chars=1_000)
    with pytest.raises(ModelError, match=r"more than 1,000 characters .*refused, not stored"):
        _ask(model, stream)
    fake_openai.add(text("x" * 999))
    assert len(_ask(model, stream)) == 999


def test_an_oversized_answer_is_recorded_once_and_the_run_resumes(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    model = OpenAIModel(model="m", base_url=fake_openai.url, max_output_chars=10_000)
    agent = Agent(name="writer", model=model)
    fake_openai.add(text("y" * 2_000_000))
    saver = TrajectorySaver(db)
    response = Runners.sync_run(input="write", agent=agent, task_id="big", checkpointer=saver)
    assert response.status == "error" and "more than 10,000 characters" in (response.msg or "")
    assert "aworld-graph resume big" in (response.msg or "")
    saver.close()
    assert sum(p.stat().st_size for p in tmp_path.glob("runs.db*")) < 1_000_000  # not stored
    fake_openai.add(text("short"))
    saver = TrajectorySaver(db)
    again = asyncio.run(Runners.resume("big", agent=agent, checkpointer=saver))
    saver.close()
    assert again.status == "finished" and again.answer == "short"


@pytest.mark.parametrize(
    ("bad", "noted"),
    [
        (NOT_COMPLETIONS[0], "an HTML page: '<!DOCTYPE html><html><body>502 Bad Gateway"),
        (NOT_COMPLETIONS[1], "JSONDecodeError: Unterminated string"),
        (status(429), "HTTP 429 Too Many Requests"),  # retried by the openai client itself
    ],
    ids=["html", "truncated", "429"],
)
@pytest.mark.parametrize("stream", [False, True])
def test_a_retried_model_error_is_kept_in_the_steps_trace(
    fake_openai: FakeOpenAI, tmp_path: Path, bad: dict, noted: str, stream: bool
) -> None:
    fake_openai.add(bad, text("fine"), text("first time"))
    agent = Agent(name="w", model=OpenAIModel(model="m", base_url=fake_openai.url, max_retries=2))
    conf = TaskConfig(stream=stream)
    with TrajectorySaver(tmp_path / "runs.db") as saver:
        response = Runners.sync_run("hi", agent=agent, task_id="r", conf=conf, checkpointer=saver)
        assert response.answer == "fine"
        Runners.sync_run("hi", agent=agent, task_id="clean", conf=conf, checkpointer=saver)
        run, clean = load_run(saver, "r"), load_run(saver, "clean")
    assert run is not None and clean is not None
    (llm,) = [r for r in run.trace if r["kind"] == "llm"]
    (note,) = llm["retried"]
    if stream and "HTTP" not in noted:  # a body that is not server-sent events, whatever it is
        noted = "a stream without a single completion chunk"
    assert noted in note, note
    assert run.trajectory()[0]["action"]["ext_info"]["retried"] == [note]
    (answered,) = [r for r in clean.trace if r["kind"] == "llm"]
    assert "retried" not in answered and clean.answer == "first time"
    assert clean.trajectory()[0]["action"]["ext_info"]["retried"] is None
