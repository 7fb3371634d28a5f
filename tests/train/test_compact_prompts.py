"""Prompt ids stored compactly: a multi-turn call's prompt repeats the agent's previous call,
so it is stored as a reference to that call's ids (``prompt_prefix``) plus the new ids
(``prompt_suffix``), and read back whole (records.expand_prompt_ids, train.flatten)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aworld_graph import Agent, AgentConfig, Runners
from aworld_graph.checkpoint import open_store
from aworld_graph.examples import calculator
from aworld_graph.records import MIN_SHARED_IDS, compact_prompt_ids, expand_prompt_ids
from aworld_graph.train import UntrainableRun, flatten
from tests.server.conftest import LiveServer

END, ROLES = 0, {"system": 1, "user": 2, "assistant": 3, "tool": 4}


def _body(message: dict[str, Any]) -> list[int]:
    """A toy chat template: a message's text (or its calls' JSON) as character codes."""
    calls = [c["function"] for c in message.get("tool_calls") or []]
    text = json.dumps(calls) if calls else str(message.get("content") or "")
    return [ord(c) for c in text] + [END]


class TokenEndpoint:
    """A vLLM-shaped endpoint with the toy template: the reply's ids continue the prompt as
    the next prompt renders them. Replies are scripted; every (prompt, completion) is kept."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.seen: list[tuple[list[int], list[int]]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        prompt = [t for m in body["messages"] for t in [ROLES[m["role"]], *_body(m)]]
        prompt.append(ROLES["assistant"])
        message = {"role": "assistant", **self.replies.pop(0)}
        ids = _body(message)
        self.seen.append((prompt, ids))
        lp = {"token": "x", "logprob": -0.5, "bytes": [], "top_logprobs": []}
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            "logprobs": {"content": [lp] * len(ids)},
            "token_ids": ids,
        }
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "toy",
                "choices": [choice],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(ids)},
                "prompt_token_ids": prompt,
            }
        )


def _call(expression: str, n: int) -> dict[str, Any]:
    arguments = json.dumps({"expression": expression})
    function = {"name": "calculator", "arguments": arguments}
    return {
        "content": None,
        "tool_calls": [{"id": f"c{n}", "type": "function", "function": function}],
    }


def test_a_multi_turn_run_stores_each_prompt_once_and_reads_it_back_whole() -> None:
    endpoint = TokenEndpoint(
        [_call("17*23", 1), _call("391+1", 2), _call("392*2", 3), {"content": "784"}]
    )
    with LiveServer(endpoint.app) as server:
        conf = AgentConfig(
            llm_base_url=f"{server.url}/v1", llm_model_name="toy", record_tokens=True
        )
        solver = Agent(
            name="solver",
            system_prompt="Solve the task with the calculator, one step at a time, then answer.",
            tools=[calculator],
            conf=conf,
        )
        response = Runners.sync_run(input="What is (17*23+1)*2?", agent=solver)
    assert response.answer == "784"
    with open_store() as store:
        saved = store.get_tuple({"configurable": {"thread_id": response.thread_id}})
    assert saved is not None
    stored = [r for r in saved.checkpoint["channel_values"]["trace"] if r["kind"] == "llm"]
    assert len(stored) == len(endpoint.seen) == 4

    # the first call whole; each later one: the previous call's prompt and completion by
    # reference (the toy template continues them exactly), then the new ids
    assert "prompt_ids" in stored[0]["tokens"]
    for n in range(1, 4):
        tokens = stored[n]["tokens"]
        (before, sampled), (prompt, _) = endpoint.seen[n - 1], endpoint.seen[n]
        assert "prompt_ids" not in tokens
        assert tokens["prompt_prefix"]["length"] == len(before) + len(sampled)
        assert tokens["prompt_suffix"] == prompt[len(before) + len(sampled) :]

    # read back: exactly the ids the endpoint saw, from the store and through flatten
    whole = [r["tokens"]["prompt_ids"] for r in expand_prompt_ids(stored)]
    assert whole == [prompt for prompt, _ in endpoint.seen]
    assert [s.prompt_ids for s in flatten(response, reward=1.0)] == whole
    (turn,) = flatten(response, per="turn", reward=1.0)
    assert turn.ids == endpoint.seen[-1][0] + endpoint.seen[-1][1]

    # and smaller than the whole prompts: the stored form grows with the new ids only
    size = len(json.dumps([r["tokens"] for r in stored]))
    expanded = len(json.dumps([r["tokens"] for r in expand_prompt_ids(stored)]))
    assert size < expanded * 0.6
    kept = sum(len(r["tokens"].get("prompt_suffix", r["tokens"].get("prompt_ids"))) for r in stored)
    assert kept == len(endpoint.seen[-1][0]) - sum(len(ids) for _, ids in endpoint.seen[:-1])


