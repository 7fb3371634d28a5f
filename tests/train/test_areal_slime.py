"""AReaL's workflow contract against a loopback stand-in for its proxy (AReaL's own classes:
tests/train/test_areal_real.py, in a venv of its own), and slime's sample fields with a plain stand-in (slime is not on
PyPI). A slime rollout cut short (a failing call, or its process killed) resumes from the
store with the same samples (slime numbers each sample of a run once). AReaL hands its
workflow nothing that names one episode across a restart: with a ``run_id`` a restarted AReaL
resumes the episodes its killed process left unfinished (any of a group's members may stand
for another) and samples the finished ones anew."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aworld_graph import Agent, AgentConfig, tool
from aworld_graph.checkpoint import open_store
from aworld_graph.errors import ConfigError
from aworld_graph.local import ensure_server
from aworld_graph.rewards import contains
from aworld_graph.train import AgentTrainer
from aworld_graph.train.areal import AReaLWorkflow
from aworld_graph.train.episodes import RowError
from aworld_graph.train.slime import slime_generate
from tests.server.conftest import LiveServer
from tests.train.token_proxy import TokenProxy
from tests.train.trainer_venv import ROOT


def _agent() -> Agent:
    return Agent(
        name="greeter",
        system_prompt="Answer in one short sentence.",
        conf=AgentConfig(llm_temperature=0.0, params={"max_tokens": 12}),
    )


def raises(answer: str | None, expected: Any) -> float:
    raise RuntimeError("scorer down")


@pytest.mark.local_model
def test_areal_workflow_reaches_the_model_through_the_proxy() -> None:
    workflow = AReaLWorkflow(agent=_agent(), reward_func=contains)
    bad = AReaLWorkflow(agent=_agent(), reward_func=raises)
    with TokenProxy(ensure_server().base_url) as proxy:

        async def reward(workflow: AReaLWorkflow, row: dict[str, Any], **kw: Any) -> Any:
            try:  # AReaL's OpenAIProxyWorkflow rejects the trajectory of a run that raises
                return await workflow.run(row, base_url=proxy.url, **kw)
            except RowError as exc:
                return exc

        async def batch() -> list[Any]:
            hello = {"messages": [{"role": "user", "content": "Say hello."}], "answer": "hello"}
            return [
                await reward(workflow, hello, api_key="rollout-session-key"),
                await reward(workflow, {"answer": "x"}),  # no prompt
                await reward(bad, {"prompt": "Say hi.", "answer": "hi"}),
            ]

        rewards = asyncio.run(batch())
    assert rewards[0] in (0.0, 1.0)
    assert [str(r) for r in rewards[1:]] == [workflow.errors[0], bad.errors[0]]
    assert workflow.failed == 1 and "no 'prompt' field" in workflow.errors[0]
    assert bad.failed == 1 and "RuntimeError: scorer down" in bad.errors[0]
    assert "'expected'" in bad.errors[0] or "expected" in bad.errors[0]
    # every call went through the proxy, which keeps the token ids for AReaL (AReaL's own
    # returns none: tests/train/test_areal_real.py); the workflow asks for none
    episode = workflow.episodes[0]
    assert episode.response is not None and episode.response.status == "finished"
    calls = [r for r in episode.response.state["trace"] if r["kind"] == "llm"]
    assert len(proxy.calls) == len(calls) + 1  # the bad workflow's call too
    assert all("tokens" not in c for c in calls) and episode.sequences == []


@dataclass
class Sample:
    """The fields of slime's ``Sample`` that a generate function reads and fills."""

    class Status(enum.Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"

    index: int = 0
    prompt: Any = ""
    label: Any = None
    tokens: list[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    loss_mask: list[int] | None = None
    rollout_log_probs: list[float] | None = None
    reward: float | None = None
    status: Status = Status.PENDING
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Args:
    sglang_router_ip: str
    sglang_router_port: int


@pytest.mark.local_model
def test_slime_generate_fills_the_sample_fields() -> None:
    base = ensure_server().base_url  # http://127.0.0.1:PORT/v1, standing in for slime's router
    host, port = base.removeprefix("http://").removesuffix("/v1").split(":")
    args = Args(sglang_router_ip=host, sglang_router_port=int(port))
    generate = slime_generate(agent=_agent(), reward_func=contains)
    good = asyncio.run(generate(args, Sample(prompt="Say hello.", label="hello"), {}))
    assert good.status is Sample.Status.COMPLETED
    assert good.response_length > 0
    assert len(good.tokens) > good.response_length
    assert len(good.loss_mask) == len(good.rollout_log_probs) == good.response_length
    assert good.reward in (0.0, 1.0) and good.response
    failed = asyncio.run(generate(args, Sample(index=3, prompt="Say hi."), {}))  # no label
    assert failed.status is Sample.Status.ABORTED
    assert failed.response_length == 0 and failed.reward is None
    assert "row 3" in failed.metadata["error"] and "'expected'" in failed.metadata["error"]


class Router:
    """A loopback vLLM-style endpoint standing in for slime's router or AReaL's proxy: it asks
    for ``add`` on a new task and answers ``4`` once the tool result is in, with token ids and
    logprobs that follow from the request (so two runs of the same episode get the same ones).
    While :attr:`down` names a task, its answering call fails (HTTP 404, no retry), as a
    rollout cut off after the tool call finished. :attr:`requests` counts every call."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.down: str | None = None
        self.hold: str | None = None
        """While it names a task, that task's answering call waits (a rollout in flight)."""
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        messages = body["messages"]
        task = next(m["content"] for m in messages if m["role"] == "user")
        answering = any(m["role"] == "tool" for m in messages)
        self.requests.append(task)
        if answering and self.down is not None and self.down in task:
            self.down = None
            return JSONResponse({"error": {"message": "the router went away"}}, status_code=404)
        for _ in range(1200):  # 60 s at most
            if not (answering and self.hold is not None and self.hold in task):
                break
            await asyncio.sleep(0.05)
        message: dict[str, Any] = {"role": "assistant", "content": "4"}
        ids = [52, 2]
        if not answering:
            args = json.dumps({"a": 2, "b": 2})
            function = {"name": "add", "arguments": args}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": function}],
            }
            ids = [7, 8, 9]
        prompt = [len(messages), *(ord(c) for c in task)]
        content = [{"token": str(t), "logprob": -0.125 * (i + 1)} for i, t in enumerate(ids)]
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "default",
                "prompt_token_ids": prompt,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "stop" if answering else "tool_calls",
                        "logprobs": {"content": content},
                        "token_ids": ids,
                    }
                ],
                "usage": {
                    "prompt_tokens": len(prompt),
                    "completion_tokens": len(ids),
                    "total_tokens": len(prompt) + len(ids),
                },
            }
        )


