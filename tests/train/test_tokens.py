"""Token-level trajectories: what the model sampled, in each LLM call's trace record."""

from __future__ import annotations

import pytest

from aworld_graph import Agent, AgentConfig, Runners
from aworld_graph.checkpoint import open_store
from aworld_graph.examples import calculator
from aworld_graph.records import expand_prompt_ids
from aworld_graph.testing import FunctionModel
from aworld_graph.train.sequences import TokenizerMismatch, UntrainableRun, flatten
from tests.train import gguf


@pytest.mark.local_model
def test_embedded_model_tokens_decode_to_the_stored_text() -> None:
    solver = Agent(
        name="solver",
        system_prompt="Solve it.",
        tools=[calculator],
        conf=AgentConfig(record_tokens=True, params={"max_tokens": 24}),
    )
    response = Runners.sync_run(input="What is 17*23?", agent=solver)
    calls = [r for r in response.state["trace"] if r["kind"] == "llm"]
    assert calls
    tok = gguf.tokenizer()
    model_file = "gguf:" + __import__("aworld_graph.local", fromlist=["x"]).model_path().name
    for record in expand_prompt_ids(calls):  # later prompts are stored by reference
        tokens = record["tokens"]
        assert tokens["tokenizer"] == model_file
        ids = tokens["completion_ids"]
        assert len(ids) == len(tokens["logprobs"]) == len(tokens["mask"]) > 0
        assert all(lp <= 0.0 for lp in tokens["logprobs"])
        decoded = tok.decode(ids)
        start, end = tokens["text_span"]
        text = record["tool_calls"][0]["arguments"] if record["tool_calls"] else record["content"]
        assert decoded[start:end] == text  # the stored text, exactly, from the sampled ids
        prompt = tok.decode(tokens["prompt_ids"])
        assert prompt.endswith("<|im_start|>assistant\n")
        assert "What is 17*23?" in prompt
    # kept with the step in the checkpoint store, as the run's trace record
    with open_store() as store:
        saved = store.get_tuple({"configurable": {"thread_id": response.thread_id}})
    assert saved is not None
    stored = [r for r in saved.checkpoint["channel_values"]["trace"] if r["kind"] == "llm"]
    assert [r["tokens"] for r in stored] == [r["tokens"] for r in calls]
    assert all("prompt_token_ids" not in r["raw"] for r in stored)  # not kept twice
    # one sequence per call, the mask and logprobs the model gave
    seqs = flatten(response, reward=1.0)
    assert [s.completion_ids for s in seqs] == [r["tokens"]["completion_ids"] for r in calls]
    assert seqs[0].mask == calls[0]["tokens"]["mask"]


def test_a_model_without_token_ids_is_marked_and_not_trained_on() -> None:
    agent = Agent(
        name="a",
        system_prompt="s",
        model=FunctionModel(lambda messages, tools: "4"),
        conf=AgentConfig(record_tokens=True),
    )
    response = Runners.sync_run(input="2+2?", agent=agent)
    record = next(r for r in response.state["trace"] if r["kind"] == "llm")
    assert record["tokens"]["available"] is False
    assert "FunctionModel" in record["tokens"]["reason"]
    with pytest.raises(UntrainableRun, match="has no token ids"):
        flatten(response, reward=1.0)


def test_without_record_tokens_no_tokens_entry() -> None:
    agent = Agent(name="a", system_prompt="s", model=FunctionModel(lambda m, t: "4"))
    response = Runners.sync_run(input="2+2?", agent=agent)
    record = next(r for r in response.state["trace"] if r["kind"] == "llm")
    assert "tokens" not in record


def _state(status: str, calls: list[dict]) -> dict:
    trace = [
        {"kind": "llm", "agent": "a", "turn": "a#1", "step": i + 1, **c}
        for i, c in enumerate(calls)
    ]
    return {
        "thread_id": "t",
        "status": status,
        "trace": trace,
        "rewards": [
            {"level": "episode", "score": 0.5, "step": 9},
            {"source": "critic", "score": 0.25, "step": 1},
        ],
    }


def _call(prompt: list[int], ids: list[int], tokenizer: str = "tok-a") -> dict:
    return {
        "tokens": {
            "prompt_ids": prompt,
            "completion_ids": ids,
            "logprobs": [-0.5] * len(ids),
            "tokenizer": tokenizer,
        }
    }


def test_flatten_rule_per_turn_masks_what_came_between() -> None:
    state = _state("finished", [_call([1, 2], [3, 4]), _call([1, 2, 3, 4, 7, 8], [5])])
    (seq,) = flatten(state, per="turn")
    assert seq.prompt_ids == [1, 2]
    assert seq.completion_ids == [3, 4, 7, 8, 5]
    assert seq.mask == [1, 1, 0, 0, 1]
    assert seq.logprobs == [-0.5, -0.5, 0.0, 0.0, -0.5]
    assert seq.reward == 0.5 and seq.step_reward == 0.25
    per_call = flatten(state)
    assert [s.completion_ids for s in per_call] == [[3, 4], [5]]
    assert [s.step_reward for s in per_call] == [0.25, 0.0]


def test_failed_runs_and_mixed_tokenizers_are_refused() -> None:
    for status in ("error", "cancelled", "max_steps", "timeout"):
        with pytest.raises(UntrainableRun, match=status):
            flatten(_state(status, [_call([1], [2])]))
    mixed = _state("finished", [_call([1], [2]), _call([1, 2, 9], [3], tokenizer="tok-b")])
    with pytest.raises(TokenizerMismatch, match="tok-a.*tok-b"):
        flatten(mixed, per="turn")


@pytest.mark.local_model
def test_streamed_reply_brings_its_tokens_too() -> None:
    import asyncio

    from aworld_graph.local import LocalModel
    from aworld_graph.model import recording_tokens

    async def both() -> tuple:
        model = LocalModel(params={"max_tokens": 8})
        try:
            with recording_tokens():
                streamed = await model.complete([{"role": "user", "content": "Hi"}], on_token=print)
            plain = await model.complete([{"role": "user", "content": "Hi"}])
        finally:
            await model.aclose()
        return streamed, plain

    streamed, plain = asyncio.run(both())
    ids = streamed.tokens["completion_ids"]
    start, end = streamed.tokens["text_span"]
    assert gguf.tokenizer().decode(ids)[start:end] == streamed.content
    assert len(streamed.tokens["logprobs"]) == len(ids)
    assert plain.tokens is None  # not asked for outside recording_tokens()