def _llm(agent: str, prompt: list[int], ids: list[int], **extra: Any) -> dict[str, Any]:
    tokens = {"prompt_ids": prompt, "completion_ids": ids, "logprobs": [0.0] * len(ids)}
    return {"kind": "llm", "agent": agent, "tokens": tokens, **extra}


def _written(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` as the LLM node stores them, one after another."""
    trace: list[dict[str, Any]] = []
    for record in records:
        if record["kind"] == "llm":
            record = {
                **record,
                "tokens": compact_prompt_ids(record["tokens"], trace, record["agent"]),
            }
        trace.append(record)
    return trace


def test_round_trip_is_exact_and_a_mismatching_prefix_stays_whole() -> None:
    system = list(range(100, 100 + MIN_SHARED_IDS + 8))
    first = _llm("a", system + [1, 2], [3, 4])
    second = _llm("a", system + [1, 2, 3, 4, 5], [6])  # continues the first call
    other = _llm("b", system + [1, 2, 3, 4, 5], [7])  # another agent: no reference to a's
    changed = _llm("a", [9, *system, 1], [8])  # a different first id: nothing shared
    partial = _llm("a", [9, *system, 2], [8])  # shares a prefix inside the last prompt
    short = _llm("a", [9, 1, 2], [8])  # shares fewer than MIN_SHARED_IDS ids
    records = [first, {"kind": "tools"}, second, other, changed, partial, short]
    trace = _written(records)
    kinds = [sorted(k for k in r.get("tokens", {}) if k.startswith("prompt")) for r in trace]
    assert kinds == [
        ["prompt_ids"],
        [],
        ["prompt_prefix", "prompt_suffix"],
        ["prompt_ids"],
        ["prompt_ids"],
        ["prompt_prefix", "prompt_suffix"],
        ["prompt_ids"],
    ]
    assert trace[2]["tokens"]["prompt_prefix"]["length"] == len(system) + 4
    assert trace[2]["tokens"]["prompt_suffix"] == [5]
    assert trace[5]["tokens"]["prompt_prefix"]["length"] == len(system) + 1
    assert expand_prompt_ids(trace) == records  # exactly the ids written, key order aside
    assert [r.get("tokens", {}).get("prompt_ids") for r in expand_prompt_ids(trace)] == [
        r.get("tokens", {}).get("prompt_ids") for r in records
    ]


def test_records_moved_between_others_still_read_back() -> None:
    # a sub-run's records keep their order in the parent's trace; another run's calls of the
    # same agent may come between (two delegations to one member in one step)
    system = list(range(200, 200 + MIN_SHARED_IDS))
    run_a = _written([_llm("m", system + [1], [2]), _llm("m", system + [1, 2, 3], [4])])
    run_b = _written([_llm("m", system + [5], [6]), _llm("m", system + [5, 6, 7], [8])])
    parent = [_llm("p", [1], [2]), {"kind": "tools"}, run_a[0], run_b[0], run_a[1], run_b[1]]
    whole = [r["tokens"]["prompt_ids"] for r in expand_prompt_ids(parent) if r["kind"] == "llm"]
    assert whole == [[1], system + [1], system + [5], system + [1, 2, 3], system + [5, 6, 7]]


def test_a_reference_to_a_call_not_in_the_trace_is_refused_naming_it() -> None:
    system = list(range(300, 300 + MIN_SHARED_IDS))
    trace = _written([_llm("a", system, [1]), _llm("a", system + [1, 2], [3])])
    with pytest.raises(ValueError, match="trace record 0 .*agent 'a'.*first 33 ids"):
        expand_prompt_ids(trace[1:])
    state = {"thread_id": "t", "status": "finished", "trace": trace[1:], "rewards": []}
    with pytest.raises(UntrainableRun, match="run t: trace record 0"):
        flatten(state, reward=1.0)