@pytest.fixture
def router() -> Iterator[tuple[Router, str]]:
    scripted = Router()
    with LiveServer(scripted.app) as live:
        yield scripted, f"{live.url}/v1"


def adder(ran: list[int], log: Path | None = None) -> Agent:
    """An agent whose ``add`` tool notes each run in ``ran`` (and a line in ``log``)."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        ran.append(a + b)
        if log is not None:
            with log.open("a") as out:
                out.write(f"{a + b}\n")
        return a + b

    return Agent(name="solver", system_prompt="Use add.", tools=[add])


def batch() -> list[Sample]:
    """Three samples as slime's data source gives them (again after a restart)."""
    return [Sample(index=i, prompt=f"2+2 ({n})", label="4") for i, n in enumerate("ABC")]


def _fields(sample: Sample) -> dict[str, Any]:
    """What slime trains on (the thread id left out)."""
    out = dataclasses.asdict(sample)
    out["metadata"] = {k: v for k, v in sample.metadata.items() if k != "aworld_thread"}
    return out


def test_a_restarted_slime_rollout_resumes_its_samples(router: tuple[Router, str]) -> None:
    server, url = router
    ran: list[int] = []
    generate = slime_generate(agent=adder(ran), reward_func=contains, base_url=url, run_id="r1")

    async def rollout(batch: list[Sample], **kw: Any) -> list[Sample]:
        return [await generate(None, s, {}, **kw) for s in batch]

    # the first attempt: A finishes, B's tool call finishes and its next call fails; then the
    # process is gone before C
    server.down = "(B)"
    first = asyncio.run(rollout(batch()[:2]))
    assert first[0].status is Sample.Status.COMPLETED
    assert (
        first[1].status is Sample.Status.ABORTED and "status 'error'" in first[1].metadata["error"]
    )
    assert ran == [4, 4] and len(server.requests) == 4
    server.requests.clear()
    again = asyncio.run(rollout(batch()))
    assert [s.status for s in again] == [Sample.Status.COMPLETED] * 3
    assert server.requests == ["2+2 (B)", "2+2 (C)", "2+2 (C)"]  # A read back, B resumed
    assert ran == [4, 4, 4]  # B's finished tool call was not run again
    assert [s.metadata["aworld_thread"] for s in again] == [
        s.metadata["aworld_thread"] for s in (*first, again[2])
    ]
    assert again[0].metadata["aworld_thread"].startswith("slime-r1-0-")
    # the same as a rollout that was never cut short (another run, so nothing is read back)
    server.requests.clear()
    fresh = slime_generate(agent=adder(ran), reward_func=contains, base_url=url, run_id="r2")
    clean = [asyncio.run(fresh(None, s, {})) for s in batch()]
    assert len(server.requests) == 6
    assert [_fields(s) for s in again] == [_fields(s) for s in clean]
    # system, task, tool call, tool result; then the answer
    assert again[1].tokens == [4, *(ord(c) for c in "2+2 (B)"), 52, 2]
    assert again[1].reward == 1.0 and again[1].loss_mask == [1, 1]


def test_slime_samples_that_are_not_the_same_episode_get_threads_of_their_own(
    router: tuple[Router, str],
) -> None:
    server, url = router
    ran: list[int] = []
    agent = adder(ran)
    named = slime_generate(agent=agent, reward_func=contains, base_url=url, run_id="r1")
    unnamed = slime_generate(agent=agent, reward_func=contains, base_url=url)

    def thread(generate: Any, sample: Sample, **kw: Any) -> str:
        done = asyncio.run(generate(None, sample, {}, **kw))
        assert done.status is Sample.Status.COMPLETED
        return str(done.metadata["aworld_thread"])

    first = thread(named, Sample(index=0, prompt="2+2 (A)", label="4"))
    assert thread(named, Sample(index=0, prompt="2+2 (A)", label="4")) == first
    assert len(server.requests) == 2  # read back
    others = {
        # slime numbers evaluation samples from 0 at every evaluation
        thread(named, Sample(index=0, prompt="2+2 (A)", label="4"), evaluation=True),
        thread(named, Sample(index=0, prompt="2+2 (D)", label="4")),  # other data, same run_id
        thread(unnamed, Sample(index=0, prompt="2+2 (A)", label="4")),
        thread(unnamed, Sample(index=0, prompt="2+2 (A)", label="4")),
    }
    assert len(others) == 4 and first not in others
    assert len(server.requests) == 2 + 4 * 2 and len(ran) == 5  # each sampled anew


def areal_row(name: str) -> dict[str, Any]:
    """A row as AReaL's dataset gives it (again after a restart)."""
    return {"messages": [{"role": "user", "content": f"2+2 ({name})"}], "answer": "4"}


def test_areal_episodes_are_new_threads(router: tuple[Router, str]) -> None:
    """Without a ``run_id`` nothing names an episode across a restart: each is a new thread."""
    server, url = router
    ran: list[int] = []
    workflow = AReaLWorkflow(agent=adder(ran), reward_func=contains)

    async def group() -> list[float]:
        return [await workflow.run(areal_row("A"), base_url=url, api_key="session") for _ in "ab"]

    assert asyncio.run(group()) == [1.0, 1.0]
    threads = {e.thread_id for e in workflow.episodes}
    assert len(threads) == 2 and len(server.requests) == 4 and ran == [4, 4]


def test_areal_resumes_an_unfinished_episode_once_and_passes_over_a_busy_one(
    router: tuple[Router, str],
) -> None:
    """An episode cut short (its answering call failed) is resumed by the next workflow with
    the same ``run_id`` (another process, as after a restart), by one member of a group only,
    and not while another process runs its thread; a finished one is never read back."""
    server, url = router
    ran: list[int] = []
    first = AReaLWorkflow(agent=adder(ran), reward_func=contains, run_id="r1")
    server.down = "(B)"
    with pytest.raises(RowError, match="row 0"):
        asyncio.run(first.run(areal_row("B"), base_url=url))
    assert asyncio.run(first.run(areal_row("A"), base_url=url)) == 1.0
    cut = first.episodes[0].thread_id
    assert cut is not None and cut.startswith("areal-r1-") and cut.endswith("-0")
    assert ran == [4, 4] and len(server.requests) == 4
    server.requests.clear()

    # another process holds the cut episode's thread: it is passed over
    again = AReaLWorkflow(agent=adder(ran), reward_func=contains, run_id="r1")
    with open_store() as elsewhere, elsewhere.hold(cut):
        assert asyncio.run(again.run(areal_row("B"), base_url=url)) == 1.0
    assert again.episodes[-1].thread_id == cut[:-1] + "1"
    assert server.requests == ["2+2 (B)"] * 2 and ran == [4, 4, 4]
    server.requests.clear()

    # a restarted process: the cut episode is resumed by one member of B's group; A, finished
    # before, is sampled anew; another run_id resumes nothing of r1's
    restarted = AReaLWorkflow(agent=adder(ran), reward_func=contains, run_id="r1")

    async def groups() -> list[float]:
        rows = [areal_row(n) for n in "BBA"]
        return [await restarted.run(row, base_url=url) for row in rows]

    assert asyncio.run(groups()) == [1.0, 1.0, 1.0]
    threads = [e.thread_id for e in restarted.episodes]
    assert threads[0] == cut and threads[1] == cut[:-1] + "2"
    assert threads[2] == first.episodes[1].thread_id[:-1] + "1"  # type: ignore[index]
    # the resumed episode sends its answering call only; its tool call is not run again
    assert server.requests == ["2+2 (B)", "2+2 (B)", "2+2 (B)", "2+2 (A)", "2+2 (A)"]
    assert ran == [4, 4, 4, 4, 4]
    resumed = restarted.episodes[0]
    assert resumed.reward == 1.0 and resumed.response is not None
    assert resumed.response.status == "finished" and resumed.response.answer == "4"
    trainer = AgentTrainer(
        adder(ran), trainer="areal", reward_func=contains, train_dataset=[], config={"run_id": "r2"}
    )
    other = trainer.adapter()
    assert isinstance(other, AReaLWorkflow) and other.run_id == "r2"
    server.requests.clear()
    asyncio.run(other.run(areal_row("B"), base_url=url))
    assert other.episodes[0].thread_id == "areal-r2-" + cut.split("-", 2)[2]  # its own -0
    assert len(server.requests) == 2 and len(ran) == 6  # sampled anew, its tool run

    # a group's members started at once take a thread each
    together = AReaLWorkflow(agent=adder(ran), reward_func=contains, run_id="r3")

    async def group() -> list[float]:
        return list(
            await asyncio.gather(*(together.run(areal_row("E"), base_url=url) for _ in "abc"))
        )

    assert asyncio.run(group()) == [1.0, 1.0, 1.0]
    assert sorted(str(e.thread_id)[-2:] for e in together.episodes) == ["-0", "-1", "-2"]
    # AReaL's subproc mode gives base_url only as OPENAI_BASE_URL, to a fresh copy each call
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", url)
        with pytest.raises(ConfigError, match="subproc mode"):
            asyncio.run(other.run(areal_row("B")))


def killed_in_b(script: str, server: Router, url: str, log: Path) -> str:
    """Run ``script`` (``url``, ``log`` as its arguments) and kill it (SIGKILL) once the
    episode of task B has sent its answering call, which the router holds; its stdout."""
    server.hold = "(B)"
    proc = subprocess.Popen(
        [sys.executable, "-c", script, url, str(log)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while server.requests.count("2+2 (B)") < 2:  # B's answering call is in flight
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "episode B never reached its answering call"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
        server.hold = None
    assert proc.returncode == -signal.SIGKILL
    return out


AREAL_KILLED = r"""
import asyncio, sys
from pathlib import Path

from aworld_graph.rewards import contains
from aworld_graph.train import AgentTrainer
from aworld_graph.train.areal import AReaLWorkflow
from tests.train.test_areal_slime import adder, areal_row

url, log = sys.argv[1:3]
workflow = AReaLWorkflow(agent=adder([], Path(log)), reward_func=contains, run_id="r1")


async def main():
    for name in "ABC":
        print(name, await workflow.run(areal_row(name), base_url=url), flush=True)


asyncio.run(main())
"""


def test_an_areal_rollout_killed_mid_way_resumes_its_unfinished_episode(
    router: tuple[Router, str], tmp_path: Path
) -> None:
    """AReaL's process killed (SIGKILL) while episode B's answering call is in flight, after A
    finished and B's tool call finished; AReaL restarted on the same rows and store resumes B
    (its tool call is not run again) and samples A, whose reward the killed process had
    handed on, anew."""
    server, url = router
    log = tmp_path / "tools.log"
    out = killed_in_b(AREAL_KILLED, server, url, log)
    assert out.split() == ["A", "1.0"]
    assert log.read_text().split() == ["4", "4"]  # A's and B's tool calls ran, C never started
    server.requests.clear()
    ran: list[int] = []
    workflow = AReaLWorkflow(agent=adder(ran), reward_func=contains, run_id="r1")

    async def rollout() -> list[float]:
        return [await workflow.run(areal_row(n), base_url=url) for n in "ABC"]

    assert asyncio.run(rollout()) == [1.0, 1.0, 1.0]
    assert server.requests == ["2+2 (A)", "2+2 (A)", "2+2 (B)", "2+2 (C)", "2+2 (C)"]
    assert ran == [4, 4]  # A's and C's: B's finished tool call was not run again
    assert [e.thread_id.rsplit("-", 1)[1] for e in workflow.episodes] == ["1", "0", "0"]  # type: ignore[union-attr]


KILLED = r"""
import asyncio, sys
from pathlib import Path

from aworld_graph.rewards import contains
from aworld_graph.train.slime import slime_generate
from tests.train.test_areal_slime import adder, batch

url, log = sys.argv[1:3]
generate = slime_generate(agent=adder([], Path(log)), reward_func=contains, base_url=url,
                          run_id="r1")


async def main():
    for sample in batch():
        await generate(None, sample, {})


asyncio.run(main())
"""


def test_a_slime_rollout_killed_mid_way_resumes_its_samples(
    router: tuple[Router, str], tmp_path: Path
) -> None:
    """slime's process killed (SIGKILL) while sample 1's answering call is in flight, after
    sample 0 finished and sample 1's tool call finished; slime restarted on the same samples
    (the same store: ``AWORLD_GRAPH_DB``) reads sample 0 back and resumes sample 1."""
    server, url = router
    log = tmp_path / "tools.log"
    killed_in_b(KILLED, server, url, log)
    assert log.read_text().split() == ["4", "4"]  # A's and B's tool calls ran, C never started
    server.requests.clear()
    ran: list[int] = []
    generate = slime_generate(agent=adder(ran), reward_func=contains, base_url=url, run_id="r1")
    again = [asyncio.run(generate(None, s, {})) for s in batch()]
    assert [s.status for s in again] == [Sample.Status.COMPLETED] * 3
    assert server.requests == ["2+2 (B)", "2+2 (C)", "2+2 (C)"]  # A read back, B resumed
    assert ran == [4]  # only C's tool call ran: B's finished one was not run again
    fresh = slime_generate(agent=adder(ran), reward_func=contains, base_url=url, run_id="r2")
    clean = [asyncio.run(fresh(None, s, {})) for s in batch()]
    assert [_fields(s) for s in again] == [_fields(s) for s in clean]


AREAL_CRASHED = r"""
import asyncio, os, sys
from pathlib import Path

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.rewards import contains
from aworld_graph.train.areal import AReaLWorkflow
from tests.train.test_areal_slime import adder, areal_row

url, log = sys.argv[1:3]
tool_saved = []
put_writes, put = TrajectorySaver.aput_writes, TrajectorySaver.aput


async def aput_writes(self, config, writes, task_id, task_path=""):
    await put_writes(self, config, writes, task_id, task_path)
    tool_saved.append(task_path.endswith(", solver__tools"))


async def aput(self, config, checkpoint, metadata, new_versions):
    if any(tool_saved):  # the tool step's writes are saved, the next checkpoint is not
        os._exit(9)
    return await put(self, config, checkpoint, metadata, new_versions)


TrajectorySaver.aput_writes, TrajectorySaver.aput = aput_writes, aput
workflow = AReaLWorkflow(agent=adder([], Path(log)), reward_func=contains, run_id="r1")
asyncio.run(workflow.run(areal_row("B"), base_url=url))
"""


def test_an_areal_process_killed_between_a_steps_writes_and_its_checkpoint_resumes(
    router: tuple[Router, str], tmp_path: Path
) -> None:
    """The process dies after the tool step's writes were saved and before the checkpoint
    that follows them: the episode is unfinished, and a restarted AReaL resumes it from the
    saved tool result, sending the answering call only."""
    server, url = router
    log = tmp_path / "tools.log"
    done = subprocess.run(
        [sys.executable, "-c", AREAL_CRASHED, url, str(log)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 9, done.stderr[-3000:]
    assert log.read_text().split() == ["4"]  # the tool ran; the run's end was never saved
    server.requests.clear()
    ran: list[int] = []
    workflow = AReaLWorkflow(agent=adder(ran), reward_func=contains, run_id="r1")
    assert asyncio.run(workflow.run(areal_row("B"), base_url=url)) == 1.0
    assert workflow.episodes[0].thread_id.endswith("-0")  # type: ignore[union-attr]
    assert ran == [] and server.requests == ["2+2 (B)"]  # the answering call only
